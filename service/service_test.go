package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
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
	e, _ := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), cfg, true)
	return e
}

// stackOn wires what a service test needs on the NATS server at url: a
// log with lcfg, its projection (running when project: one engine of a
// stream does) and an engine with cfg and reg over them, all stopped when
// the test ends.
func stackOn(t testing.TB, url string, lcfg jetstream.LogConfig, reg *resolver.Registry, cfg service.Config, project bool) (*service.Engine, *jetstream.Log) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc := natstest.Connect(t, url)
	log, err := jetstream.OpenLog(ctx, nc, lcfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	if project {
		go func() { defer close(done); _ = proj.Run(ctx) }()
	} else {
		close(done)
	}
	t.Cleanup(func() { cancel(); <-done; nc.Close() })
	return service.New(log, proj, reg, cfg), log
}

func on(b bool) *bool { return &b }

var web = service.Origin{Channel: "web", Actor: "alice"}

// A session with {enabled:true} resolves to the live defaults and
// the write is visible to a read-your-writes read.
func TestApplyAndResolve(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	v, err := e.Resolve(ctx, "s1", service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
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
	v, err = e.Resolve(ctx, "s1", service.ResolveRequest{Provider: service.ProviderAnthropicEngine, MinSeq: res.Last})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(v.Tools, resolver.WebSearch) || slices.Contains(v.Tools, "bash") {
		t.Fatalf("tools %v: want web_search overlaid and bash disabled", v.Tools)
	}
	// The deferred defaults are in the catalog, not the array.
	if !slices.Contains(v.Catalog, "playwright_browser") || slices.Contains(v.Provider, "playwright_browser") {
		t.Fatalf("playwright_browser: provider %v catalog %v", v.Provider, v.Catalog)
	}
	// The same intent renders the same bytes.
	v2, _ := e.Resolve(ctx, "s1", service.ResolveRequest{Provider: service.ProviderAnthropicEngine, MinSeq: res.Last})
	if string(v.Rendering) != string(v2.Rendering) || v.PrefixHash != v2.PrefixHash {
		t.Fatal("two resolutions of one intent rendered different bytes")
	}
}

// A materialized list is refused with the advice to store intent.
func TestApplyRefusesMaterialized(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	_, err := e.Apply(context.Background(), "s1", web, nil, events.ToolsPicked{Names: e.Registry().DefaultTools()})
	if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "store the intent instead") {
		t.Fatalf("error = %v, want a refusal that says to store the intent", err)
	}
}

