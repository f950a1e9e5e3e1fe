package tests

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// Under the documented server config (deploy/nats-server.conf): the
// retention's compaction goes through the eraser user (its audit record
// and the purge below the snapshot), and encrypt mode's actor keys through
// the engine user, so neither is refused by the permissions an operator
// copies from deploy/.
func TestDeployConfigCompactAndActors(t *testing.T) {
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	keyFile := filepath.Join(t.TempDir(), "actor.key")
	if err := os.WriteFile(keyFile, []byte("8f1d0c6a4b2e9f7a3c5d1e0b9a8f7e6d5c4b3a291807f6e5d4c3b2a1908f7e6d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startEngine(t, t.TempDir(), append(rtDeployArgs(conf, pw),
		"--nats-erase-user", "eraser", "--nats-erase-password", pw["eraser"].password,
		"--actor-mode", "encrypt", "--actor-key-file", keyFile,
		"--retain-idle", "90d", "--retain-action", "compact", "--retain-tick", "200ms")...)
	ctx := e2eCtx(t)
	admin := permConnect(t, p.NATSURL, "admin", pw["admin"])
	backend := permConnect(t, p.NATSURL, "backend", pw["backend"])
	publishAgedLog(t, backend.nc, "dormant", time.Now().Add(-200*24*time.Hour),
		events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"}, events.ToolDisabled{Name: "grep"})
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if n := len(rawSubject(t, admin.nc, "tools.events.dormant")); n != 1 {
			return errors.New("not compacted yet: " + strconv.Itoa(n) + " messages; engine log: " + tail(p.Stderr.String()))
		}
		return nil
	})
	if env := lastRaw(t, admin.nc, "dormant"); env.Type != events.TypeSessionCompacted {
		t.Fatalf("dormant's one message is %s, want the snapshot", env.Type)
	}

	web := permConnect(t, p.NATSURL, "web", pw["web"])
	res, err := newNATSEngineClient(web.nc, client.WithChannel("web"), client.WithActor("alice@web")).
		Append(ctx, "sealed", nil, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatalf("append in encrypt mode under the deploy config: %v; engine log: %s", err, tail(p.Stderr.String()))
	}
	if env := lastRaw(t, admin.nc, "sealed"); !strings.HasPrefix(env.Actor, "e1:") {
		t.Fatalf("stored actor %q, want an e1: value", env.Actor)
	}
	h, err := p.Client("").History(ctx, wire.HistoryRequest{Session: "sealed"})
	if err != nil || len(h.Entries) != 1 || h.Entries[0].Seq != res.LastSeq || h.Entries[0].Actor != "alice@web" {
		t.Fatalf("history of the sealed session: %+v %v, want actor alice@web", h.Entries, err)
	}
}
