package projection

import "testing"

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
					search := func(a, b uint64, best Anchor, found bool) (Anchor, bool, error) {
						for a <= b {
							mid := a + (b-a)/2
							x, ok, _ := early(mid)
							if ok {
								best, found, a = x, true, mid+1
								continue
							}
							b = mid - 1
						}
						return best, found, nil
					}
					got, found, err := gallop(g, lo, hi, early, search)
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
