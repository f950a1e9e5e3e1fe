package service

import (
	"fmt"
	"testing"
)

// #13 item 5: every per-session cache is a bounded LRU: when full it
// evicts the least recently used session only, never all at once.
func TestLRUBoundedEvictsLeastRecentlyUsed(t *testing.T) {
	c := newLRU[string, int](3)
	for i := range 3 {
		c.put(fmt.Sprint(i), i)
	}
	if _, ok := c.get("0"); !ok { // 0 is now the most recently used
		t.Fatal("0 missing")
	}
	c.put("3", 3) // evicts 1, the least recently used
	if c.len() != 3 {
		t.Fatalf("len %d, want 3", c.len())
	}
	for k, want := range map[string]bool{"0": true, "1": false, "2": true, "3": true} {
		if _, ok := c.get(k); ok != want {
			t.Errorf("%s present %v, want %v", k, ok, want)
		}
	}
	old, found := c.swap("2", func(old int, _ bool) int { return old + 10 })
	if v, _ := c.get("2"); !found || old != 2 || v != 12 {
		t.Fatalf("swap: old %d found %v now %d", old, found, v)
	}
	c.remove("2")
	if _, ok := c.get("2"); ok || c.len() != 2 {
		t.Fatalf("after remove: len %d", c.len())
	}
}

// #13 item 5: the engine's turn and dispatch caches are bounded by
// CacheSize (memory per open turn: BenchmarkOpenTurnMemory).
func TestEngineCachesBounded(t *testing.T) {
	e := &Engine{ts: newTurnState(2)}
	ts := &e.ts
	for i := range 5 {
		s := fmt.Sprint("s", i)
		ts.turns.put(s, &openTurn{})
		ts.last.put(s, dispatchMark{turn: uint64(i)})
	}
	if ts.turns.len() != 2 || ts.last.len() != 2 {
		t.Fatalf("turns %d, last %d: want both bounded at 2", ts.turns.len(), ts.last.len())
	}
	if m, ok := ts.last.get("s4"); !ok || m.turn != 4 {
		t.Fatalf("the most recent dispatch was evicted")
	}
}
