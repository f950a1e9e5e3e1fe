package projection

// History anchors: for a session with many events, its state every
// AnchorEvery applied events (at the first flush after the count crosses
// a multiple that finds no turn open), written to the history bucket as
// the projection folds, so that a page of its history deep in the log
// folds from the nearest anchor before it instead of from the session's
// first event (HistoryAnchor). A compaction makes the anchors before it
// useless (the events they lead to are purged): the fold of a
// SessionCompacted forgets them.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// AnchorEvery is how many applied events of a session lie between two
// history anchors.
const AnchorEvery = 64

// Anchor is a session's state after the event at Seq, stored at Time,
// with no turn open.
type Anchor struct {
	Seq   uint64
	Time  time.Time
	State aggregate.State
}

// encodeAnchor is seq (8 bytes) and time in Unix nanoseconds (8 bytes),
// then the state as a view (aggregate.MarshalState).
func encodeAnchor(st aggregate.State, t time.Time) ([]byte, error) {
	view, err := aggregate.MarshalState(st)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16, 16+len(view))
	binary.BigEndian.PutUint64(b, st.LastSeq)
	binary.BigEndian.PutUint64(b[8:], uint64(t.UnixNano()))
	return append(b, view...), nil
}

func decodeAnchor(b []byte) (Anchor, error) {
	if len(b) < 16 {
		return Anchor{}, errors.New("history anchor: shorter than its header")
	}
	st, err := aggregate.UnmarshalState(b[16:])
	if err != nil {
		return Anchor{}, fmt.Errorf("history anchor: %w", err)
	}
	a := Anchor{Seq: binary.BigEndian.Uint64(b), Time: time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))).UTC(), State: st}
	if a.Seq != st.LastSeq || a.Seq == 0 {
		return Anchor{}, fmt.Errorf("history anchor: sequence %d, state at %d", a.Seq, st.LastSeq)
	}
	return a, nil
}

// anchorJob is one write or removal of anchors a flush leaves to its
// background writes.
type anchorJob struct {
	session string
	i       uint64 // the anchor to put (value), or the last to forget
	value   []byte
	forget  bool
	first   bool   // the first anchor of the session this process takes since it started or forgot them
	seq     uint64 // the anchor's stream sequence
}

// anchor takes a history anchor of st, whose last event was stored at t,
// when its applied events crossed a multiple of AnchorEvery since its
// last anchor and no turn is open (cacheMu held).
func (p *Projection) anchor(u *unflushed, st *aggregate.State, t time.Time) {
	i := st.Events / AnchorEvery
	if p.history == nil || i == 0 || st.InTurn || st.Deleted() {
		return
	}
	last, seen := p.anchored.Get(st.Session)
	if seen && last >= i {
		return
	}
	value, err := encodeAnchor(*st, t)
	if err != nil {
		return // the view's own encoding reports it
	}
	u.anchors = append(u.anchors, anchorJob{session: st.Session, i: i, value: value, first: !seen, seq: st.LastSeq})
	p.anchored.Put(st.Session, i)
}

// anchorJobs returns the anchor writes and removals of a flush: the
// anchors its fold took, and the removal of the anchors of each session a
// SessionCompacted replaced (their events are purged).
func (p *Projection) anchorJobs(u *unflushed) []anchorJob {
	if p.history == nil {
		return nil
	}
	if len(u.compacted) == 0 {
		return u.anchors
	}
	// An anchor a session took before its compaction in this flush leads
	// to purged events: it is dropped. The first one taken after it is the
	// session's new base.
	var jobs []anchorJob
	after := map[string]bool{}
	for _, j := range u.anchors {
		if at, ok := u.compacted[j.session]; ok {
			if j.seq < at {
				continue
			}
			j.first = j.first || !after[j.session]
			after[j.session] = true
		}
		jobs = append(jobs, j)
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	var forgets []anchorJob
	for s := range u.compacted {
		st, ok := p.cache.Get(s)
		if !ok {
			continue
		}
		if !after[s] {
			// The next anchor the session takes is its first since.
			p.anchored.Remove(s)
		}
		forgets = append(forgets, anchorJob{session: s, i: st.Events/AnchorEvery + 1, forget: true})
	}
	// The forgets go first: the anchors kept were taken after the
	// compaction.
	return append(forgets, jobs...)
}

// writeAnchors carries out jobs; a failure is logged, not returned: an
// anchor only shortens a history read.
func (p *Projection) writeAnchors(ctx context.Context, jobs []anchorJob) {
	for _, j := range jobs {
		var err error
		if j.forget {
			err = p.history.Forget(ctx, j.session, j.i)
		} else if err = p.history.Put(ctx, j.session, j.i, j.value); err == nil && j.first {
			err = p.lowerBase(ctx, j.session, j.i, j.seq)
		}
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn().Err(err).Str("session", j.session).Msg("history anchor not written: deep history pages of the session fold from an earlier point")
		}
	}
}

