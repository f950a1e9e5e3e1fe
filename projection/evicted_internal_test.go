package projection

import (
	"fmt"
	"testing"
)

// The set of evicted sessions never forgets one (a forgotten
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

// A rebuild that evicts millions of sessions keeps the false-positive
// rate of the whole set bounded: each later segment is larger and
// tighter, so the rate does not grow by a segment's rate per million
// keys. Three segments (1M, 2M and a started 4M) answer "maybe" for
// under 1.7% of keys never added, and still for every key added.
func TestEvictedSetRateStaysBounded(t *testing.T) {
	e := newEvictedSet()
	const n = 3*segKeys + 1
	for i := range n {
		e.add(fmt.Sprintf("in-%d", i))
	}
	if len(e.segs) != 3 {
		t.Fatalf("%d segments for %d keys, want 3 (capacities 1M, 2M, 4M)", len(e.segs), n)
	}
	for i := 0; i < n; i += 101 {
		if !e.mayContain(fmt.Sprintf("in-%d", i)) {
			t.Fatalf("in-%d added but not found", i)
		}
	}
	const probes = 200_000
	fp := 0
	for i := range probes {
		if e.mayContain(fmt.Sprintf("out-%d", i)) {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 0.017 {
		t.Fatalf("false-positive rate %.4f over %d keys in 3 segments, want under 0.017 (equal 1M segments: about 0.024)", rate, n)
	}
}
