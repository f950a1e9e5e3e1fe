package lru

import (
	"fmt"
	"testing"
)

// Every per-session cache is a bounded LRU: when full it
// evicts the least recently used session only, never all at once.
func TestBoundedEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](3)
	for i := range 3 {
		c.Put(fmt.Sprint(i), i)
	}
	if _, ok := c.Get("0"); !ok { // 0 is now the most recently used
		t.Fatal("0 missing")
	}
	c.Put("3", 3) // evicts 1, the least recently used
	if c.Len() != 3 {
		t.Fatalf("len %d, want 3", c.Len())
	}
	for k, want := range map[string]bool{"0": true, "1": false, "2": true, "3": true} {
		if _, ok := c.Get(k); ok != want {
			t.Errorf("%s present %v, want %v", k, ok, want)
		}
	}
	old, found := c.Swap("2", func(old int, _ bool) int { return old + 10 })
	if v, _ := c.Get("2"); !found || old != 2 || v != 12 {
		t.Fatalf("swap: old %d found %v now %d", old, found, v)
	}
	c.Remove("2")
	if _, ok := c.Get("2"); ok || c.Len() != 2 {
		t.Fatalf("after remove: len %d", c.Len())
	}
}

// A size below 1 still holds one entry (the most recent).
func TestSizeAtLeastOne(t *testing.T) {
	c := New[string, int](0)
	c.Put("a", 1)
	c.Put("b", 2)
	if _, ok := c.Get("b"); !ok || c.Len() != 1 {
		t.Fatalf("len %d, b present %v: want the last put kept alone", c.Len(), ok)
	}
}

// Trim evicts the least recently used entries first, never those kept,
// down to the size asked (the projection trims its views after a batch
// but keeps the ones being written).
func TestTrimKeepsRecentAndPinned(t *testing.T) {
	c := New[string, int](100)
	for i := range 6 {
		c.Put(fmt.Sprint(i), i)
	}
	c.Get("0") // most recently used now
	evicted := c.Trim(3, func(k string) bool { return k == "1" })
	if fmt.Sprint(evicted) != "[2 3 4]" || c.Len() != 3 {
		t.Fatalf("evicted %v leaving %d, want [2 3 4] leaving 3", evicted, c.Len())
	}
	for k, want := range map[string]bool{"0": true, "1": true, "5": true, "2": false} {
		if _, ok := c.Get(k); ok != want {
			t.Errorf("%s present %v, want %v", k, ok, want)
		}
	}
	if got := c.Trim(10, nil); len(got) != 0 {
		t.Fatalf("trim above the length evicted %v", got)
	}
}
