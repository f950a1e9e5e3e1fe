package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// engineAt is an engine on the NATS server at url, with the registry
// history; project runs the projection (one engine of a stream does).
func engineAt(t *testing.T, url string, reg *resolver.Registry, project bool) (*service.Engine, *jetstream.Log) {
	t.Helper()
	e, log := stackOn(t, url, jetstream.LogConfig{}, reg, service.Config{}, project)
	hist, err := log.OpenRegistryHistory(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e.SetRegistryHistory(hist)
	return e, log
}

// laggingPair is two engines on one fresh server: B writes and runs the
// projection; A, with nothing cached and no projection, reads through a
// replica behind the stream's leader (natstest.LaggingReplica: a mirror
// answering half the direct gets) and, with erase, has an eraser.
func laggingPair(t *testing.T, erase bool) (a, b *service.Engine, logA *jetstream.Log) {
	t.Helper()
	url := natstest.Server(t).ClientURL()
	a, logA = engineAt(t, url, resolver.Default(), false)
	b, _ = engineAt(t, url, resolver.Default(), true)
	natstest.LaggingReplica(t, logA)
	if erase {
		x, err := logA.NewEraser(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		a.SetEraser(x)
	}
	return a, b, logA
}

// pushedRegistry is the default registry under another version, with one
// more default tool: what a registry push gives.
func pushedRegistry(t *testing.T, version, extra string) *resolver.Registry {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = version
	doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": extra, "description": "A tool added by a registry push.", "parameters": map[string]any{"type": "object"}})
	doc["default_tools"] = append(doc["default_tools"].([]any), extra)
	doc["resident_tools"] = append(doc["resident_tools"].([]any), extra)
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func sameView(t *testing.T, what string, got, want wire.TurnView) {
	t.Helper()
	if got.PrefixHash != want.PrefixHash || !slices.Equal(got.Provider, want.Provider) || got.CatalogText != want.CatalogText ||
		got.Turn != want.Turn || !got.Frozen || got.RegistryVersion != want.RegistryVersion || got.ContractHash != want.ContractHash {
		t.Fatalf("%s: view differs:\n got turn %d frozen %v registry %s provider %v catalog %q hash %s\nwant turn %d registry %s provider %v catalog %q hash %s",
			what, got.Turn, got.Frozen, got.RegistryVersion, got.Provider, got.CatalogText, got.PrefixHash,
			want.Turn, want.RegistryVersion, want.Provider, want.CatalogText, want.PrefixHash)
	}
}

// A turn begun with a profile and an override on
// engine A, against a registry engine B does not serve, is served by B
// byte for byte (dispatch, search, dispatch, end), discoveries included,
// and B's checkpoint holds the discovered tools. A takes no part after the
// start (as if it had crashed); a third engine with nothing in memory
// serves the same view too.
func TestTurnServedByAnotherEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	regA := pushedRegistry(t, "test-a.1", "extra_a")
	a, _ := engineAt(t, url, regA, true)
	b, _ := engineAt(t, url, resolver.Default(), false)
	req := service.ResolveRequest{Provider: service.ProviderAnthropicEngine, Profile: "coder", Override: intent.Override{Kind: intent.OverrideIntent, Intent: intent.Intent{Disabled: []string{"bash"}}}}
	begun, err := a.BeginTurn(ctx, "s1", web, req)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(begun.Tools, "bash") || !slices.Contains(begun.Catalog, "enter_plan_mode") || begun.RegistryVersion != "test-a.1" {
		t.Fatalf("begun turn: tools %v catalog %v registry %s; want the coder profile without bash, against test-a.1", begun.Tools, begun.Catalog, begun.RegistryVersion)
	}
	dA, err := a.Dispatch(ctx, "s1", service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, "A's dispatch", dA, begun)

	// Engine B: dispatch, search, dispatch, end.
	dB, err := b.Dispatch(ctx, "s1", service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, "B's first dispatch", dB, dA)
	found, err := b.Discover(ctx, "s1", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"enter_plan_mode"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found.Loaded, []string{"enter_plan_mode"}) || !slices.Contains(found.View.Provider, "enter_plan_mode") {
		t.Fatalf("B's search loaded %v, provider %v", found.Loaded, found.View.Provider)
	}
	if got := deferral.PrefixOf(dA.Rendering).Compare(found.View.Rendering); got != deferral.PrefixExtended {
		t.Fatalf("the discovery's array against the turn's: %v, want extended", got)
	}
	dB2, err := b.Dispatch(ctx, "s1", service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, "B's dispatch after the search", dB2, found.View)
	// A (had it survived) and a fresh engine serve the same, discovery included.
	c, _ := engineAt(t, url, resolver.Default(), false)
	for name, e := range map[string]*service.Engine{"A": a, "C": c} {
		v, err := e.Dispatch(ctx, "s1", service.ProviderAnthropicEngine)
		if err != nil {
			t.Fatal(err)
		}
		sameView(t, name+"'s dispatch after B's search", v, found.View)
	}
	end, err := b.EndTurn(ctx, "s1", web)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(end.Record.Loaded, []string{"enter_plan_mode"}) || end.Record.ContractHash != begun.ContractHash || end.Record.RegistryVersion != "test-a.1" {
		t.Fatalf("B's checkpoint %+v: want enter_plan_mode in the turn's contract %s of test-a.1", end.Record, begun.ContractHash)
	}
}

// Two engines on one stream serve
// turns of several sessions, each step on a randomly chosen engine, the
// sessions in parallel. Every view equals the serial fold of the log (the
// frozen array, then the tools the log's DeferredLoaded events loaded, in
// log order) and every checkpoint holds what the log says was loaded.
func TestTwoEnginesInterleaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, log := engineAt(t, url, resolver.Default(), true)
	b, _ := engineAt(t, url, resolver.Default(), false)
	engines := []*service.Engine{a, b}
	deferred := []string{"playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}

	// oracle folds the session's log up to seq and returns the loaded set
	// and the open turn's discoveries in log order.
	oracle := func(session string, seq uint64) (aggregate.State, []string) {
		recs, err := log.ReadSession(ctx, session, 1, seq)
		if err != nil {
			t.Error(err)
			return aggregate.State{}, nil
		}
		st := aggregate.State{Session: session}
		var disc []string
		for _, r := range recs {
			if st.ApplyStored(aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}) != nil {
				continue
			}
			switch p := r.Envelope.Payload.(type) {
			case events.TurnStarted:
				disc = nil
			case events.DeferredLoaded:
				for _, n := range p.Names {
					if !slices.Contains(disc, n) {
						disc = append(disc, n)
					}
				}
			}
		}
		return st, disc
	}
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("mix%d", s)
			rng := rand.New(rand.NewPCG(uint64(s), 13))
			pick := func() *service.Engine { return engines[rng.IntN(2)] }
			check := func(what string, v wire.TurnView, frozen []string) bool {
				st, disc := oracle(session, v.Seq)
				want := append(slices.Clone(frozen), disc...)
				if !slices.Equal(v.Provider, want) || !slices.Equal(v.Loaded, st.Loaded) {
					t.Errorf("%s %s at seq %d: provider %v loaded %v; the log folds to provider %v loaded %v", session, what, v.Seq, v.Provider, v.Loaded, want, st.Loaded)
					return false
				}
				return true
			}
			// A second client dispatches the same session at the same
			// time, on either engine, while the turns go on.
			var frozenOf sync.Map // turn → its frozen provider array
			stop := make(chan struct{})
			var side sync.WaitGroup
			side.Add(1)
			go func() {
				defer side.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					v, err := engines[i%2].Dispatch(ctx, session, service.ProviderAnthropicEngine)
					if err != nil {
						continue // no turn open yet
					}
					if f, ok := frozenOf.Load(v.Turn); ok && v.Frozen {
						st, disc := oracle(session, v.Seq)
						if st.Turn != v.Turn || !st.InTurn {
							continue
						}
						if want := append(slices.Clone(f.([]string)), disc...); !slices.Equal(v.Provider, want) {
							t.Errorf("%s concurrent dispatch at seq %d: provider %v; the log folds to %v", session, v.Seq, v.Provider, want)
							return
						}
					}
				}
			}()
			defer func() { close(stop); side.Wait() }()
			for turn := 0; turn < 4; turn++ {
				begun, err := pick().BeginTurn(ctx, session, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
				if err != nil {
					t.Error(err)
					return
				}
				frozen := slices.Clone(begun.Provider)
				frozenOf.Store(begun.Turn, frozen)
				for step := 0; step < 6; step++ {
					e := pick()
					if rng.IntN(2) == 0 {
						name := deferred[rng.IntN(len(deferred))]
						r, err := e.Discover(ctx, session, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{name}}})
						if err != nil {
							t.Error(err)
							return
						}
						if !check("search "+name, r.View, frozen) {
							return
						}
						continue
					}
					v, err := e.Dispatch(ctx, session, service.ProviderAnthropicEngine)
					if err != nil {
						t.Error(err)
						return
					}
					if !check("dispatch", v, frozen) {
						return
					}
					// The other engine serves the same bytes.
					w, err := engines[0].Dispatch(ctx, session, service.ProviderAnthropicEngine)
					if err == nil && w.Seq == v.Seq && w.PrefixHash != v.PrefixHash {
						t.Errorf("%s: the engines' dispatches at seq %d differ", session, v.Seq)
					}
				}
				var cp aggregate.Checkpoint
				if rng.IntN(2) == 0 {
					cp, err = pick().Checkpoint(ctx, session, web)
				} else {
					cp, err = pick().EndTurn(ctx, session, web)
				}
				if err != nil {
					t.Error(err)
					return
				}
				st, _ := oracle(session, cp.Seq-1)
				if !slices.Equal(cp.Record.Loaded, st.Loaded) && !(len(cp.Record.Loaded) == 0 && len(st.Loaded) == 0) {
					t.Errorf("%s turn %d: checkpoint holds %v, the log says %v were loaded", session, begun.Turn, cp.Record.Loaded, st.Loaded)
				}
			}
		}()
	}
	wg.Wait()
}

