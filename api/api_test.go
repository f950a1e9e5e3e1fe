package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// outcome is everything a scenario observed, for comparison across
// transports.
type outcome struct {
	Append       wire.AppendReply
	Intent       wire.Session
	Resolve      wire.TurnView
	Begin        wire.TurnView
	Discover     wire.DiscoverReply
	Dispatch     wire.TurnView
	Inspect      wire.DispatchRecord
	CallCheck    wire.CallCheckReply
	CallUnknown  wire.CallCheckReply
	Checkpoint   wire.CheckpointReply
	End          wire.CheckpointReply
	Resume       wire.ResumeReply
	History      wire.HistoryOf[*service.Command]
	HistoryUntil wire.HistoryOf[*service.Command]
	Explain      wire.Explanation
	ExplainThen  wire.Explanation
	ExplainBatch wire.ExplainBatchReply
	Registry     wire.RegistryInfo
	Budget       deferral.BudgetTable
	RegistryDiff wire.RegistryDiff // the impact's counts depend on the other sessions
}

// scenario drives every operation for session s through c.
func scenario(t *testing.T, c *Client, s string) outcome {
	t.Helper()
	ctx := ctxT(t)
	var o outcome
	var err error
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// The default session plus web_search, minus bash.
	o.Append, err = c.Append(ctx, s, ptr(uint64(0)),
		events.ToolsToggled{Enabled: ptr(true)}, events.ToolDisabled{Name: "bash"}, events.WebSearchSet{Enabled: ptr(true)})
	must("append", err)
	if o.Append.LastSeq == 0 || o.Append.LastSeq-o.Append.FirstSeq != 2 {
		t.Fatalf("append stored %d..%d, want three events", o.Append.FirstSeq, o.Append.LastSeq)
	}
	firstWrite := o.Append.FirstSeq
	o.Intent, err = c.Intent(ctx, s, o.Append.LastSeq)
	must("intent", err)
	if in := o.Intent.Intent; in.Enabled == nil || !*in.Enabled || in.WebSearch == nil || !*in.WebSearch || !slices.Equal(in.Disabled, []string{"bash"}) {
		t.Fatalf("intent = %+v", in)
	}
	o.Resolve, err = c.Resolve(ctx, wire.ResolveRequest{Session: s, MinSeq: o.Append.LastSeq})
	must("resolve", err)
	if slices.Contains(o.Resolve.Tools, "bash") || !slices.Contains(o.Resolve.Provider, "web_search") || !slices.Contains(o.Resolve.Catalog, "send_message") {
		t.Fatalf("resolve: tools %v provider %v catalog %v", o.Resolve.Tools, o.Resolve.Provider, o.Resolve.Catalog)
	}
	o.Begin, err = c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s})
	must("begin turn", err)
	if !o.Begin.Frozen || o.Begin.Turn != 1 {
		t.Fatalf("begin: frozen %v turn %d", o.Begin.Frozen, o.Begin.Turn)
	}
	o.Discover, err = c.Discover(ctx, s, "", "send_message")
	must("discover", err)
	if !slices.Equal(o.Discover.Loaded, []string{"send_message"}) || len(o.Discover.Tools) != 1 || len(o.Discover.Tools[0].Parameters) == 0 {
		t.Fatalf("discover: loaded %v tools %+v", o.Discover.Loaded, o.Discover.Tools)
	}
	o.Dispatch, err = c.Dispatch(ctx, s, service.ProviderOpenAI)
	must("dispatch", err)
	if !slices.Contains(o.Dispatch.Provider, "send_message") || o.Dispatch.RenderedFor != "openai" {
		t.Fatalf("dispatch provider %v rendered for %q", o.Dispatch.Provider, o.Dispatch.RenderedFor)
	}
	o.Inspect, err = c.LastDispatch(ctx, s)
	must("inspect", err)
	if !slices.Equal(o.Inspect.Loaded, []string{"send_message"}) || o.Inspect.Turn != 1 {
		t.Fatalf("inspect = %+v", o.Inspect)
	}
	o.CallCheck, err = c.CallCheck(ctx, s, "send_message")
	must("call check", err)
	if !o.CallCheck.Callable || o.CallCheck.Reason != wire.CallCallable || o.CallCheck.Tool == nil || o.CallCheck.Decision != "allow" || !o.CallCheck.Loaded {
		t.Fatalf("call check send_message = %+v", o.CallCheck)
	}
	o.CallUnknown, err = c.CallCheck(ctx, s, "nosuch")
	must("call check unknown", err)
	if o.CallUnknown.Callable || o.CallUnknown.Reason != wire.CallUnknown {
		t.Fatalf("call check nosuch = %+v", o.CallUnknown)
	}
	o.Checkpoint, err = c.Checkpoint(ctx, s)
	must("checkpoint", err)
	if !slices.Equal(o.Checkpoint.Checkpoint.Loaded, []string{"send_message"}) || o.Checkpoint.Checkpoint.ContractHash != o.Begin.ContractHash {
		t.Fatalf("checkpoint = %+v", o.Checkpoint)
	}
	o.End, err = c.EndTurn(ctx, s)
	must("end turn", err)
	o.Resume, err = c.Resume(ctx, wire.ResumeRequest{Session: s})
	must("resume", err)
	if !o.Resume.Outcome.OK || !slices.Equal(o.Resume.Outcome.Restored, []string{"send_message"}) {
		t.Fatalf("resume = %+v", o.Resume)
	}
	o.History, err = c.History(ctx, wire.HistoryRequest{Session: s})
	must("history", err)
	o.HistoryUntil, err = c.History(ctx, wire.HistoryRequest{Session: s, Until: wire.UntilSeq(firstWrite + 1)})
	must("history until", err)
	if n := len(o.HistoryUntil.Entries); n != 2 || o.HistoryUntil.State.Intent.WebSearch != nil {
		t.Fatalf("history until %d: %d entries, state %+v", firstWrite+1, n, o.HistoryUntil.State)
	}
	o.Explain, err = c.Explain(ctx, wire.ExplainRequest{Session: s, Tool: "bash"})
	must("explain", err)
	if o.Explain.Included || o.Explain.Rule != "disabled-by-session" || o.Explain.Event == nil || o.Explain.Event.Type != "ToolDisabled" {
		t.Fatalf("explain = %+v", o.Explain)
	}
	// Before the ToolDisabled event, bash was a default tool.
	// Explain-batch answers what explain answers, per tool, in order.
	o.ExplainBatch, err = c.ExplainBatch(ctx, wire.ExplainBatchRequest{Session: s, Tools: []string{"bash", "read_file"}})
	must("explain batch", err)
	if len(o.ExplainBatch.Explanations) != 2 || !reflect.DeepEqual(o.ExplainBatch.Explanations[0], o.Explain) ||
		o.ExplainBatch.Explanations[1].Tool != "read_file" || !o.ExplainBatch.Explanations[1].Included {
		t.Fatalf("explain batch = %+v, want explain's answer for bash then read_file included", o.ExplainBatch)
	}
	o.ExplainThen, err = c.Explain(ctx, wire.ExplainRequest{Session: s, Tool: "bash", Until: wire.UntilSeq(firstWrite)})
	must("explain until", err)
	if !o.ExplainThen.Included {
		t.Fatalf("explain at %d = %+v", firstWrite, o.ExplainThen)
	}
	o.Registry, err = c.Registry(ctx)
	must("registry", err)
	o.Budget, err = c.Budget(ctx)
	must("budget", err)
	imp, err := c.RegistryDiff(ctx, editedRegistry(t, "scenario-2", "send_message", "Sends a message, edited."))
	must("registry diff", err)
	o.RegistryDiff = imp.Diff
	if len(imp.Diff.Changed) != 1 || imp.Diff.Changed[0].Name != "send_message" || !imp.Diff.AllHashesChange || imp.Sessions == 0 {
		t.Fatalf("registry diff = %+v", imp)
	}
	if !o.Budget.Reachable() || o.Budget.ReductionPercent < 30 {
		t.Fatalf("budget = %+v", o.Budget)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		list, err := c.Sessions(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(list, s) {
			return fmt.Errorf("sessions %v lack %q", list, s)
		}
		return nil
	})
	// A session of its own is deleted; reads of it answer deleted.
	gone := s + "-gone"
	_, err = c.Append(ctx, gone, nil, events.ToolsToggled{Enabled: ptr(true)})
	must("append to the session to delete", err)
	// Compaction purges events: a channel other than the erase
	// channel is refused before anything is written.
	var ae *APIError
	if _, err := c.Compact(ctx, wire.CompactRequest{Session: gone}); !errors.As(err, &ae) || ae.Code != wire.CodeForbidden {
		t.Fatalf("compact from a channel that is not the erase channel: %v, want forbidden", err)
	}
	del, err := c.Delete(ctx, wire.DeleteRequest{Session: gone, Reason: "test"})
	must("delete", err)
	if del.Seq == 0 || del.Erased {
		t.Fatalf("delete = %+v", del)
	}
	if _, err := c.Intent(ctx, gone, 0); !errors.Is(err, service.ErrDeleted) {
		t.Fatalf("intent of a deleted session: %v", err)
	}
	return o
}

