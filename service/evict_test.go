package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// manyDeferred is the default registry plus n deferred tools extra_000...
func manyDeferred(t *testing.T, n int) (*resolver.Registry, []string) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = fmt.Sprintf("many-%d", n)
	var names []string
	for i := range n {
		name := fmt.Sprintf("extra_%03d", i)
		names = append(names, name)
		doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": name, "description": "An extra deferred tool.", "parameters": map[string]any{"type": "object"}})
		doc["default_tools"] = append(doc["default_tools"].([]any), name)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return reg, names
}

// The loaded set is bounded, never by an error: a search that
// finds more than the room left loads what fits and says so, and the
// next turn boundary evicts the tools loaded longest ago down to
// deferral.LoadedBound with a DeferredEvicted in the log, counted as the
// prefix-change cause "evict" and shown in history.
func TestLoadedSetBoundedByEviction(t *testing.T) {
	t.Parallel()
	if deferral.MaxLoaded != events.MaxListLen {
		t.Fatalf("deferral.MaxLoaded %d, events.MaxListLen %d: keep them equal", deferral.MaxLoaded, events.MaxListLen)
	}
	ctx := context.Background()
	reg, extra := manyDeferred(t, 300)
	c := &counts{m: map[string]int{}}
	e, _ := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, reg, service.Config{Hooks: service.Hooks{PrefixChanged: c.hook("broken")}}, true)
	const s = "bounded"
	p := service.ProviderAnthropicEngine
	load := func(names []string) wire.DiscoverReply {
		t.Helper()
		var last wire.DiscoverReply
		for len(names) > 0 {
			n := min(len(names), deferral.MaxSearchNames)
			d, err := e.Discover(ctx, s, web, service.DiscoverRequest{Provider: p, Search: deferral.SearchRequest{Names: names[:n]}})
			if err != nil {
				t.Fatalf("a search with the loaded set full failed: %v", err)
			}
			last, names = d, names[n:]
		}
		return last
	}
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: p}); err != nil {
		t.Fatal(err)
	}
	load(extra[:200])
	if _, err := e.Dispatch(ctx, s, p); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EndTurn(ctx, s, web); err != nil {
		t.Fatal(err)
	}
	v, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Loaded) != deferral.LoadedBound || slices.Contains(v.Loaded, extra[0]) || slices.Contains(v.Loaded, extra[7]) || !slices.Contains(v.Loaded, extra[8]) {
		t.Fatalf("turn 2 loaded %d tools (%v...), want the %d loaded last", len(v.Loaded), v.Loaded[:3], deferral.LoadedBound)
	}
	if _, err := e.Dispatch(ctx, s, p); err != nil {
		t.Fatal(err)
	}
	if got := c.get("broken:evict"); got != 1 {
		t.Errorf("prefix changes of cause evict: %d, want 1 (%v)", got, c.m)
	}
	// Turn 2 fills the set to MaxLoaded: the search beyond it loads
	// nothing more, with a note, and no error.
	d := load(extra[200:300])
	st, err := e.Session(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Loaded) != deferral.MaxLoaded || !strings.Contains(d.Note, "bound") {
		t.Errorf("the full set holds %d tools, note %q; want %d and a note", len(st.Loaded), d.Note, deferral.MaxLoaded)
	}
	hist, _, err := e.History(ctx, s, service.Until{}, service.ResolveRequest{Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	var saw bool
	for _, h := range hist {
		if ev, ok := h.Payload.(events.DeferredEvicted); ok {
			saw = true
			if !slices.Equal(ev.Names, extra[:8]) || ev.Reason != service.EvictBound || h.Cause != "evict" || !h.PrefixChanged {
				t.Errorf("history: %+v cause %q changed %v", ev, h.Cause, h.PrefixChanged)
			}
		}
	}
	if !saw {
		t.Error("history shows no DeferredEvicted")
	}
	ex, err := e.Explain(ctx, s, extra[0], service.Until{}, service.ResolveRequest{Provider: p})
	if err != nil || ex.Evicted == nil || ex.Evicted.Type != string(events.TypeDeferredEvicted) {
		t.Errorf("explain of the evicted %s: %+v, %v; want the DeferredEvicted", extra[0], ex.Evicted, err)
	}
	if ex, err := e.Explain(ctx, s, extra[8], service.Until{}, service.ResolveRequest{Provider: p}); err != nil || ex.Evicted != nil {
		t.Errorf("explain of the kept %s: evicted %+v, %v", extra[8], ex.Evicted, err)
	}
}
