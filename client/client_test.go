package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/intent"
)

func clients(t *testing.T) map[string]*client.Client {
	t.Helper()
	nc, err := nats.Connect(engineNATS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return map[string]*client.Client{
		"http": client.NewHTTP(engineHTTP, client.WithChannel("web"), client.WithActor("alice")),
		"nats": client.NewNATS(nc, client.WithChannel("web"), client.WithActor("alice")),
	}
}

// Every method works over both transports against a real
// engine, and the engine's errors come back as *client.Error matching
// the sentinels.
func TestEveryOperationBothTransports(t *testing.T) {
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := "every-" + name
			on := true
			app, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable(), client.DisableTool("bash"), client.WebSearch(&on)}})
			if err != nil || app.LastSeq != app.FirstSeq+2 || app.State.Intent.Enabled == nil || !*app.State.Intent.Enabled {
				t.Fatalf("Append = %+v, %v", app, err)
			}
			// Sequences are the stream's: a session's events are not numbered 1, 2, 3.
			stale := app.FirstSeq
			if _, err := c.Append(ctx, client.AppendRequest{Session: s, ExpectedSeq: &stale, Commands: []client.Command{client.Disable()}}); !errors.Is(err, client.ErrConflict) {
				t.Fatalf("stale expected_seq: %v, want a conflict", err)
			} else if e := (*client.Error)(nil); !errors.As(err, &e) || e.Status != 409 || e.Actual != app.LastSeq {
				t.Fatalf("conflict error %#v", err)
			}
			st, err := c.Intent(ctx, client.IntentRequest{Session: s, MinSeq: app.LastSeq})
			if err != nil || st.Seq != app.LastSeq || !slices.Equal(st.Intent.Disabled, []string{"bash"}) {
				t.Fatalf("Intent = %+v, %v", st, err)
			}
			v, err := c.Resolve(ctx, client.ResolveRequest{Session: s, MinSeq: app.LastSeq, Provider: "openai"})
			if err != nil || slices.Contains(v.Tools, "bash") || v.Tools[len(v.Tools)-1] != "web_search" || v.RenderedFor != "openai" || !json.Valid(v.Rendering) {
				t.Fatalf("Resolve = %v, %v", v.Tools, err)
			}
			ov, err := c.Resolve(ctx, client.ResolveRequest{Session: s, Override: &client.Override{Kind: intent.OverrideNames, Names: []string{"grep", "read_file"}}})
			if err != nil || !slices.Equal(ov.Tools, []string{"grep", "read_file"}) {
				t.Fatalf("Resolve with override = %v, %v", ov.Tools, err)
			}
			h, err := c.History(ctx, client.HistoryRequest{Session: s, Until: client.UntilSeq(app.FirstSeq + 1)})
			if err != nil || len(h.Entries) != 2 || h.Entries[1].Payload["type"] != "ToolDisabled" || h.Entries[0].Channel != "web" {
				t.Fatalf("History = %+v, %v", h.Entries, err)
			}
			ex, err := c.Explain(ctx, client.ExplainRequest{Session: s, Tool: "bash"})
			if err != nil || ex.Included || ex.Event == nil || ex.Event.Seq != app.FirstSeq+1 {
				t.Fatalf("Explain = %+v, %v", ex, err)
			}
			if _, err := c.TurnEnd(ctx, client.TurnRequest{Session: s}); !errors.Is(err, client.ErrNoTurn) {
				t.Fatalf("EndTurn without a turn: %v, want no_turn", err)
			}
			bt, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: s})
			if err != nil || !bt.Frozen || bt.Turn != 1 {
				t.Fatalf("BeginTurn = %+v, %v", bt, err)
			}
			d, err := c.TurnDiscover(ctx, client.DiscoverRequest{Session: s, Input: json.RawMessage(`{"names":["send_message"]}`)})
			if err != nil || !slices.Equal(d.Loaded, []string{"send_message"}) || !json.Valid(d.Output) {
				t.Fatalf("Discover = %+v, %v", d, err)
			}
			if _, err := c.TurnDispatch(ctx, client.DispatchRequest{Session: s}); err != nil {
				t.Fatal(err)
			}
			rec, err := c.TurnInspect(ctx, client.TurnRequest{Session: s})
			if err != nil || !slices.Contains(rec.Loaded, "send_message") {
				t.Fatalf("LastDispatch = %+v, %v", rec, err)
			}
			cp, err := c.TurnCheckpoint(ctx, client.TurnRequest{Session: s})
			if err != nil || !slices.Equal(cp.Checkpoint.Loaded, []string{"send_message"}) {
				t.Fatalf("Checkpoint = %+v, %v", cp, err)
			}
			end, err := c.TurnEnd(ctx, client.TurnRequest{Session: s})
			if err != nil || end.Checkpoint.Turn != 1 {
				t.Fatalf("EndTurn = %+v, %v", end, err)
			}
			res, err := c.Resume(ctx, client.ResumeRequest{Session: s})
			if err != nil || !res.Outcome.OK || !slices.Equal(res.Outcome.Restored, []string{"send_message"}) {
				t.Fatalf("Resume = %+v, %v", res, err)
			}
			// The session list comes from the stored views, written a
			// moment after the events: wait for it, bounded by ctx.
			for {
				list, err := c.Sessions(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(list.Sessions, s) {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("Sessions = %v: %s never listed", list.Sessions, s)
				case <-time.After(20 * time.Millisecond):
				}
			}
			reg, err := c.Registry(ctx)
			if err != nil || reg.Version == "" || len(reg.Tools) == 0 {
				t.Fatalf("Registry = %+v, %v", reg.Version, err)
			}
			b, err := c.Budget(ctx)
			if err != nil || b.Tools == 0 || b.WithDeferral.Real == 0 {
				t.Fatalf("Budget = %+v, %v", b, err)
			}
			if _, err := c.Intent(ctx, client.IntentRequest{Session: "a.b"}); !errors.Is(err, client.ErrInvalid) {
				t.Fatalf("bad session id: %v, want invalid", err)
			}
		})
	}
}

// A program that imports the client does not pull in the embedded NATS
// server, the tokenizer or any engine package but the stdlib-only wire
// vocabulary, the stdlib-only intent leaf whose Intent the wire carries
// and the stdlib-only internal/clip, so it stays small (the size of a
// 20-line client is logged).
func TestClientDependenciesAreLight(t *testing.T) {
	lightDeps := []string{"github.com/toolintent/engine/client", "github.com/toolintent/engine/wire", "github.com/toolintent/engine/intent", "github.com/toolintent/engine/internal/clip"}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		switch {
		case strings.HasPrefix(d, "github.com/nats-io/nats-server"),
			strings.HasPrefix(d, "github.com/tiktoken-go/"),
			strings.HasPrefix(d, "github.com/toolintent/engine/") && !slices.Contains(lightDeps, d):
			t.Errorf("the client imports %s", d)
		}
	}
	if !slices.Contains(deps, "github.com/nats-io/nats.go") {
		t.Errorf("go list -deps lists no nats.go: %v", deps)
	}
	bin := filepath.Join(t.TempDir(), "tiny")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/tiny").CombinedOutput(); err != nil {
		t.Fatalf("build the 20-line client: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a 20-line client (client/testdata/tiny) is %.1f MB", float64(fi.Size())/1e6)
}
