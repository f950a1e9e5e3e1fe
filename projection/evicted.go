package projection

import "hash/maphash"

// evictedSet remembers, approximately, the sessions a rebuilding feed
// dropped from its cache. While a feed folds from the first event
// (trustCache), a session it has not cached and never evicted has no
// view, so its first event needs no KV read; only evicted sessions must be
// read back. It is a scalable Bloom filter: a false positive costs one
// view read and one log read (the session is read back, as without the
// filter), never a wrong view; there are no false negatives.
//
// Segment i holds segKeys<<i keys at a false-positive rate about half of
// segment i-1's (one more hash, 1.5 more bits per key), so the rate of the
// whole set stays under about 1.7% however many sessions a rebuild evicts
// (equal segments would add about 0.8% per million: 7% at ten million
// evicted sessions, each a view read and a log read), and a lookup visits
// at most log2(keys/segKeys)+1 segments. Memory: 1.25 MB for the first
// million keys, 25 MB allocated at ten million.
type evictedSet struct {
	seed maphash.Seed
	segs []bloomSeg
}

// bloomSeg is one segment of the filter.
type bloomSeg struct {
	bits []uint64
	m    uint64 // len(bits)*64
	k    uint64 // hashes per key
	cap  int    // keys it is sized for
	n    int    // keys added
}

// segKeys is the first segment's capacity; the first segment has
// segBitsPerKey bits per key and segHashes hashes.
const (
	segKeys       = 1 << 20
	segBitsPerKey = 10
	segHashes     = 7
)

func newEvictedSet() *evictedSet { return &evictedSet{seed: maphash.MakeSeed()} }

// evictedAlwaysMaybe makes mayContain answer true for every key (tests:
// a false positive for every session).
var evictedAlwaysMaybe bool

// newSeg is segment i: capacity segKeys<<i, 10+1.5i bits per key, 7+i
// hashes.
func newSeg(i int) bloomSeg {
	capacity := segKeys << i
	m := uint64(capacity) * uint64(2*segBitsPerKey+3*i) / 2
	m = (m + 63) &^ 63
	return bloomSeg{bits: make([]uint64, m/64), m: m, k: uint64(segHashes + i), cap: capacity}
}

// add records key as evicted.
func (e *evictedSet) add(key string) {
	if len(e.segs) == 0 || e.segs[len(e.segs)-1].n >= e.segs[len(e.segs)-1].cap {
		e.segs = append(e.segs, newSeg(len(e.segs)))
	}
	s := &e.segs[len(e.segs)-1]
	h1, h2 := e.hash(key)
	for i := range s.k {
		b := (h1 + i*h2) % s.m
		s.bits[b/64] |= 1 << (b % 64)
	}
	s.n++
}

// mayContain reports whether key may have been added (false: certainly
// not).
func (e *evictedSet) mayContain(key string) bool {
	if e == nil {
		return false
	}
	if evictedAlwaysMaybe {
		return true
	}
	if len(e.segs) == 0 {
		return false
	}
	h1, h2 := e.hash(key)
	for k := range e.segs {
		s := &e.segs[k]
		in := true
		for i := range s.k {
			b := (h1 + i*h2) % s.m
			if s.bits[b/64]&(1<<(b%64)) == 0 {
				in = false
				break
			}
		}
		if in {
			return true
		}
	}
	return false
}

// hash is the key's two 32-bit halves of one 64-bit hash, for double
// hashing (the second odd).
func (e *evictedSet) hash(key string) (uint64, uint64) {
	h := maphash.String(e.seed, key)
	return h & 0xffffffff, h>>32 | 1
}