// An expected sequence that is stale is a conflict; without one, retry-
// safe commands from two engines on one log are retried on conflict and all
// applied (two engines, and the retry is asserted).
func TestApplyConflictAndRetry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conflicts := map[bool]int{}
	cfg := service.Config{Hooks: service.Hooks{Conflict: func(r bool) {
		mu.Lock()
		conflicts[r]++
		mu.Unlock()
	}}}
	es := stalledEngines(t, 2, cfg)
	a, b := es[0], es[1]
	ctx := context.Background()
	if _, err := a.Apply(ctx, "s", web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	stale := uint64(0)
	_, err := a.Apply(ctx, "s", web, &stale, events.PresetChosen{Preset: "research"})
	var ce *logport.ConflictError
	if !errors.As(err, &ce) || ce.Actual != 1 {
		t.Fatalf("error = %v, want conflict at 1", err)
	}
	// b caches the session at 2; a writes 3; b's next write is decided on
	// its stale cache, conflicts, and is retried against the log.
	var retries atomic.Int64 // every Apply's reported retries
	for _, w := range []struct {
		e   *service.Engine
		cmd events.Payload
	}{{b, events.WebSearchSet{Enabled: on(true)}}, {a, events.ToolDisabled{Name: "bash"}}} {
		r, err := w.e.Apply(ctx, "s", web, nil, w.cmd)
		if err != nil {
			t.Fatal(err)
		}
		retries.Add(int64(r.Retries))
	}
	res, err := b.Apply(ctx, "s", web, nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Retries != 1 || res.First != 4 || !slices.Equal(res.State.Intent.Disabled, []string{"bash", "grep"}) {
		t.Fatalf("b's write on a stale cache: %d retries, at %d, disabled %v; want 1 retry, at 4, bash and grep", res.Retries, res.First, res.State.Intent.Disabled)
	}
	retries.Add(int64(res.Retries))
	// Both engines race to disable different tools.
	names := []string{"glob", "list_dir", "web_fetch", "todo_write", "bash_output", "kill_shell"}
	var wg sync.WaitGroup
	before := retries.Load()
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := service.Origin{Channel: []string{"web", "tui"}[i%2], Actor: "u"}
			r, err := es[i%2].Apply(ctx, "s", o, nil, events.ToolDisabled{Name: n})
			if err != nil {
				t.Error(err)
			}
			retries.Add(int64(r.Retries))
		}()
	}
	wg.Wait()
	st, err := a.Session(ctx, "s", 4+uint64(len(names)))
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(names), "bash", "grep")
	slices.Sort(want)
	if !slices.Equal(st.Intent.Disabled, want) {
		t.Fatalf("disabled = %v, want %v (no lost update)", st.Intent.Disabled, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if conflicts[false] != 1 || int64(conflicts[true]) != retries.Load() {
		t.Fatalf("conflict hooks: %d returned, %d retried; want 1 returned (the stale expected sequence) and the %d retries the results report", conflicts[false], conflicts[true], retries.Load())
	}
	t.Logf("the race of %d writes on two engines retried %d conflicts", len(names), retries.Load()-before)
}

// A turn freezes its tools; tool_search loads a deferred tool
// into the next request; the safe point checkpoints it; resume restores it
// while the contract is unchanged and refuses with a reason after a
// registry change.
func TestTurnLifecycleAndResume(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	v, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if v.Turn != 1 || !v.Frozen || slices.Contains(v.Provider, "send_message") {
		t.Fatalf("begin turn: %+v", v)
	}
	d, err := e.Discover(ctx, "s", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tools) != 1 || len(d.Tools[0].Parameters) == 0 {
		t.Fatalf("tool_search returned %+v, want the full schema", d.Tools)
	}
	if !slices.Contains(d.View.Provider, "send_message") || slices.Contains(d.View.Catalog, "send_message") {
		t.Fatalf("after discovery provider %v catalog %v", d.View.Provider, d.View.Catalog)
	}
	disp, err := e.Dispatch(ctx, "s", service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(disp.Provider, "send_message") {
		t.Fatal("dispatch lost the discovered tool")
	}
	if rec, ok := e.LastDispatch("s"); !ok || !slices.Contains(rec.Loaded, "send_message") {
		t.Fatalf("dispatch classification = %+v", rec)
	}
	cp, err := e.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cp.Record.Loaded, []string{"send_message"}) {
		t.Fatalf("checkpoint loaded %v", cp.Record.Loaded)
	}
	r, err := e.Resume(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Outcome.OK || !slices.Equal(r.Outcome.Restored, []string{"send_message"}) {
		t.Fatalf("resume = %+v, want send_message restored", r.Outcome)
	}
	// Change send_message's schema: resume must refuse and say why.
	e.SetRegistry(changedRegistry(t, e.Registry(), "send_message"))
	r, err = e.Resume(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
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

// An unknown provider rendering is refused on every turn operation,
// naming the provider.
func TestUnknownProviderRefused(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discover(ctx, "s", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}, Provider: "gemini"}); !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "gemini") {
		t.Fatalf("Discover with provider gemini: %v", err)
	}
	if _, err := e.Dispatch(ctx, "s", "gemini"); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("Dispatch with provider gemini: %v", err)
	}
}

