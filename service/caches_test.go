package service

import (
	"fmt"
	"testing"
)

// The LRU itself is tested in internal/lru (TestBoundedEvictsLeastRecentlyUsed).

// The engine's turn and dispatch caches are bounded by
// CacheSize (memory per open turn: BenchmarkOpenTurnMemory).
func TestEngineCachesBounded(t *testing.T) {
	t.Parallel()
	e := &Engine{ts: newTurnState(2)}
	ts := &e.ts
	for i := range 5 {
		s := fmt.Sprint("s", i)
		ts.turns.Put(s, &openTurn{})
		ts.last.Put(s, dispatchMark{turn: uint64(i)})
	}
	if ts.turns.Len() != 2 || ts.last.Len() != 2 {
		t.Fatalf("turns %d, last %d: want both bounded at 2", ts.turns.Len(), ts.last.Len())
	}
	if m, ok := ts.last.Get("s4"); !ok || m.turn != 4 {
		t.Fatalf("the most recent dispatch was evicted")
	}
}
