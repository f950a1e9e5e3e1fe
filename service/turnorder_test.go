package service_test

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// hookedEngineAt is engineAt with cfg (hooks), without the registry
// history (every engine here serves the default registry).
func hookedEngineAt(t *testing.T, url string, cfg service.Config, project bool) (*service.Engine, *jetstream.Log) {
	t.Helper()
	return stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), cfg, project)
}

// foldLog folds a session from the log alone, as a fresh projection does.
func foldLog(t *testing.T, log *jetstream.Log, session string, last uint64) aggregate.State {
	t.Helper()
	recs, err := log.ReadSession(context.Background(), session, 1, last)
	if err != nil {
		t.Fatal(err)
	}
	st := aggregate.State{Session: session}
	for _, r := range recs {
		st.ApplyStored(aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}) //nolint:errcheck // recorded in st
	}
	return st
}

// With the intent and the registry unchanged, a turn begins
// with exactly the tools array of the previous turn's last request, in
// every rendering: the loaded deferred tools keep the order in which they
// were discovered (memory_read, send_message, memory_write: neither the
// registry's order nor the sorted one), the prefix hash and the bytes are
// equal, the
// prefix-change metric does not count a "turn" cause, and the order comes
// from the log: a second engine, and a fold of the log alone, give the
// same order and the same bytes. Outside a turn the live view renders the
// same array too.
func TestTurnBoundaryKeepsArray(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	c := &counts{m: map[string]int{}}
	a, log := hookedEngineAt(t, url, service.Config{Hooks: service.Hooks{
		PrefixChanged: c.hook("broken"), PrefixExtended: c.hook("extended"), CatalogChanged: c.hook("catalog"),
	}}, true)
	b, _ := hookedEngineAt(t, url, service.Config{}, false)
	for _, provider := range service.Providers {
		session := "order-" + provider
		if _, err := a.Apply(ctx, session, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.BeginTurn(ctx, session, web, service.ResolveRequest{Provider: provider}); err != nil {
			t.Fatal(err)
		}
		// Neither the registry's order (send_message, memory_read,
		// memory_write) nor the sorted one.
		order := []string{"memory_read", "send_message", "memory_write"}
		for _, name := range order {
			d, err := a.Discover(ctx, session, web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{name}}, Provider: provider})
			if err != nil || !slices.Equal(d.Loaded, []string{name}) {
				t.Fatalf("%s: discover %s: %+v, %v", provider, name, d.Loaded, err)
			}
		}
		last, err := a.Dispatch(ctx, session, provider)
		if err != nil {
			t.Fatal(err)
		}
		row, _ := deferral.LookupProvider(provider)
		native := row.Native
		if !native && !slices.Equal(last.Provider[len(last.Provider)-3:], order) {
			t.Fatalf("%s: the turn's array ends %v, want %v (discovery order)", provider, last.Provider, order)
		}
		if _, err := a.EndTurn(ctx, session, web); err != nil {
			t.Fatal(err)
		}
		between, err := a.Resolve(ctx, session, service.ResolveRequest{Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(between.Rendering, last.Rendering) {
			t.Errorf("%s: between turns the array is\n%v, the last request's was\n%v", provider, between.Provider, last.Provider)
		}
		before := map[string]int{"broken:turn": c.get("broken:turn"), "extended:turn": c.get("extended:turn"), "catalog:turn": c.get("catalog:turn")}
		begun, err := a.BeginTurn(ctx, session, web, service.ResolveRequest{Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		next, err := a.Dispatch(ctx, session, provider)
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]wire.TurnView{"the new turn's view": begun, "the new turn's dispatch": next} {
			if v.PrefixHash != last.PrefixHash || !bytes.Equal(v.Rendering, last.Rendering) || v.CatalogText != last.CatalogText {
				t.Errorf("%s: %s differs from the previous turn's last request:\n got %v hash %.12s\nwant %v hash %.12s",
					provider, what, v.Provider, v.PrefixHash, last.Provider, last.PrefixHash)
			}
		}
		for key, n := range before {
			if got := c.get(key); got != n {
				t.Errorf("%s: %s moved from %d to %d across the turn boundary", provider, key, n, got)
			}
		}
		// Another engine, with nothing in memory, serves the same bytes.
		other, err := b.Dispatch(ctx, session, provider)
		if err != nil {
			t.Fatal(err)
		}
		if other.PrefixHash != last.PrefixHash || !bytes.Equal(other.Rendering, last.Rendering) {
			t.Errorf("%s: engine B serves %v, engine A served %v", provider, other.Provider, last.Provider)
		}
		// The order is the log's: a fold of the log alone has it.
		st := foldLog(t, log, session, next.Seq)
		if !slices.Equal(st.LoadOrder, order) || !slices.Equal(st.Loaded, slices.Sorted(slices.Values(order))) {
			t.Errorf("%s: the log folds to load order %v (loaded %v), want %v", provider, st.LoadOrder, st.Loaded, order)
		}
		if provider == service.ProviderAnthropicEngine {
			// A replay of the log (history) renders the same arrays: no
			// prefix change at the turn boundary, and the last entry's
			// array is the dispatched one.
			hist, _, err := a.History(ctx, session, service.Until{}, service.ResolveRequest{Provider: provider})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hist {
				if _, ok := h.Payload.(events.TurnStarted); ok && h.Turn == 2 && h.PrefixChanged {
					t.Errorf("history: turn 2's TurnStarted changed the prefix (cause %q)", h.Cause)
				}
			}
			if h := hist[len(hist)-1]; h.PrefixHash != last.PrefixHash {
				t.Errorf("history's last entry has prefix %.12s, the dispatches %.12s", h.PrefixHash, last.PrefixHash)
			}
		}
		t.Logf("%s: turn 1 last request and turn 2 first request: prefix %.12s", provider, last.PrefixHash)
		if _, err := a.EndTurn(ctx, session, web); err != nil {
			t.Fatal(err)
		}
	}
}

// A prefix change across a turn boundary is counted by its
// cause: an intent change between the turns is "intent", not "turn".
func TestTurnBoundaryCountsIntentChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	c := &counts{m: map[string]int{}}
	e, _ := hookedEngineAt(t, url, service.Config{Hooks: service.Hooks{PrefixChanged: c.hook("broken")}}, true)
	const s = "turn-intent"
	if _, err := e.Apply(ctx, s, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	first, err := e.Dispatch(ctx, s, service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.EndTurn(ctx, s, web); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, s, web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	next, err := e.Dispatch(ctx, s, service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	if next.PrefixHash == first.PrefixHash {
		t.Fatalf("disabling grep did not change the array")
	}
	if got, turn := c.get("broken:intent"), c.get("broken:turn"); got != 1 || turn != 0 {
		t.Errorf("prefix changes: intent %d, turn %d; want 1 and 0", got, turn)
	}
}
