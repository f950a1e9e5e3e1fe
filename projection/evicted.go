package projection

import "hash/maphash"

// evictedSet remembers, approximately, the sessions a rebuilding feed
// dropped from its cache (#28 item 1). While a feed folds from the first
// event (trustCache), a session it has not cached and never evicted has no
// view, so its first event needs no KV read; only evicted sessions must be
// read back. It is a Bloom filter grown in segments: a false positive costs
// one KV read (the view is read back, as without the filter), never a wrong
// view; there are no false negatives. About 10 bits per evicted session
// (1.2 MB per million), false positive rate about 1%.
type evictedSet struct {
	seed maphash.Seed
	segs []bloomSeg
}

// bloomSeg is one segment of the filter, sized for segKeys keys.
type bloomSeg struct {
	bits []uint64
	n    int
}

const (
	segKeys   = 1 << 20 // keys per segment
	segBits   = segKeys * 10
	bloomHash = 7
)

func newEvictedSet() *evictedSet { return &evictedSet{seed: maphash.MakeSeed()} }

// add records key as evicted.
func (e *evictedSet) add(key string) {
	if len(e.segs) == 0 || e.segs[len(e.segs)-1].n >= segKeys {
		e.segs = append(e.segs, bloomSeg{bits: make([]uint64, segBits/64)})
	}
	s := &e.segs[len(e.segs)-1]
	h1, h2 := e.hash(key)
	for i := range uint32(bloomHash) {
		b := (h1 + i*h2) % segBits
		s.bits[b/64] |= 1 << (b % 64)
	}
	s.n++
}

// mayContain reports whether key may have been added (false: certainly
// not).
func (e *evictedSet) mayContain(key string) bool {
	if e == nil || len(e.segs) == 0 {
		return false
	}
	h1, h2 := e.hash(key)
	for k := range e.segs {
		s := &e.segs[k]
		in := true
		for i := range uint32(bloomHash) {
			b := (h1 + i*h2) % segBits
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

func (e *evictedSet) hash(key string) (uint32, uint32) {
	h := maphash.String(e.seed, key)
	return uint32(h), uint32(h>>32) | 1
}