// lowerBase records i as session's base unless one at or below it is
// recorded: anchors are taken from i on, and the indices below may never
// have been written (anchors taken every 256 events before, a compaction
// that forgot them, a projection that started folding late), so a reader
// must look from here up, or it would take the missing keys below for
// later ones and fall back to an anchor far behind.
func (p *Projection) lowerBase(ctx context.Context, session string, i, seq uint64) error {
	base, _, ok, err := p.history.Base(ctx, session)
	if err != nil || (ok && base <= i) {
		return err
	}
	return p.history.SetBase(ctx, session, i, seq)
}

// ForgetAnchors removes every history anchor of session (an erase leaves
// nothing of it): events counts its applied events.
func (p *Projection) ForgetAnchors(ctx context.Context, session string, events uint64) error {
	if p.history == nil {
		return nil
	}
	p.cacheMu.Lock()
	p.anchored.Remove(session)
	p.cacheMu.Unlock()
	return p.history.Forget(ctx, session, events/AnchorEvery+1)
}

// HistoryAnchor returns the last history anchor of session at or before
// sequence atMost (ok false: none). It looks the anchors up by their index
// (the session's view says how many there can be) from the session's
// base up, a few reads from where the anchor should be (gallop), so a
// deep page of a long history costs what a page near its start does.
func (p *Projection) HistoryAnchor(ctx context.Context, session string, atMost uint64) (Anchor, bool, error) {
	if p.history == nil || atMost == 0 {
		return Anchor{}, false, nil
	}
	st, err := p.Read(ctx, session, ReadOptions{})
	if err != nil {
		return Anchor{}, false, err
	}
	get := func(i uint64) (Anchor, bool, error) {
		b, ok, err := p.history.Get(ctx, session, i)
		if err != nil || !ok {
			return Anchor{}, false, err
		}
		a, err := decodeAnchor(b)
		if err != nil {
			return Anchor{}, false, nil // a damaged anchor is none
		}
		return a, true, nil
	}
	// early is the predicate the search bisects: anchor i is present and
	// at or before atMost. Over indices whose anchors are in sequence
	// order with none missing between two present ones it holds for a
	// prefix (a missing index is taken for one after atMost).
	early := func(i uint64) (Anchor, bool, error) {
		a, ok, err := get(i)
		return a, ok && a.Seq <= atMost, err
	}
	hi := st.Events / AnchorEvery
	base, baseSeq, ok, err := p.history.Base(ctx, session)
	if err != nil {
		return Anchor{}, false, err
	}
	if !ok || base > hi {
		return bisect(1, hi, Anchor{}, false, early)
	}
	// From the base up, the search starts where the anchor should be if
	// the session's events were spread evenly over the sequences from
	// the base's to its last, and gallops from there: two or three reads
	// for a session written at a steady share of the stream, twice a
	// bisection's at worst.
	guess := base
	if baseSeq != 0 && atMost > baseSeq && st.LastSeq > baseSeq {
		f := float64(atMost-baseSeq) / float64(st.LastSeq-baseSeq)
		guess = base + uint64(f*float64(hi-base))
		guess = min(max(guess, base), hi)
	}
	a, found, err := gallop(guess, base, hi, early)
	if err != nil || found {
		return a, found, err
	}
	// The indices below the base may be missing, or hold anchors of an
	// earlier spacing: they are searched only when none from the base on
	// is early enough.
	return bisect(1, base-1, Anchor{}, false, early)
}

// bisect returns the last index in [lo, hi] where early holds (a prefix
// of the range), or best (found) when it holds for none.
func bisect(lo, hi uint64, best Anchor, found bool, early func(uint64) (Anchor, bool, error)) (Anchor, bool, error) {
	for lo <= hi {
		mid := lo + (hi-lo)/2
		a, ok, err := early(mid)
		if err != nil {
			return Anchor{}, false, err
		}
		if ok {
			best, found = a, true
			lo = mid + 1
			continue
		}
		hi = mid - 1
	}
	return best, found, nil
}

// gallop finds the last index in [lo, hi] where early holds (a prefix of
// the range) starting from guess g: it doubles its steps away from g
// until it brackets the boundary, then bisects the bracket.
func gallop(g, lo, hi uint64, early func(uint64) (Anchor, bool, error)) (Anchor, bool, error) {
	a, ok, err := early(g)
	if err != nil {
		return Anchor{}, false, err
	}
	step := uint64(1)
	if ok {
		// g holds: look up for the first index that does not.
		for {
			if hi-g < step {
				return bisect(g+1, hi, a, true, early)
			}
			n := g + step
			b, ok, err := early(n)
			if err != nil {
				return Anchor{}, false, err
			}
			if !ok {
				return bisect(g+1, n-1, a, true, early)
			}
			g, a, step = n, b, step*2
		}
	}
	// g does not hold: look down for an index that does.
	for {
		if g-lo < step {
			return bisect(lo, g-1, Anchor{}, false, early)
		}
		n := g - step
		b, ok, err := early(n)
		if err != nil {
			return Anchor{}, false, err
		}
		if ok {
			return bisect(n+1, g-1, b, true, early)
		}
		g, step = n, step*2
	}
}

// compactedIn reports whether rec is a SessionCompacted.
func compactedIn(rec *logport.Record) bool {
	if rec.Err != nil {
		return false
	}
	_, ok := rec.Envelope.Payload.(events.SessionCompacted)
	return ok
}
