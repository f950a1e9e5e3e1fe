package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// orderedCatchUpMin is the smallest backlog a rebuilding projection folds
// through an ordered consumer before it starts its durable feed: below
// it, the consumer's setup is not worth it. A variable for the tests,
// which run the rebuild tests through both paths.
var orderedCatchUpMin uint64 = 10_000

// catchUpOrdered rebuilds the views of a projection whose durable feed has
// acknowledged nothing (a new projection, `engine rebuild`, a new
// bucket), when the stream holds at least orderedCatchUpMin events: it
// folds the stream with Log.CatchUp, in the feed's catch-up windows (view
// writes, then the watermark), and returns the last sequence folded, past
// which runFeed starts the durable feed (FeedConfig.StartAfter). 0: it
// did nothing.
//
// A durable feed makes the server track each delivery and its
// acknowledgement; an ordered consumer does not, so a replay costs the
// server what reading the stream costs (engine bench's replay line).
//
// Nothing is acknowledged before the last window's views and watermark
// are written: a crash in between leaves the feed as new as it was, and
// the next start rebuilds again. Handoffs are refused meanwhile (events
// of this process's writers are folded from the stream like any other).
func (p *Projection) catchUpOrdered(ctx context.Context) (uint64, error) {
	pos, _, err := p.log.FeedPosition(ctx, p.cfg.Durable)
	if err != nil {
		return 0, err
	}
	if !pos.AckedNone {
		return 0, nil
	}
	st, err := p.log.StreamState(ctx)
	if err != nil {
		return 0, err
	}
	if st.Messages < orderedCatchUpMin {
		return 0, nil
	}
	p.cacheMu.Lock()
	p.cache = newCache()
	p.revs = make(map[string]uint64)
	p.hand.reset()
	p.handing = false
	p.cacheMu.Unlock()
	// Every view is rebuilt from the first event, as by a new feed (see
	// runFeed): sessions not cached and never evicted start empty.
	if p.rebuildFrom, err = p.views.LastSeq(ctx); err != nil {
		return 0, err
	}
	p.trustCache = true
	p.evicted = newEvictedSet()
	p.feedStart = 0
	p.setApplied(0)
	u := unflushed{dirty: make(map[string]time.Time), compacted: make(map[string]uint64)}
	var pipe flushPipe
	next := st.FirstSeq
	last, err := p.log.CatchUp(ctx, st.FirstSeq, func(recs []logport.Record, pending uint64) error {
		// Sequences the stream no longer holds (an erase) are skipped by
		// the consumer: fillGaps tells them from lost ones, as for the
		// feed's deliveries.
		recs, err := p.fillGaps(ctx, next, recs)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		if err := p.fold(ctx, recs, &u); err != nil {
			return err
		}
		next = recs[len(recs)-1].Seq + 1
		u.last = recs[len(recs)-1]
		if u.events == 0 {
			u.since = p.windowStart(recs[0], pending)
		}
		u.events += len(recs)
		// Catch-up windows to the end: the last few thousand events of
		// the backlog are no reason for the live 20 ms windows, which
		// wrote every view of the rebuild twice.
		u.pending = pending
		if pending > 0 {
			u.pending = max(pending, catchUpPending)
		}
		// The last window is written after CatchUp returns, below.
		if pending == 0 || !p.flushDue(&u) {
			return nil
		}
		return p.flush(ctx, nil, &u, &pipe)
	})
	if errors.Is(err, jetstream.ErrCatchUpStalled) {
		// The durable feed goes on from what was folded, with its gap
		// fill and damage rules.
		p.cfg.Logger.Warn().Err(err).Msg("projection: ordered catch-up stalled; the feed goes on after what it folded")
		err = nil
	}
	if err == nil && u.events > 0 {
		// Applied moves to the end only once the durable feed is past it
		// (runFeed): a waiter for the stream's end (engine rebuild) stops
		// the projection then, not before the feed exists, which would
		// leave the next start to rebuild again (through an accepted gap).
		u.holdApplied = true
		err = p.flush(ctx, nil, &u, &pipe)
	}
	if werr := pipe.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return 0, fmt.Errorf("rebuild views from the stream (ordered catch-up to %d): %w", last, err)
	}
	p.cfg.Logger.Debug().Uint64("last", last).Uint64("from", st.FirstSeq).Msg("projection rebuilt its views with an ordered consumer; the feed starts after them")
	return last, nil
}