// normalize drops what legitimately differs between two sessions of one
// stream: the session id, stream sequences, event ids, times, channel.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"session", "seq", "first_seq", "last_seq", "id", "event_ids", "time", "at_ms", "channel", "actor"} {
				delete(x, k)
			}
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(g)
}

// Every operation over HTTP and over NATS micro,
// against one real engine, gives the same results.
func TestEveryOperationBothTransports(t *testing.T) {
	e := newEnv(t, Config{})
	hc, hrec := record(e.httpClient())
	nc, nrec := record(e.natsClient())
	viaHTTP := scenario(t, hc, "s-http")
	viaNATS := scenario(t, nc, "s-nats")

	for _, op := range Operations() {
		if hrec.seen[op.Name] == 0 {
			t.Errorf("operation %s not exercised over HTTP", op.Name)
		}
		if nrec.seen[op.Name] == 0 {
			t.Errorf("operation %s not exercised over NATS", op.Name)
		}
	}
	a, b := reflect.ValueOf(viaHTTP), reflect.ValueOf(viaNATS)
	for i := 0; i < a.NumField(); i++ {
		name := a.Type().Field(i).Name
		if x, y := normalize(t, a.Field(i).Interface()), normalize(t, b.Field(i).Interface()); !reflect.DeepEqual(x, y) {
			xb, _ := json.Marshal(x)
			yb, _ := json.Marshal(y)
			t.Errorf("%s differs:\nhttp %s\nnats %s", name, xb, yb)
		}
	}
	if viaHTTP.Resolve.PrefixHash != viaNATS.Resolve.PrefixHash || viaHTTP.Resolve.ContractHash != viaNATS.Resolve.ContractHash {
		t.Errorf("resolution differs: prefix %s / %s, contract %s / %s",
			viaHTTP.Resolve.PrefixHash, viaNATS.Resolve.PrefixHash, viaHTTP.Resolve.ContractHash, viaNATS.Resolve.ContractHash)
	}

	// One session read both ways: byte-identical replies.
	ctx := ctxT(t)
	for _, s := range []string{"s-http", "s-nats"} {
		r1, err := e.httpClient().Resolve(ctx, wire.ResolveRequest{Session: s, Profile: "assistant"})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := e.natsClient().Resolve(ctx, wire.ResolveRequest{Session: s, Profile: "assistant"})
		if err != nil {
			t.Fatal(err)
		}
		j1, _ := json.Marshal(r1)
		j2, _ := json.Marshal(r2)
		if string(j1) != string(j2) {
			t.Errorf("session %s resolves differently:\nhttp %s\nnats %s", s, j1, j2)
		}
	}
}