// The engine never writes an event the fold rejects: an event records
// its channel (required) and actor (Anonymous when none is given), and a
// load outside a turn or a checkpoint naming a resident tool is refused.
func TestEngineWritesOnlyFoldableEvents(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.Apply(ctx, "o1", service.Origin{Actor: "a"}, nil, events.ToolsToggled{Enabled: on(true)}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("no channel: %v, want ErrInvalid", err)
	}
	res, err := e.Apply(ctx, "o1", service.Origin{Channel: "web"}, nil, events.ToolsToggled{Enabled: on(true)})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := e.History(ctx, "o1", service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil || len(h) != 1 || h[0].Actor != service.Anonymous || h[0].Channel != "web" || h[0].Error != "" {
		t.Fatalf("history %+v, %v; want one applied event by web/%s", h, err, service.Anonymous)
	}
	if _, err := e.Apply(ctx, "o1", web, nil, events.DeferredLoaded{Names: []string{"send_message"}}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("load outside a turn: %v, want ErrInvalid", err)
	}
	if _, err := e.BeginTurn(ctx, "o1", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	v, err := e.Resolve(ctx, "o1", service.ResolveRequest{Provider: service.ProviderAnthropicEngine, MinSeq: res.Last})
	if err != nil {
		t.Fatal(err)
	}
	reg := e.Registry()
	cp := events.CheckpointRecorded{Loaded: []string{"read_file"}, ContractHash: v.ContractHash, RegistryVersion: reg.Version()}
	for _, name := range v.Tools {
		tl, _ := reg.Tool(name)
		cp.Contract = append(cp.Contract, events.ContractEntry{Name: name, Hash: resolver.ToolHash(tl)})
	}
	if _, err := e.Apply(ctx, "o1", web, nil, cp); !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), `"read_file" is resident`) {
		t.Fatalf("checkpoint naming a resident tool: %v, want refused", err)
	}
	cp.Loaded = []string{"send_message"}
	if _, err := e.Apply(ctx, "o1", web, nil, cp); err != nil {
		t.Fatalf("checkpoint of a deferred tool of the contract: %v", err)
	}
	st, err := e.Session(ctx, "o1", 0)
	if err != nil || st.Rejected != 0 || st.Skipped != 0 {
		t.Fatalf("session %+v, %v: the engine's own events were not all applied", st, err)
	}
}

