package projection

// The writer's handoff: a writer of this process hands the events
// the log just acknowledged to the projection, which folds them into the
// state it holds at once. A paced feed does not have them delivered at
// all: it takes the run of handed sequences at its consumer's cursor as
// folded (handed.skip) and moves the consumer past it (a consumer reset);
// the log's acknowledgement, which the handoff carries (sequence and
// Nats-Msg-Id), is the check. A standing-pull feed delivers them, and
// verifies each by stream sequence and Nats-Msg-Id, neither decoding nor
// folding it again. Either way their views are written in the feed's
// batches, so another engine sees them as before; a restart starts from
// the watermark written after the views (see runFeed), since the reset
// acknowledges them before.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Acked is an append the log acknowledged: Events were stored at stream
// sequences First, First+1, ... on Session's subject, on the condition
// that the session's last sequence was Expected.
type Acked struct {
	Session  string
	Expected uint64
	First    uint64
	Events   []events.Envelope
}

// handed is the events handed over and not yet delivered by the feed, per
// session, in sequence order, and the session of each by sequence (the
// feed's Skip walks the stream's sequences).
type handed struct {
	mu        sync.Mutex
	bySession map[string][]handedEvent
	bySeq     map[uint64]string
	delivered uint64 // highest stream sequence the feed delivered (or skipped)
	// read is the highest stream sequence the feed has read (held): a
	// handed event at or below it that held did not take was folded
	// without the check. Skipped runs do not move it: a delivery queued
	// before a run may still be on its way to the feed.
	read     uint64
	mismatch error // a delivered event that was not the one handed over
	// skipping allows skip to give runs up: set once the feed has written
	// views and its watermark, from which a restart starts when the
	// consumer's acknowledged position is ahead of it (see runFeed).
	skipping bool
}

type handedEvent struct {
	seq uint64
	id  string
	at  time.Time // when it was handed over
}

// reset forgets every handed event (a feed starting over from the views).
func (h *handed) reset() {
	h.mu.Lock()
	h.bySession, h.bySeq, h.delivered, h.read, h.mismatch, h.skipping = nil, nil, 0, 0, nil, false
	h.mu.Unlock()
}

// drop forgets the first n handed events of session, whose list is evs
// (h.mu held).
func (h *handed) drop(session string, evs []handedEvent, n int) {
	for _, e := range evs[:n] {
		delete(h.bySeq, e.seq)
	}
	if n == len(evs) {
		delete(h.bySession, session)
	} else {
		h.bySession[session] = evs[n:]
	}
}

// remove forgets the handed event evs[i] of session, whose list is evs
// (h.mu held).
func (h *handed) remove(session string, evs []handedEvent, i int) {
	delete(h.bySeq, evs[i].seq)
	if len(evs) == 1 {
		delete(h.bySession, session)
		return
	}
	h.bySession[session] = slices.Delete(evs, i, i+1)
}

// held is the feed's FeedConfig.Held: it reports whether the event at seq
// is the one a writer handed over (same session, sequence and id), and
// forgets it. An event at a handed sequence with another id is recorded
// as a mismatch, which fails the feed (see fold).
func (h *handed) held(session string, seq uint64, msgID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delivered = max(h.delivered, seq)
	h.read = max(h.read, seq)
	evs := h.bySession[session]
	if len(evs) == 0 {
		return false
	}
	i := 0
	for i < len(evs) && evs[i].seq < seq {
		i++ // delivered without the check (a gap filled from the log): stale
	}
	ok := i < len(evs) && evs[i].seq == seq
	if ok && evs[i].id != msgID {
		h.mismatch = errHandoffMismatch(session, seq, evs[i].id, msgID)
		ok = false
	}
	if ok {
		i++
	}
	h.drop(session, evs, i)
	return ok
}

