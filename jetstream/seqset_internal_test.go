package jetstream

import (
	"math/rand/v2"
	"testing"
)

// A sequence two damages name (a block that ends before the last
// sequence index.db gives it, then the gap before the next block's first
// record) counts once against its purge: a purge of 3 that left 3 gone
// is not overdrawn.
func TestPurgeRunCountsASequenceOnce(t *testing.T) {
	runs := newPurgeRuns([]AcceptedLoss{{Stream: "S", From: 2, To: 10, Count: 3, What: "erase of big"}})
	for _, r := range [][2]uint64{{2, 3}, {3, 3}, {4, 4}, {2, 4}} {
		if out := runs.uncovered("S", r[0], r[1]); len(out) != 0 {
			t.Fatalf("uncovered(%d, %d) = %v, want nothing outside the purge", r[0], r[1], out)
		}
	}
	runs.tombstoned("S", []uint64{3, 4}) // gone from the blocks: counted already
	if d := runs.overdrawn(map[string]string{"S": "index.db"}); len(d) != 0 {
		t.Fatalf("overdrawn: %v, want none (3 gone, 3 purged)", d)
	}
	runs.uncovered("S", 9, 9)
	d := runs.overdrawn(map[string]string{"S": "index.db"})
	if len(d) != 1 || d[0].Count != 1 {
		t.Fatalf("overdrawn after a fourth sequence gone: %+v, want one damage of 1", d)
	}
}

// Gaps added in any order, overlapping, touching or apart, count the
// union of their sequences and stay sorted and disjoint.
func TestPurgeRunGapsCountTheirUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		r := purgeRun{SeqRange: SeqRange{First: 1, Last: 500}}
		want := map[uint64]bool{}
		for range 1 + round%40 {
			lo := 1 + rng.Uint64N(500)
			hi := min(lo+rng.Uint64N(20), 500)
			r.addGap(lo, hi)
			for s := lo; s <= hi; s++ {
				want[s] = true
			}
		}
		if r.missing != uint64(len(want)) {
			t.Fatalf("round %d: %d counted missing, the union holds %d", round, r.missing, len(want))
		}
		for k, g := range r.gaps {
			if g.First > g.Last || (k > 0 && r.gaps[k-1].Last+1 >= g.First) {
				t.Fatalf("round %d: gaps not sorted and apart: %v", round, r.gaps)
			}
			for s := g.First; s <= g.Last; s++ {
				if !want[s] {
					t.Fatalf("round %d: gap %v holds %d, never added", round, g, s)
				}
			}
		}
	}
}
