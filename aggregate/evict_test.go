package aggregate

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// DeferredEvicted folds between turns: it removes its names
// from Loaded and LoadOrder, keeps the order of the rest, and ignores a
// name not loaded; inside a turn it is rejected (the turn is frozen).
func TestFoldEvicted(t *testing.T) {
	s := Fold(testSession, stored(
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Names: []string{"c", "a", "b"}, Turn: 1},
		events.TurnEnded{Turn: 1},
		events.DeferredEvicted{Names: []string{"a", "zz"}, Turn: 1, Reason: "bound"},
	))
	if s.Rejected != 0 || !slices.Equal(s.Loaded, []string{"b", "c"}) || !slices.Equal(s.LoadOrder, []string{"c", "b"}) {
		t.Fatalf("after the eviction: loaded %v order %v rejected %d", s.Loaded, s.LoadOrder, s.Rejected)
	}
	in := Fold(testSession, stored(
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Names: []string{"a"}, Turn: 1},
		events.DeferredEvicted{Names: []string{"a"}, Turn: 1, Reason: "bound"},
	))
	if in.Rejected != 1 || !slices.Equal(in.Loaded, []string{"a"}) {
		t.Errorf("an eviction inside a turn: rejected %d, loaded %v", in.Rejected, in.Loaded)
	}
	all := Fold(testSession, stored(
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Names: []string{"a"}, Turn: 1},
		events.TurnEnded{Turn: 1},
		events.DeferredEvicted{Names: []string{"a"}, Turn: 1, Reason: "bound"},
	))
	if all.Loaded != nil || all.LoadOrder != nil {
		t.Errorf("evicting every tool leaves %v %v, want nil", all.Loaded, all.LoadOrder)
	}
}

// Decide keeps only loaded names, refuses inside a turn, and
// an eviction of nothing loaded is a no-op.
func TestDecideEvicted(t *testing.T) {
	s := Fold(testSession, stored(
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Names: []string{"a", "b"}, Turn: 1},
		events.TurnEnded{Turn: 1},
	))
	out, err := Decide(s, resolver.Default(), events.DeferredEvicted{Names: []string{"b", "x"}, Reason: "bound"}, Limits{})
	if err != nil || len(out) != 1 {
		t.Fatalf("decide: %v, %v", out, err)
	}
	if ev := out[0].(events.DeferredEvicted); !slices.Equal(ev.Names, []string{"b"}) || ev.Turn != 1 {
		t.Errorf("decided %+v, want names [b] after turn 1", ev)
	}
	if out, err := Decide(s, resolver.Default(), events.DeferredEvicted{Names: []string{"x"}, Reason: "bound"}, Limits{}); err != nil || out != nil {
		t.Errorf("evicting nothing loaded: %v, %v; want a no-op", out, err)
	}
	open := Fold(testSession, stored(events.TurnStarted{Turn: 1}, events.DeferredLoaded{Names: []string{"a"}, Turn: 1}))
	if _, err := Decide(open, resolver.Default(), events.DeferredEvicted{Names: []string{"a"}, Reason: "bound"}, Limits{}); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("inside a turn: %v, want ErrInvalidCommand", err)
	}
}

// Referenced keeps every tool the history loaded, also after a
// checkpoint or an eviction unloads it, and survives a snapshot.
func TestReferencedOutlivesUnloads(t *testing.T) {
	s := Fold(testSession, stored(
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Names: []string{"c", "a"}, Turn: 1},
		events.TurnEnded{Turn: 1},
		events.DeferredEvicted{Names: []string{"a"}, Turn: 1, Reason: "bound"},
		events.CheckpointRecorded{ContractHash: hash(1), RegistryVersion: "v", Turn: 1},
	))
	if s.Rejected != 0 || s.Loaded != nil || !slices.Equal(s.Referenced, []string{"a", "c"}) {
		t.Fatalf("loaded %v referenced %v rejected %d", s.Loaded, s.Referenced, s.Rejected)
	}
	b, err := MarshalState(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalState(b)
	if err != nil || !slices.Equal(back.Referenced, s.Referenced) {
		t.Errorf("snapshot: %v, %v", back.Referenced, err)
	}
}
