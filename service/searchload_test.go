package service_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
)

// A tool disabled in the middle of a turn is not loaded by a
// later search of that turn, by name or by query, although the turn froze
// it: the search reports it not found with a note, the next request does
// not carry it, the log holds no load of it, and a DeferredLoaded of it
// (what a search racing the disable would append) is refused. Enabling it
// again makes it loadable in the same turn.
func TestSearchNeverLoadsDisabledTool(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "disabled-mid-turn"
	if _, err := e.Apply(ctx, s, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	begun, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(begun.Catalog, "send_message") {
		t.Fatalf("send_message is not in the turn's catalog %v", begun.Catalog)
	}
	if _, err := e.Apply(ctx, s, web, nil, events.ToolDisabled{Name: "send_message"}); err != nil {
		t.Fatal(err)
	}
	for _, sr := range []deferral.SearchRequest{{Names: []string{"send_message"}}, {Query: "send a message"}, {Regex: "^send_message$"}} {
		d, err := e.Discover(ctx, s, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: sr})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(d.Loaded, "send_message") || slices.Contains(d.View.Provider, "send_message") {
			t.Errorf("search %+v loaded the disabled send_message: loaded %v, provider %v", sr, d.Loaded, d.View.Provider)
		}
		for _, tool := range d.Tools {
			if tool.Name == "send_message" {
				t.Errorf("search %+v returned the disabled send_message's schema", sr)
			}
		}
		if len(sr.Names) > 0 && (!slices.Equal(d.NotFound, []string{"send_message"}) || !strings.Contains(d.Note, "disabled")) {
			t.Errorf("search by name: not found %v, note %q; want send_message reported disabled", d.NotFound, d.Note)
		}
	}
	st, err := e.Session(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(st.Loaded, "send_message") {
		t.Errorf("the log loaded the disabled send_message: %v", st.Loaded)
	}
	// A load racing the disable is refused when it is decided.
	_, err = e.Apply(ctx, s, web, nil, events.DeferredLoaded{Names: []string{"send_message"}, Turn: begun.Turn})
	if !errors.Is(err, aggregate.ErrToolDisabled) || !errors.Is(err, service.ErrInvalid) {
		t.Errorf("DeferredLoaded of a disabled tool: %v, want ErrToolDisabled (ErrInvalid)", err)
	}
	// Enabled again, it loads in the same (frozen) turn.
	if _, err := e.Apply(ctx, s, web, nil, events.ToolEnabled{Name: "send_message"}); err != nil {
		t.Fatal(err)
	}
	d, err := e.Discover(ctx, s, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	if err != nil || !slices.Equal(d.Loaded, []string{"send_message"}) {
		t.Errorf("after enabling: loaded %v, %v; want send_message", d.Loaded, err)
	}
}

// A keyword query loads only its confident matches (at least
// deferral.ConfidentShare of the best score), at most max_results: "plan
// mode" loads enter_plan_mode and exit_plan_mode, not memory_write (a
// weak match, listed as such and named in the note), and max_results 1
// loads one tool.
func TestQueryLoadsOnlyConfidentMatches(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "confident"
	if _, err := e.Apply(ctx, s, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	d, err := e.Discover(ctx, s, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Query: "plan mode"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan mode: matches %+v", d.Matches)
	if !slices.Equal(slices.Sorted(slices.Values(d.Loaded)), []string{"enter_plan_mode", "exit_plan_mode"}) {
		t.Errorf("query 'plan mode' loaded %v, want enter_plan_mode, exit_plan_mode only", d.Loaded)
	}
	for _, m := range d.Matches {
		if m.Weak != !slices.Contains(d.Loaded, m.Name) {
			t.Errorf("match %+v: weak must mean not loaded (loaded %v)", m, d.Loaded)
		}
		if m.Weak && (m.Score >= deferral.ConfidentShare*d.Matches[0].Score || !strings.Contains(d.Note, m.Name)) {
			t.Errorf("weak match %+v: best score %.2f, note %q", m, d.Matches[0].Score, d.Note)
		}
	}
	st, err := e.Session(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(st.Loaded, "memory_write") {
		t.Errorf("the session loaded the weak match memory_write: %v", st.Loaded)
	}
	d, err = e.Discover(ctx, s, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Query: "memory", MaxResults: 1}})
	if err != nil || len(d.Loaded) != 1 {
		t.Errorf("query 'memory' with max_results 1 loaded %v, %v; want one tool", d.Loaded, err)
	}
}
