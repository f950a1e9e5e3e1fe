package projection

import (
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/jetstream"
)

// gallop finds the last index of a range where a prefix predicate holds,
// from every guess, for every boundary (none, some, all), reading at most
// about twice what a bisection of the range reads.
func TestGallopFindsTheLastEarlyIndex(t *testing.T) {
	for lo := uint64(1); lo <= 3; lo++ {
		for hi := lo; hi <= lo+40; hi++ {
			for last := lo - 1; last <= hi; last++ { // lo-1: none holds
				for g := lo; g <= hi; g++ {
					reads := 0
					early := func(i uint64) (Anchor, bool, error) {
						if i < lo || i > hi {
							t.Fatalf("read index %d outside [%d, %d]", i, lo, hi)
						}
						reads++
						return Anchor{Seq: i}, i <= last, nil
					}
					got, found, err := gallop(g, lo, hi, early)
					if err != nil {
						t.Fatal(err)
					}
					if want := last >= lo; found != want || (found && got.Seq != last) {
						t.Fatalf("[%d, %d] last %d guess %d: found %v at %d", lo, hi, last, g, found, got.Seq)
					}
					if bound := 2*bitsOf(hi-lo+1) + 2; reads > bound {
						t.Fatalf("[%d, %d] last %d guess %d: %d reads, want at most %d", lo, hi, last, g, reads, bound)
					}
				}
			}
		}
	}
}

// bitsOf is the number of bits of n.
func bitsOf(n uint64) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// A window that folds a session's anchor points and then its compaction
// writes, for that session, the forget first and no anchor taken before
// the compaction (its events are purged); the first anchor after the
// compaction becomes the session's base. Other sessions' anchors pass.
func TestAnchorJobsDropAnchorsBeforeACompaction(t *testing.T) {
	p := &Projection{history: &jetstream.HistoryIndex{}, cache: newCache(), anchored: lru.New[string, uint64](16)}
	p.cache.Put("s", &aggregate.State{Session: "s", Events: 200})
	p.anchored.Put("s", 3)
	u := &unflushed{compacted: map[string]uint64{"s": 150}, anchors: []anchorJob{
		{session: "s", i: 1, seq: 64},
		{session: "t", i: 1, seq: 70, first: true},
		{session: "s", i: 2, seq: 128},
		{session: "s", i: 3, seq: 192},
	}}
	jobs := p.anchorJobs(u)
	want := []anchorJob{
		{session: "s", i: 200/AnchorEvery + 1, forget: true},
		{session: "t", i: 1, seq: 70, first: true},
		{session: "s", i: 3, seq: 192, first: true},
	}
	if len(jobs) != len(want) {
		t.Fatalf("jobs %+v, want %+v", jobs, want)
	}
	for k := range want {
		g, w := jobs[k], want[k]
		if g.session != w.session || g.i != w.i || g.forget != w.forget || g.first != w.first || g.seq != w.seq {
			t.Fatalf("job %d: %+v, want %+v", k, g, w)
		}
	}
	if last, ok := p.anchored.Get("s"); !ok || last != 3 {
		t.Fatalf("anchored s: %d %v, want 3 (the anchor kept after the compaction)", last, ok)
	}
}
