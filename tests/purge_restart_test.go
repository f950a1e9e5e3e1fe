package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/natstest"
)

// eventStream opens the event stream with a plain JetStream client.
func eventStream(ctx context.Context, t *testing.T, nc *nats.Conn) (natsjs.JetStream, natsjs.Stream) {
	t.Helper()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	return js, st
}

// subjectCounts reads, with a plain JetStream client, how many messages
// each subject of the event stream holds.
func subjectCounts(t *testing.T, nc *nats.Conn) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, st := eventStream(ctx, t, nc)
	info, err := st.Info(ctx, natsjs.WithSubjectFilter("tools.events.>"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// appendToggles appends n events to session through c, in requests of
// 100: Enable and Disable in turn, each about 200 bytes stored.
func appendToggles(ctx context.Context, t *testing.T, c *client.Client, session string, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 100)
		cmds := make([]client.Command, k)
		for i := range cmds {
			cmds[i] = client.Enable()
			if i%2 == 1 {
				cmds[i] = client.Disable()
			}
		}
		if _, err := c.Append(ctx, client.AppendRequest{Session: session, Commands: cmds}); err != nil {
			t.Fatalf("append %d to %s: %v", k, session, err)
		}
		n -= k
	}
}

// waitFirstBlockRewritten waits until the server, in store directory
// dir, has rewritten the event stream's first block without its purged
// records (under 1 MiB of its sealed 8 MiB).
func waitFirstBlockRewritten(t *testing.T, dir string) {
	t.Helper()
	blk := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "msgs", "1.blk")
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		fi, err := os.Stat(blk)
		if err != nil {
			return err
		}
		if fi.Size() > 1<<20 {
			return fmt.Errorf("1.blk is %d bytes: the server has not rewritten it yet", fi.Size())
		}
		return nil
	})
}

// An erase and a compaction, then the server's own rewrite of the purged
// blocks (nats-server drops the purged records from a sealed block at its
// sync interval, 1 s here, 2 min by default), then a clean stop, a kill -9
// and an engine rebuild: after each the engine starts and every
// acknowledged event of every other session is in the stream, byte for
// byte, as an independent reader counts them; the erased id stays 410.
func TestPurgedBlocksRewrittenThenRestart(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--sync-interval", "1s"}
	p := startEngine(t, dir, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	web, ops := p.GoClient("web"), p.GoClient("ops")
	appendN := func(session string, n int) { t.Helper(); appendToggles(ctx, t, web, session, n) }
	appendN("a0", 1)
	appendN("victim", 2)
	appendN("keep", 1)
	// 42,000 events of about 200 bytes: the stream's first 8 MiB block is
	// sealed, so the server rewrites it once the purges empty it.
	appendN("big", 42_000)
	appendN("keep", 20)
	if _, err := ops.SessionDelete(ctx, client.DeleteRequest{Session: "victim", Erase: true}); err != nil {
		t.Fatalf("erase victim: %v", err)
	}
	if _, err := ops.SessionCompact(ctx, client.CompactRequest{Session: "big"}); err != nil {
		t.Fatalf("compact big: %v", err)
	}
	appendN("big", 3)
	appendN("keep", 1)
	appendN("late", 5)

	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	want := subjectCounts(t, nc)
	raw := map[string][]string{}
	for subj := range want {
		raw[subj] = rawSubject(t, nc, subj)
	}
	// keep: 1 + 19 + 1 (its second run's first Enable changes nothing and
	// is not stored); big: the snapshot and 3.
	if want["tools.events.keep"] != 21 || want["tools.events.big"] != 4 || want["tools.events.late"] != 5 || want["tools.events.a0"] != 1 {
		t.Fatalf("subjects before the restarts: %v", want)
	}
	nc.Close()

	waitFirstBlockRewritten(t, dir)

	stage := 0
	check := func(when string, p *engineProc) {
		t.Helper()
		nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
		defer nc.Close()
		got := subjectCounts(t, nc)
		for subj, n := range want {
			if got[subj] != n {
				t.Errorf("%s: %s holds %d messages, want %d", when, subj, got[subj], n)
			}
			if r := rawSubject(t, nc, subj); strings.Join(r, ",") != strings.Join(raw[subj], ",") {
				t.Errorf("%s: %s changed", when, subj)
			}
		}
		c := p.GoClient("web")
		if _, err := c.Intent(ctx, client.IntentRequest{Session: "victim"}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: intent of the erased id: %v, want deleted", when, err)
		}
		if v, err := c.Intent(ctx, client.IntentRequest{Session: "big"}); err != nil || v.Intent.Enabled == nil || !*v.Intent.Enabled {
			t.Errorf("%s: big after its compaction: %+v, %v; want enabled", when, v, err)
		}
		stage++
		tool := []string{"bash", "grep", "web_fetch"}[stage%3]
		if _, err := c.Append(ctx, client.AppendRequest{Session: "keep", Commands: []client.Command{client.DisableTool(tool)}}); err != nil {
			t.Errorf("%s: append to keep: %v", when, err)
		}
		want["tools.events.keep"]++
		raw["tools.events.keep"] = rawSubject(t, nc, "tools.events.keep")
	}

	p.Stop(t)
	p = startEngine(t, dir, args...)
	check("after SIGTERM", p)
	p.Kill()
	p = startEngine(t, dir, args...)
	check("after kill -9", p)
	p.Stop(t)
	if out, took, err := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out)
	} else {
		t.Logf("rebuild took %v", took.Round(time.Millisecond))
	}
	p = startEngine(t, dir, args...)
	check("after engine rebuild", p)
}
