package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

func newEngine(t *testing.T) *service.Engine {
	t.Helper()
	return newEngineWith(t, service.Config{})
}

func newEngineWith(t *testing.T, cfg service.Config) *service.Engine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = proj.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return service.New(log, proj, resolver.Default(), cfg)
}

func on(b bool) *bool { return &b }

var web = service.Origin{Channel: "web", Actor: "alice"}

// R8, R24: a session with {enabled:true} resolves to the live defaults and
// the write is visible to a read-your-writes read.
func TestApplyAndResolve(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	v, err := e.Resolve(ctx, "s1", service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Source != "defaults" || len(v.Tools) == 0 {
		t.Fatalf("fresh session resolves from %q with %d tools, want defaults", v.Source, len(v.Tools))
	}
	res, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(true)}, events.WebSearchSet{Enabled: on(true)}, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if res.First != 1 || res.Last != 3 {
		t.Fatalf("append result %+v, want seqs 1..3", res)
	}
	v, err = e.Resolve(ctx, "s1", service.ResolveRequest{MinSeq: res.Last})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(v.Tools, resolver.WebSearch) || slices.Contains(v.Tools, "bash") {
		t.Fatalf("tools %v: want web_search overlaid and bash disabled", v.Tools)
	}
	// R12/R15: the deferred defaults are in the catalog, not the array.
	if !slices.Contains(v.Catalog, "playwright_browser") || slices.Contains(v.Provider, "playwright_browser") {
		t.Fatalf("playwright_browser: provider %v catalog %v", v.Provider, v.Catalog)
	}
	// R9: the same intent renders the same bytes.
	v2, _ := e.Resolve(ctx, "s1", service.ResolveRequest{MinSeq: res.Last})
	if string(v.Rendering) != string(v2.Rendering) || v.PrefixHash != v2.PrefixHash {
		t.Fatal("two resolutions of one intent rendered different bytes")
	}
}

// R2: a materialized list is refused with the advice to store intent.
func TestApplyRefusesMaterialized(t *testing.T) {
	e := newEngine(t)
	_, err := e.Apply(context.Background(), "s1", web, nil, events.ToolsPicked{Names: e.Registry().DefaultTools()})
	if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "store the intent instead") {
		t.Fatalf("error = %v, want a refusal that says to store the intent", err)
	}
}

// R23: an expected sequence that is stale is a conflict; without one, retry-
// safe commands from two racing channels are all applied.
func TestApplyConflictAndRetry(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.Apply(ctx, "s", web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	stale := uint64(0)
	_, err := e.Apply(ctx, "s", web, &stale, events.PresetChosen{Preset: "research"})
	var ce *jetstream.ConflictError
	if !errors.As(err, &ce) || ce.Actual != 1 {
		t.Fatalf("error = %v, want conflict at 1", err)
	}
	// Two engines on one log race to disable different tools.
	names := []string{"bash", "grep", "glob", "list_dir", "web_fetch", "todo_write"}
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := service.Origin{Channel: []string{"web", "tui"}[i%2], Actor: "u"}
			if _, err := e.Apply(ctx, "s", o, nil, events.ToolDisabled{Name: n}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err := e.Session(ctx, "s", 7)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(names)
	slices.Sort(want)
	if !slices.Equal(st.Intent.Disabled, want) {
		t.Fatalf("disabled = %v, want %v (no lost update)", st.Intent.Disabled, want)
	}
}

// R16, R19, R20: a turn freezes its tools; tool_search loads a deferred tool
// into the next request; the safe point checkpoints it; resume restores it
// while the contract is unchanged and refuses with a reason after a
// registry change.
func TestTurnLifecycleAndResume(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	v, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Turn != 1 || !v.Frozen || slices.Contains(v.Provider, "send_message") {
		t.Fatalf("begin turn: %+v", v)
	}
	d, err := e.Discover(ctx, "s", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tools) != 1 || len(d.Tools[0].Parameters) == 0 {
		t.Fatalf("tool_search returned %+v, want the full schema", d.Tools)
	}
	if !slices.Contains(d.View.Provider, "send_message") || slices.Contains(d.View.Catalog, "send_message") {
		t.Fatalf("after discovery provider %v catalog %v", d.View.Provider, d.View.Catalog)
	}
	disp, err := e.Dispatch(ctx, "s", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(disp.Provider, "send_message") {
		t.Fatal("dispatch lost the discovered tool")
	}
	if rec, ok := e.LastDispatch("s"); !ok || !slices.Contains(rec.Loaded, "send_message") {
		t.Fatalf("R21 dispatch classification = %+v", rec)
	}
	cp, err := e.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cp.Record.Loaded, []string{"send_message"}) {
		t.Fatalf("checkpoint loaded %v", cp.Record.Loaded)
	}
	r, err := e.Resume(ctx, "s", web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Outcome.OK || !slices.Equal(r.Outcome.Restored, []string{"send_message"}) {
		t.Fatalf("resume = %+v, want send_message restored", r.Outcome)
	}
	// Change send_message's schema: resume must refuse and say why.
	e.SetRegistry(changedRegistry(t, e.Registry(), "send_message"))
	r, err = e.Resume(ctx, "s", web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome.OK || len(r.Outcome.Restored) != 0 || !strings.Contains(r.Outcome.Reason, "send_message") {
		t.Fatalf("resume after change = %+v, want refusal naming send_message", r.Outcome)
	}
	st, err := e.Session(ctx, "s", r.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Loaded) != 0 {
		t.Fatalf("after refused resume loaded = %v, want empty", st.Loaded)
	}
}

// changedRegistry returns reg with one tool's description changed and a new
// version.
func changedRegistry(t *testing.T, reg *resolver.Registry, tool string) *resolver.Registry {
	t.Helper()
	data, err := reg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	file["version"] = reg.Version() + "-changed"
	for _, x := range file["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == tool {
			m["description"] = m["description"].(string) + " Changed."
		}
	}
	data, _ = json.Marshal(file)
	out, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// R16: an unknown provider rendering is refused on every turn operation,
// naming the provider.
func TestUnknownProviderRefused(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discover(ctx, "s", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}, Provider: "gemini"}); !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "gemini") {
		t.Fatalf("Discover with provider gemini: %v", err)
	}
	if _, err := e.Dispatch(ctx, "s", "gemini"); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("Dispatch with provider gemini: %v", err)
	}
}
