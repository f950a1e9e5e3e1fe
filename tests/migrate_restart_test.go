package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// storedSubjects reads, with a plain JetStream client, every event
// stream's subjects (the one stream's and three partitions') with their
// messages, as sequence:payload, in stream order.
func storedSubjects(t *testing.T, url string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc := natstest.Connect(t, url)
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, name := range []string{"TOOLS_EVENTS", "TOOLS_EVENTS_0", "TOOLS_EVENTS_1", "TOOLS_EVENTS_2"} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := st.Info(ctx, natsjs.WithSubjectFilter("tools.events.>"))
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		for subj := range info.State.Subjects {
			for seq := uint64(1); ; {
				m, err := st.GetMsg(ctx, seq, natsjs.WithGetMsgSubject(subj))
				if errors.Is(err, natsjs.ErrMsgNotFound) {
					break
				}
				if err != nil {
					t.Fatalf("read %s of %s from %d: %v", subj, name, seq, err)
				}
				out[name+" "+subj] = append(out[name+" "+subj], fmt.Sprintf("%d:%x", m.Sequence, m.Data))
				seq = m.Sequence + 1
			}
		}
	}
	return out
}

// A migrated store takes erases and compactions of sessions on either
// side (kept on the one stream, new in a partition); then the server
// rewrites the purged blocks (1 s sync interval here, 2 min by default),
// and after a clean stop, a kill -9, a server restart and an engine
// rebuild the engine starts each time, every other session's events are
// stored byte for byte, the erased ids stay gone, the compacted sessions
// read as before, and new appends on either side are folded.
func TestMigratedStoreRestartsAfterErasesCompactionsAndTheServersRewrite(t *testing.T) {
	store := t.TempDir()
	startServer := func() (*server.Server, string) {
		srv := natstest.ServerWith(t, server.Options{StoreDir: store, SyncInterval: time.Second})
		return srv, srv.ClientURL()
	}
	srv, url := startServer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	appendN := func(p *engineProc, session string, n int) {
		t.Helper()
		appendToggles(ctx, t, p.GoClient("web"), session, n)
	}
	one := startEngine(t, t.TempDir(), "--nats", url)
	appendN(one, "victim", 2)
	appendN(one, "keep", 1)
	// 42,000 events of about 200 bytes: the one stream's first 8 MiB
	// block is sealed, so the server rewrites it once the purges empty it.
	appendN(one, "big", 42_000)
	appendN(one, "keep", 20)
	one.Stop(t)
	if out, err := migrateCLI(t, url, "--partitions", "3", "--settle", "1s"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}

	args := func() []string { return []string{"--nats", url, "--partitions", "3"} }
	p := startEngine(t, t.TempDir(), args()...)
	appendN(p, "fresh-victim", 3)
	appendN(p, "fresh", 2)
	appendN(p, "fresh-big", 40)
	ops := p.GoClient("ops")
	for _, s := range []string{"victim", "fresh-victim"} {
		if _, err := ops.SessionDelete(ctx, client.DeleteRequest{Session: s, Erase: true}); err != nil {
			t.Fatalf("erase %s: %v", s, err)
		}
	}
	for _, s := range []string{"big", "fresh-big"} {
		if _, err := ops.SessionCompact(ctx, client.CompactRequest{Session: s}); err != nil {
			t.Fatalf("compact %s: %v", s, err)
		}
	}
	appendN(p, "big", 3)
	appendN(p, "keep", 1)
	appendN(p, "fresh-big", 3)
	appendN(p, "late", 5)
	want := storedSubjects(t, url)
	for key, n := range map[string]int{
		"TOOLS_EVENTS tools.events.keep":   21, // its second run's first Enable changes nothing
		"TOOLS_EVENTS tools.events.big":    4,  // the snapshot and 3
		"TOOLS_EVENTS tools.events.victim": 1,  // the tombstone
		fmt.Sprintf("TOOLS_EVENTS_%d tools.events.%d.fresh-big", events.Partition("fresh-big", 3), events.Partition("fresh-big", 3)):          4,
		fmt.Sprintf("TOOLS_EVENTS_%d tools.events.%d.fresh-victim", events.Partition("fresh-victim", 3), events.Partition("fresh-victim", 3)): 1,
	} {
		if len(want[key]) != n {
			t.Fatalf("%s holds %d events before the restarts, want %d; stored: %d subjects", key, len(want[key]), n, len(want))
		}
	}

	waitFirstBlockRewritten(t, store)

	stage := 0
	check := func(when string, p *engineProc) {
		t.Helper()
		// The engine folds every stream: after a kill -9, once the dead
		// engine's runner leases have expired.
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			var live struct {
				Info struct {
					Partitions []struct {
						Stream string `json:"stream"`
						Runner bool   `json:"projection_runner"`
					} `json:"partitions"`
				} `json:"info"`
			}
			_, body := rtDo(t, "GET", p.HTTPURL+"/healthz", nil)
			if err := json.Unmarshal(body, &live); err != nil {
				return fmt.Errorf("healthz %s: %w", body, err)
			}
			if len(live.Info.Partitions) != 4 {
				return fmt.Errorf("healthz lists %d streams, want 4: %s", len(live.Info.Partitions), body)
			}
			for _, s := range live.Info.Partitions {
				if !s.Runner {
					return fmt.Errorf("%s: the engine does not fold %s yet", when, s.Stream)
				}
			}
			return nil
		})
		got := storedSubjects(t, url)
		for key, msgs := range want {
			if strings.Join(got[key], ",") != strings.Join(msgs, ",") {
				t.Errorf("%s: %s holds %d events, want the %d stored before, byte for byte", when, key, len(got[key]), len(msgs))
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d subjects stored, want %d", when, len(got), len(want))
		}
		c := p.GoClient("web")
		for _, s := range []string{"victim", "fresh-victim"} {
			if _, err := c.Intent(ctx, client.IntentRequest{Session: s}); !errors.Is(err, client.ErrDeleted) {
				t.Errorf("%s: intent of the erased id %s: %v, want deleted", when, s, err)
			}
		}
		for _, s := range []string{"big", "fresh-big"} {
			if v, err := c.Intent(ctx, client.IntentRequest{Session: s}); err != nil || v.Intent.Enabled == nil || !*v.Intent.Enabled {
				t.Errorf("%s: %s after its compaction: %+v, %v; want enabled", when, s, v, err)
			}
		}
		stage++
		tool := []string{"bash", "grep", "web_fetch", "glob"}[stage%4]
		for _, s := range []string{"keep", "fresh"} {
			if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool(tool)}}); err != nil {
				t.Errorf("%s: append to %s: %v", when, s, err)
			}
			natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
				v, err := c.Intent(ctx, client.IntentRequest{Session: s})
				if err != nil {
					return err
				}
				if !slices.Contains(v.Intent.Disabled, tool) {
					return fmt.Errorf("%s: %s's view does not show %s disabled yet: %v", when, s, tool, v.Intent.Disabled)
				}
				return nil
			})
		}
		want = storedSubjects(t, url)
	}

	p.Stop(t)
	p = startEngine(t, t.TempDir(), args()...)
	check("after SIGTERM", p)
	p.Kill()
	p = startEngine(t, t.TempDir(), args()...)
	check("after kill -9", p)
	p.Stop(t)
	srv.Shutdown()
	srv.WaitForShutdown()
	_, url = startServer()
	p = startEngine(t, t.TempDir(), args()...)
	check("after a server restart", p)
	p.Stop(t)
	rctx, rcancel := context.WithTimeout(ctx, 120*time.Second)
	defer rcancel()
	if out, err := exec.CommandContext(rctx, engineBin, "rebuild", "--nats", url).CombinedOutput(); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out)
	}
	p = startEngine(t, t.TempDir(), args()...)
	check("after engine rebuild", p)
}