// History and explain replay with the fold's rules: an event
// published straight to the log that breaks one is listed as rejected with
// its reason, changes nothing, and is never named as the reason for a tool.
func TestHistoryAndExplainSkipRejected(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	res, err := e.Apply(ctx, "x1", web, nil, events.ToolsToggled{Enabled: on(false)})
	if err != nil {
		t.Fatal(err)
	}
	forged := events.New("x1", "backend", "svc", events.ToolsToggled{Enabled: on(true)})
	b, err := events.Encode(forged)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(e.Log().Subject("x1"))
	m.Data = b
	m.Header.Set("Nats-Msg-Id", events.NewID()) // not the event's id
	if _, err := e.Log().JetStream().PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	h, st, err := e.History(ctx, "x1", service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil || len(h) != 2 {
		t.Fatalf("history %+v, %v", h, err)
	}
	if !h[1].Rejected || !strings.Contains(h[1].Error, "Nats-Msg-Id") || *h[1].Intent.Enabled || st.Rejected != 1 || st.Events != 1 {
		t.Fatalf("history entry of the forged event: %+v (state %+v), want rejected and nothing changed", h[1], st)
	}
	ex, err := e.Explain(ctx, "x1", "bash", service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Event == nil || ex.Event.Seq != res.Last || ex.Event.ID == forged.ID {
		t.Fatalf("explain names %+v, want the applied event at %d", ex.Event, res.Last)
	}
}

// Explain names the event that last changed the outcome or the rule
// : after enable, web-search on, web-search off, the
// explanation of web_search blames the event that switched it off, not
// the master switch; bash, switched off by hand and then on again, blames
// the ToolEnabled.
func TestExplainBlamesLastChange(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	res, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(true)}, events.WebSearchSet{Enabled: on(true)},
		events.WebSearchSet{Enabled: on(false)}, events.ToolDisabled{Name: "bash"}, events.ToolEnabled{Name: "bash"}, events.PresetChosen{Preset: "research"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Last != 6 {
		t.Fatalf("appended up to seq %d; want 6", res.Last)
	}
	ws, err := e.Explain(ctx, "s1", resolver.WebSearch, service.Until{Seq: 3}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Included || ws.Event == nil || ws.Event.Seq != 3 || ws.Event.Type != "WebSearchSet" {
		t.Fatalf("web_search at seq 3: %+v event %+v; want out, blamed on seq 3 (WebSearchSet false)", ws, ws.Event)
	}
	bash, err := e.Explain(ctx, "s1", "bash", service.Until{Seq: 5}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !bash.Included || bash.Event == nil || bash.Event.Seq != 5 {
		t.Fatalf("bash at seq 5: %+v event %+v; want in, blamed on seq 5 (ToolEnabled)", bash, bash.Event)
	}
	// Now the research preset lists web_search: web_search=false leaves it in.
	now, err := e.Explain(ctx, "s1", resolver.WebSearch, service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !now.Included || now.Rule != "preset:research" || now.Event == nil || now.Event.Seq != 6 {
		t.Fatalf("web_search now: %+v event %+v; want in by preset:research, blamed on seq 6", now, now.Event)
	}
	// A session without events: no event to blame.
	none, err := e.Explain(ctx, "s2", "bash", service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil || none.Event != nil || !none.Included {
		t.Fatalf("fresh session: %+v %v", none, err)
	}
}

// Resume restores each loaded tool whose own contract entry is
// unchanged and that the intent still permits, and says per tool why the
// others were dropped. A registry version bump with
// identical tools, or toggling web_search, changes the contract hash but
// keeps every loaded tool, as a session that did not crash keeps them.
func TestResumeRestoresOrDropsEachLoadedToolOnItsOwn(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	checkpointWith := func(names ...string) {
		t.Helper()
		if _, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Discover(ctx, "s", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: names}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.EndTurn(ctx, "s", web); err != nil {
			t.Fatal(err)
		}
	}
	resume := func(want ...string) service.ResumeResult {
		t.Helper()
		r, err := e.Resume(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Outcome.Restored, want) {
			t.Fatalf("resume restored %v; want %v (%s)", r.Outcome.Restored, want, r.Outcome.Reason)
		}
		st, err := e.Session(ctx, "s", r.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(st.Loaded, want) {
			t.Fatalf("loaded after resume %v; want the restored %v", st.Loaded, want)
		}
		return r
	}
	checkpointWith("enter_plan_mode", "send_message")

	// A version bump with identical tools.
	e.SetRegistry(renamedRegistry(t, e.Registry(), e.Registry().Version()+"-bump"))
	r := resume("enter_plan_mode", "send_message")
	if !r.Outcome.OK || len(r.Outcome.Changes) != 1 || r.Outcome.Changes[0].Kind != "registry-version" {
		t.Fatalf("version bump: %+v; want OK, one registry-version change", r.Outcome)
	}

	// Toggling web_search adds a tool to the contract; the loaded ones stay.
	if _, err := e.Apply(ctx, "s", web, nil, events.WebSearchSet{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	if r = resume("enter_plan_mode", "send_message"); !r.Outcome.OK {
		t.Fatalf("web_search on: %+v; want OK", r.Outcome)
	}

	// Disabling a loaded tool drops it, with the rule; the other stays.
	if _, err := e.Apply(ctx, "s", web, nil, events.ToolDisabled{Name: "enter_plan_mode"}); err != nil {
		t.Fatal(err)
	}
	r = resume("send_message")
	if r.Outcome.OK || len(r.Outcome.Tools) != 2 {
		t.Fatalf("disabled: %+v; want send_message only, two decisions", r.Outcome)
	}
	if d := r.Outcome.Tools[0]; d.Tool != "enter_plan_mode" || d.Kind != checkpoint.DecisionNotPermitted || d.Rule != "disabled-by-session" {
		t.Fatalf("enter_plan_mode decision %+v; want not-permitted by disabled-by-session", d)
	}

	// A changed description drops that tool.
	if _, err := e.Apply(ctx, "s", web, nil, events.ToolEnabled{Name: "enter_plan_mode"}); err != nil {
		t.Fatal(err)
	}
	checkpointWith("enter_plan_mode")
	e.SetRegistry(changedRegistry(t, e.Registry(), "send_message"))
	r = resume("enter_plan_mode")
	if d := r.Outcome.Tools[1]; d.Tool != "send_message" || d.Kind != checkpoint.DecisionChanged {
		t.Fatalf("send_message decision %+v; want changed", d)
	}
}

// renamedRegistry returns reg under another version, tools unchanged.
func renamedRegistry(t *testing.T, reg *resolver.Registry, version string) *resolver.Registry {
	t.Helper()
	data, err := reg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	out, err := resolver.Load([]byte(strings.Replace(string(data), `"version":"`+reg.Version()+`"`, `"version":"`+version+`"`, 1)))
	if err != nil || out.Version() != version {
		t.Fatalf("rename registry: %v", err)
	}
	return out
}