// The history of a past turn, after a registry
// push, gives that turn's tools and classification against the registry
// version it was frozen with, not today's; a fresh engine that only serves
// the pushed registry replays the same history from the log and the
// registry history. Explain inside the past turn uses that version too.
func TestHistoryOfPastTurnAfterRegistryPush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, _ := engineAt(t, url, resolver.Default(), true)
	if err := a.RecordRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.BeginTurn(ctx, "audit", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	found, err := a.Discover(ctx, "audit", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	if err != nil {
		t.Fatal(err)
	}
	turn1 := found.View
	end1, err := a.EndTurn(ctx, "audit", web)
	if err != nil {
		t.Fatal(err)
	}
	pushed := pushedRegistry(t, "pushed-2", "pushed_tool")
	a.SetRegistry(pushed)
	if err := a.RecordRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	turn2, err := a.BeginTurn(ctx, "audit", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(turn2.Tools, "pushed_tool") || slices.Contains(turn1.Tools, "pushed_tool") {
		t.Fatalf("turn 1 tools %v, turn 2 tools %v: want pushed_tool only in turn 2", turn1.Tools, turn2.Tools)
	}
	fresh, _ := engineAt(t, url, pushed, false)
	for name, e := range map[string]*service.Engine{"serving engine": a, "fresh engine": fresh} {
		hist, _, err := e.History(ctx, "audit", service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
		if err != nil {
			t.Fatal(err)
		}
		var sawSearch bool
		for _, h := range hist {
			if !h.InTurn {
				continue
			}
			switch h.Turn {
			case 1:
				if h.RegistryVersion != resolver.Default().Version() || slices.Contains(h.Tools, "pushed_tool") || !slices.Equal(h.Tools, turn1.Tools) {
					t.Fatalf("%s: history of turn 1 at seq %d: registry %s tools %v; want %s and the turn's own tools %v",
						name, h.Seq, h.RegistryVersion, h.Tools, resolver.Default().Version(), turn1.Tools)
				}
				if h.Dispatch == nil {
					t.Fatalf("%s: no dispatch classification at seq %d of turn 1", name, h.Seq)
				}
				if _, ok := h.Payload.(events.DeferredLoaded); ok {
					sawSearch = true
					if !slices.Equal(h.Dispatch.Loaded, []string{"send_message"}) || h.PrefixHash != turn1.PrefixHash {
						t.Fatalf("%s: after the search: classification %+v prefix %s; the turn dispatched loaded [send_message] with prefix %s", name, h.Dispatch, h.PrefixHash, turn1.PrefixHash)
					}
				}
			case 2:
				if h.RegistryVersion != "pushed-2" || !slices.Contains(h.Tools, "pushed_tool") {
					t.Fatalf("%s: history of turn 2: registry %s tools %v", name, h.RegistryVersion, h.Tools)
				}
			}
		}
		if !sawSearch {
			t.Fatalf("%s: history shows no search in turn 1", name)
		}
		ex, err := e.Explain(ctx, "audit", "pushed_tool", service.Until{Seq: end1.Seq - 2}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
		if err != nil {
			t.Fatal(err)
		}
		if ex.RegistryVersion != resolver.Default().Version() || ex.Included {
			t.Fatalf("%s: explain pushed_tool inside turn 1: registry %s included %v; want %s, not included", name, ex.RegistryVersion, ex.Included, resolver.Default().Version())
		}
	}
}

// Engine A holds a session's open turn, engine B loads a
// deferred tool in it, then A dispatches and ends the turn. A folds B's
// discovery into its turn by reading the log up to the sequence its state
// says the session is at; a replica behind the stream's leader (here a
// mirror answering half the direct gets, natstest.LaggingReplica) ends
// such a read early. Before, A then served the turn without the tool and
// its checkpoint, which replaces the session's loaded set, dropped it.
func TestTurnCatchUpPastLaggingReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, logA := laggingPair(t, false)
	// Each engine reads the session at least where the other left it
	// (read-your-writes across engines, at the sequence the leader holds):
	// reads without a sequence may be stale on a lagging replica, as
	// documented; what is tested is A's turn catching up to its state.
	caughtUp := func(e *service.Engine, s string) {
		t.Helper()
		at, err := logA.LeaderLastSeq(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Session(ctx, s, at); err != nil {
			t.Fatal(err)
		}
	}
	req := service.ResolveRequest{Provider: service.ProviderAnthropicEngine, Profile: "coder"}
	for i := 0; i < 12; i++ {
		s := fmt.Sprintf("catch-up-%d", i)
		begun, err := a.BeginTurn(ctx, s, web, req)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(begun.Catalog, "enter_plan_mode") {
			t.Fatalf("%s: catalog %v lacks enter_plan_mode", s, begun.Catalog)
		}
		if _, err := a.Dispatch(ctx, s, service.ProviderAnthropicEngine); err != nil {
			t.Fatal(err)
		}
		caughtUp(b, s)
		found, err := b.Discover(ctx, s, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"enter_plan_mode"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(found.Loaded, []string{"enter_plan_mode"}) {
			t.Fatalf("%s: B's search loaded %v", s, found.Loaded)
		}
		caughtUp(a, s)
		v, err := a.Dispatch(ctx, s, service.ProviderAnthropicEngine)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(v.Provider, "enter_plan_mode") {
			t.Fatalf("%s: A's dispatch after B's search serves %v, without enter_plan_mode", s, v.Provider)
		}
		end, err := a.EndTurn(ctx, s, web)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(end.Record.Loaded, []string{"enter_plan_mode"}) {
			t.Fatalf("%s: A's checkpoint holds %v, want [enter_plan_mode]", s, end.Record.Loaded)
		}
	}
}
