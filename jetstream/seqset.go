package jetstream

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// purgeRuns are the runs of sequences per stream that a store may miss
// without damage: the ranges the engine purged (an erase or a compaction,
// each of a known number of messages) and the runs an operator accepted
// as lost. Overlapping ranges merge into one run that may miss at most
// the sum of their counts: a purge's range spans other sessions' messages
// too, and those must still be there.
type purgeRuns map[string][]purgeRun // stream -> sorted, disjoint

type purgeRun struct {
	SeqRange
	allowed uint64     // how many of the run's sequences may be missing
	missing uint64     // how many are (filled by uncovered and tombstoned)
	gaps    []SeqRange // the runs uncovered counted, in order
	what    []string   // what the merged ranges were
}

// newPurgeRuns merges ls (Count 0: the whole range may be missing).
func newPurgeRuns(ls []AcceptedLoss) purgeRuns {
	by := purgeRuns{}
	for _, l := range ls {
		if l.To < l.From || l.From == 0 {
			continue
		}
		n := l.To - l.From + 1
		if l.Count > 0 && l.Count < n {
			n = l.Count
		}
		by[l.Stream] = append(by[l.Stream], purgeRun{SeqRange: SeqRange{First: l.From, Last: l.To}, allowed: n, what: []string{l.What}})
	}
	for stream, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
		merged := rs[:1]
		for _, r := range rs[1:] {
			m := &merged[len(merged)-1]
			if r.First <= m.Last {
				m.Last = max(m.Last, r.Last)
				m.allowed += r.allowed
				m.what = append(m.what, r.what...)
				continue
			}
			merged = append(merged, r)
		}
		for i := range merged {
			merged[i].allowed = min(merged[i].allowed, merged[i].Last-merged[i].First+1)
		}
		by[stream] = merged
	}
	return by
}

// uncovered returns the parts of [from, to] of stream that no run holds,
// and counts the rest as missing in the runs that hold it.
func (p purgeRuns) uncovered(stream string, from, to uint64) []SeqRange {
	var out []SeqRange
	next := from
	rs := p[stream]
	for i := range rs {
		r := &rs[i]
		if r.Last < next {
			continue
		}
		if r.First > to {
			break
		}
		if r.First > next {
			out = append(out, SeqRange{First: next, Last: r.First - 1})
		}
		r.addGap(max(r.First, next), min(r.Last, to))
		if r.Last >= to {
			return out
		}
		next = r.Last + 1
	}
	if next <= to {
		out = append(out, SeqRange{First: next, Last: to})
	}
	return out
}

// addGap counts the sequences of [lo, hi] not counted yet as missing and
// keeps r.gaps sorted and disjoint: two damages can name one sequence
// (a block that ends before the last sequence index.db gives it, and the
// gap before the next block's first record).
func (r *purgeRun) addGap(lo, hi uint64) {
	gs := r.gaps
	// The gaps that overlap [lo, hi] or touch it merge with it into one.
	i := sort.Search(len(gs), func(k int) bool { return gs[k].Last+1 >= lo })
	k := i
	absorbed := uint64(0)
	for ; k < len(gs) && gs[k].First <= hi+1; k++ {
		lo, hi = min(lo, gs[k].First), max(hi, gs[k].Last)
		absorbed += gs[k].Last - gs[k].First + 1
	}
	r.missing += hi - lo + 1 - absorbed
	r.gaps = slices.Replace(gs, i, k, SeqRange{First: lo, Last: hi})
}

// tombstoned counts as missing the sequences of stream that the server
// marked deleted (its tombstone records) while their records are still in
// a block not compacted yet: a purge's messages in the stream's last
// block stay on disk until the server rewrites it.
func (p purgeRuns) tombstoned(stream string, seqs []uint64) {
	rs := p[stream]
	for _, seq := range seqs {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].Last >= seq })
		if i == len(rs) || rs[i].First > seq {
			continue
		}
		r := &rs[i]
		j := sort.Search(len(r.gaps), func(j int) bool { return r.gaps[j].Last >= seq })
		if j < len(r.gaps) && r.gaps[j].First <= seq {
			continue // gone from the blocks too: counted as a gap
		}
		r.missing++
	}
}

// overdrawn returns a damage for each run missing more sequences than its
// purges account for: messages of other sessions gone from inside a
// purged range. dirs names each stream's index.db: the index counts messages the blocks lost.
func (p purgeRuns) overdrawn(dirs map[string]string) []StoreDamage {
	var out []StoreDamage
	streams := make([]string, 0, len(p))
	for s := range p {
		streams = append(streams, s)
	}
	sort.Strings(streams)
	for _, s := range streams {
		for _, r := range p[s] {
			if r.missing <= r.allowed {
				continue
			}
			out = append(out, StoreDamage{Stream: s, File: dirs[s], Offset: -1, Gap: true, LostFrom: r.First, LostTo: r.Last, Count: r.missing - r.allowed,
				What: fmt.Sprintf("%d sequences are missing from %d..%d, where the purges (%s) account for %d",
					r.missing, r.First, r.Last, strings.Join(r.what, ", "), r.allowed)})
		}
	}
	return out
}
