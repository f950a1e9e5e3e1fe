package tests

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/natstest"
)

// engine erase (the built binary) during an open turn purges the
// session's events but the SessionDeleted kept as its tombstone (a raw
// JetStream read finds that one only), leaves a bystander
// byte for byte, writes an audit record without the actor or channel,
// refuses the id afterwards, is refused to other channels, and the engine
// stays ready and restarts clean: the store check and the acknowledged
// watermark do not take the purge for data loss, after a stop, a crash and
// an engine rebuild.
func TestLifecycleEraseBinary(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := p.GoClient("web")
	for _, s := range []string{"victim", "bystander"} {
		if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable(), client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: "victim"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TurnDiscover(ctx, client.DiscoverRequest{Session: "victim", Names: []string{"send_message"}}); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	bystander := rawSubject(t, nc, "tools.events.bystander")
	if n := len(rawSubject(t, nc, "tools.events.victim")); n != 4 {
		t.Fatalf("victim has %d events before the erase, want 4", n)
	}
	// Another channel may not erase.
	if _, err := c.SessionDelete(ctx, client.DeleteRequest{Session: "victim", Erase: true}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("erase from channel web: %v, want forbidden", err)
	}
	out, err := p.runCLI(t, "erase", "victim")
	if err != nil || !strings.Contains(out, "erased") || !strings.Contains(out, "4 events") {
		t.Fatalf("engine erase: %v\n%s", err, out)
	}
	check := func(when string) {
		t.Helper()
		if got := rawSubject(t, nc, "tools.events.victim"); len(got) != 1 {
			t.Errorf("%s: the erased session has %d events in the stream, want its SessionDeleted only", when, len(got))
		}
		if got := rawSubject(t, nc, "tools.events.bystander"); strings.Join(got, ",") != strings.Join(bystander, ",") {
			t.Errorf("%s: bystander changed:\n%v\nwas\n%v", when, got, bystander)
		}
		if _, err := c.Intent(ctx, client.IntentRequest{Session: "victim"}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: intent of the erased id: %v, want deleted", when, err)
		}
		if _, err := c.Append(ctx, client.AppendRequest{Session: "victim", Commands: []client.Command{client.Enable()}}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: write to the erased id: %v, want deleted", when, err)
		}
		if v, err := c.Intent(ctx, client.IntentRequest{Session: "bystander"}); err != nil || len(v.Intent.Disabled) != 1 {
			t.Errorf("%s: bystander %+v %v", when, v, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, "TOOLS_AUDIT")
		if err != nil {
			t.Fatalf("%s: audit stream: %v", when, err)
		}
		m, err := st.GetLastMsgForSubject(ctx, "tools.audit.erase.victim")
		if err != nil {
			t.Fatalf("%s: audit record: %v", when, err)
		}
		rec := string(m.Data)
		if !strings.Contains(rec, `"session":"victim"`) || !strings.Contains(rec, `"purged":4`) || !strings.Contains(rec, `"phase":"done"`) || strings.Contains(rec, "test") || strings.Contains(rec, "web") || strings.Contains(rec, "actor") {
			t.Errorf("%s: audit record %s", when, rec)
		}
	}
	check("after erase")
	// The watermark records every second: it must not take the purge for
	// a loss (readiness stays 200).
	time.Sleep(2500 * time.Millisecond)
	resp, err := http.Get(p.HTTPURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz %d after the erase\n%s", resp.StatusCode, p.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "accepted-loss.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("accepted-loss.json after an erase: %v, want none (the audit stream records the purged range)", err)
	}
	p.Stop(t)
	p = startEngine(t, dir) // ready: the store check and the watermark passed
	c = p.GoClient("web")
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after a restart")
	p.Kill()
	p = startEngine(t, dir)
	c = p.GoClient("web")
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after a crash")
	// engine rebuild refolds every view from the log, which no longer
	// holds the erased session: the id stays refused (its audit record).
	p.Stop(t)
	if out, _, err := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("engine rebuild after an erase: %v\n%s", err, out)
	}
	p = startEngine(t, dir)
	c = p.GoClient("web")
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after engine rebuild")
}
