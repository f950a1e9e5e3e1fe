package projection

import (
	"fmt"
	"testing"
)

// #28 item 1: the set of evicted sessions never forgets one (a forgotten
// session would be folded from the zero state over its stored view), and
// says "maybe" for few sessions it never held (each costs one view read).
func TestEvictedSetHasNoFalseNegatives(t *testing.T) {
	var nilSet *evictedSet
	if nilSet.mayContain("s") {
		t.Fatal("a nil set contains s")
	}
	e := newEvictedSet()
	const n = segKeys + 1000 // two segments
	for i := range n {
		e.add(fmt.Sprintf("in-%d", i))
	}
	if len(e.segs) != 2 {
		t.Fatalf("%d segments for %d keys, want 2", len(e.segs), n)
	}
	for i := 0; i < n; i += 7 {
		if !e.mayContain(fmt.Sprintf("in-%d", i)) {
			t.Fatalf("in-%d added but not found", i)
		}
	}
	fp := 0
	for i := range 100_000 {
		if e.mayContain(fmt.Sprintf("out-%d", i)) {
			fp++
		}
	}
	if fp > 3000 { // about 1% per full segment
		t.Fatalf("%d of 100000 never-added keys reported, want about 1%%", fp)
	}
}