// The per-turn override forms over both transports.
func TestOverride(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		s := "ov-" + t.Name()[len("TestOverride/"):]
		if _, err := c.Append(ctx, s, nil, events.PresetChosen{Preset: "research"}); err != nil {
			t.Fatal(err)
		}
		v, err := c.Resolve(ctx, wire.ResolveRequest{Session: s, Override: &wire.Override{Kind: intent.OverrideNames, Names: []string{"grep", "read_file", "nosuch"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v.Tools, []string{"grep", "read_file"}) || !slices.Equal(v.Unknown, []string{"nosuch"}) || v.Source != "override-names" {
			t.Fatalf("names override: tools %v unknown %v source %s", v.Tools, v.Unknown, v.Source)
		}
		v, err = c.Resolve(ctx, wire.ResolveRequest{Session: s, Override: &wire.Override{Kind: intent.OverrideEmpty}})
		if err != nil || len(v.Tools) != 0 || v.Source != "override-empty" {
			t.Fatalf("empty override: %v %v %s", err, v.Tools, v.Source)
		}
		v, err = c.Resolve(ctx, wire.ResolveRequest{Session: s, Override: &wire.Override{Kind: intent.OverrideIntent, Intent: intent.Intent{Preset: "minimal"}}})
		if err != nil || !slices.Equal(v.Tools, []string{"read_file", "edit_file", "bash", "tool_search"}) {
			t.Fatalf("intent override: %v %v", err, v.Tools)
		}
		// History and explain take the override too (GET: JSON in the query).
		ex, err := c.Explain(ctx, wire.ExplainRequest{Session: s, Tool: "bash", Override: &wire.Override{Kind: intent.OverrideEmpty}})
		if err != nil || ex.Included || ex.Rule != "override-empty" {
			t.Fatalf("explain with override: %v %+v", err, ex)
		}
	})
}