// skip is the feed's FeedConfig.Skip: it gives up the run of handed
// events at from, from+1, ... (at most limit), as records the fold takes
// as held, and otherwise reports the lowest handed sequence above from.
// The records carry no data: the log acknowledged each at its sequence
// with its id, and Handoff folded it already.
func (h *handed) skip(from uint64, limit int) (run []logport.Record, next uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.skipping || len(h.bySeq) == 0 {
		return nil, 0
	}
	for seq := from; len(run) < limit; seq++ {
		session, ok := h.bySeq[seq]
		if !ok {
			break
		}
		// The session's handed events below seq that the feed has not
		// read up to stay: the pulls before this one may have them
		// queued for the feed, which verifies them (held). Those at or
		// below what the feed read were folded without the check (a
		// feed's start folds from the log): stale.
		evs := h.bySession[session]
		stale := 0
		for stale < len(evs) && evs[stale].seq <= h.read {
			stale++
		}
		if stale > 0 {
			h.drop(session, evs, stale)
			evs = evs[stale:]
		}
		i, found := slices.BinarySearchFunc(evs, seq, func(e handedEvent, seq uint64) int { return cmp.Compare(e.seq, seq) })
		if !found {
			delete(h.bySeq, seq)
			break
		}
		if run == nil {
			run = make([]logport.Record, 0, min(limit, len(h.bySeq)))
		}
		run = append(run, logport.Record{Seq: seq, Session: session, Time: evs[i].at, MsgID: evs[i].id, Held: true})
		h.remove(session, evs, i)
	}
	if len(run) > 0 {
		h.delivered = max(h.delivered, run[len(run)-1].Seq)
		return run, 0
	}
	if len(h.bySeq) >= limit {
		// The feed is a batch or more behind the writers: it pulls a
		// whole batch (the handed events in it are delivered and checked
		// by held), not the gap up to the next handed sequence. Pulling
		// gap after gap, each behind a consumer reset, while handoffs
		// refused meanwhile made more gaps, folded 1,600 events a second
		// 150,000 events behind (engine bench's 64-session line, one run
		// in six of 300,000 appends); the search for the next handed
		// sequence walks them all.
		return nil, 0
	}
	for seq := range h.bySeq {
		if seq > from && (next == 0 || seq < next) {
			next = seq
		}
	}
	return nil, next
}

// forget drops the handed events of a session (evicted from the cache:
// the feed must decode them when they come).
func (h *handed) forget(session string) {
	h.mu.Lock()
	if evs := h.bySession[session]; len(evs) > 0 {
		h.drop(session, evs, len(evs))
	}
	h.mu.Unlock()
}

// Handoff takes the events a writer of this process appended and the log
// acknowledged, and folds them into the session's state in the
// projection's memory, so that the feed, delivering them later, skips
// their decoding and folding. It reports whether it took them. It does
// not take them (and the feed folds them from the log as before) when
// this projection is not folding now (a standby, or between feeds), when
// it does not hold the session at exactly a.Expected (another writer's
// events are not folded yet, or the session was evicted), or when an
// event's fold needs the registry in force when it was stored
// (aggregate.NeedsRegistry): the projection, not the writer, judges
// those. The events are folded with the same rules as the feed's
// (State.ApplyStored, the Nats-Msg-Id being the event id), so the views
// stay the fold of the log. A new session (a.Expected 0) that the
// projection does not hold is taken when the feed started before it.
//
// The view is written in the feed's next batch after the feed delivers
// the events, and acknowledged after it (as before): a crash before that
// refolds them from the log on restart. Safe for concurrent use.
func (p *Projection) Handoff(a Acked) bool {
	if p == nil || len(a.Events) == 0 || a.Session == "" || a.First <= a.Expected || !p.runner.Load() {
		return false
	}
	for _, env := range a.Events {
		if env.Session != a.Session || aggregate.NeedsRegistry(env) {
			return false
		}
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	if !p.handing {
		return false
	}
	p.hand.mu.Lock()
	defer p.hand.mu.Unlock()
	if a.First <= p.hand.delivered {
		// The feed delivered (and decoded) them already: nothing to skip.
		return false
	}
	st, ok := p.cache.Get(a.Session)
	switch {
	case ok && st.LastSeq == a.Expected:
	case !ok && a.Expected == 0 && a.First > p.handFloor:
		// Stored on the condition that the subject was empty, after the
		// feed started: no feed folded it, so it has no view (as loadAll).
		st = &aggregate.State{Session: a.Session}
		p.cache.Put(a.Session, st)
		p.revs[a.Session] = 0
	default:
		return false
	}
	if p.hand.bySession == nil {
		p.hand.bySession = make(map[string][]handedEvent)
		p.hand.bySeq = make(map[uint64]string)
	}
	now := time.Now()
	for i, env := range a.Events {
		seq := a.First + uint64(i)
		if err := st.ApplyStored(aggregate.Stored{Seq: seq, MsgID: env.ID, Envelope: env}); err != nil {
			p.report(logport.Record{Seq: seq, Session: a.Session, MsgID: env.ID, Envelope: env}, err)
		}
		p.hand.bySession[a.Session] = append(p.hand.bySession[a.Session], handedEvent{seq: seq, id: env.ID, at: now})
		p.hand.bySeq[seq] = a.Session
	}
	return true
}

// HandedOff counts the events the feed did not decode or fold because a
// writer had handed them over (Handoff): delivered and verified, or
// skipped without a delivery.
func (p *Projection) HandedOff() uint64 { return p.heldN.Load() }

// ErrHandoffMismatch: the feed delivered, at a sequence a writer of this
// process handed over, an event with another id. The log's
// acknowledgement said otherwise: the feed stops and starts again from
// the views, folding from the log.
var ErrHandoffMismatch = errors.New("handed-over event differs from the log's")

func errHandoffMismatch(session string, seq uint64, want, got string) error {
	return fmt.Errorf("session %q seq %d: handed over %s, the log holds %q: %w", session, seq, want, got, ErrHandoffMismatch)
}
