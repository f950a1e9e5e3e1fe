package aggregate

import (
	"slices"
	"testing"

	"github.com/toolintent/engine/events"
)

// The fold keeps the loaded deferred tools in the order the
// log loaded them (Loaded stays the sorted set): a DeferredLoaded appends
// the names it newly loads, a CheckpointRecorded keeps the order of the
// names it keeps and appends the ones it adds, and a snapshot taken
// anywhere carries the order, so a fold resumed from it ends equal.
func TestLoadOrderFollowsTheLog(t *testing.T) {
	cp := func(names ...string) events.CheckpointRecorded {
		c := events.CheckpointRecorded{Loaded: names, ContractHash: hash(1), RegistryVersion: "r1", Turn: 2}
		for _, n := range names {
			c.Contract = append(c.Contract, events.ContractEntry{Name: n, Hash: hash(2)})
		}
		return c
	}
	evs := stored(
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Turn: 1, Names: []string{"zeta", "beta"}},
		events.DeferredLoaded{Turn: 1, Names: []string{"beta", "alpha"}},
		events.TurnEnded{Turn: 1},
		events.TurnStarted{Turn: 2},
		events.DeferredLoaded{Turn: 2, Names: []string{"gamma"}},
		cp("gamma", "alpha", "delta", "zeta"), // drops beta, adds delta
	)
	want := [][]string{
		nil,
		{"zeta", "beta"},
		{"zeta", "beta", "alpha"},
		{"zeta", "beta", "alpha"},
		{"zeta", "beta", "alpha"},
		{"zeta", "beta", "alpha", "gamma"},
		{"zeta", "alpha", "gamma", "delta"},
	}
	for i := range evs {
		st := Fold(testSession, evs[:i+1])
		if st.Rejected+st.Skipped != 0 {
			t.Fatalf("event %d not applied: %+v", i+1, st.Rejections)
		}
		if !slices.Equal(st.LoadOrder, want[i]) || !slices.Equal(st.InLoadOrder(), want[i]) {
			t.Errorf("after event %d: load order %v, want %v", i+1, st.LoadOrder, want[i])
		}
		sorted := slices.Sorted(slices.Values(want[i]))
		if !slices.Equal(st.Loaded, sorted) && !(len(sorted) == 0 && st.Loaded == nil) {
			t.Errorf("after event %d: loaded %v, want the sorted set %v", i+1, st.Loaded, sorted)
		}
		// A snapshot here, then the rest of the log, ends where the whole
		// fold ends.
		b, err := MarshalState(st)
		if err != nil {
			t.Fatal(err)
		}
		resumed, err := UnmarshalState(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs[i+1:] {
			resumed.ApplyStored(ev) //nolint:errcheck // recorded in the state
		}
		if whole := Fold(testSession, evs); !slices.Equal(resumed.LoadOrder, whole.LoadOrder) {
			t.Errorf("snapshot after event %d: resumed fold has load order %v, the whole fold %v", i+1, resumed.LoadOrder, whole.LoadOrder)
		}
	}
	// A State built by hand without LoadOrder renders its sorted set.
	if got := (State{Loaded: []string{"a", "b"}}).InLoadOrder(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("InLoadOrder without LoadOrder: %v", got)
	}
}
