package projection

// The feed loop: folding the durable feed into the views and flushing
// them in batches (gaps.go fills the gaps of unacknowledged writes).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
)

// runFeed folds from one feed until an error or ctx ends.
func (p *Projection) runFeed(ctx context.Context) error {
	if err := p.checkLog(ctx); err != nil {
		return err
	}
	// Handed-over events are folded into the cache; a new feed
	// starts from the views, so it forgets them, and Handoff waits until
	// the cache is reset (openFeed).
	p.cacheMu.Lock()
	p.handing = false
	p.hand.reset()
	p.cacheMu.Unlock()
	defer func() {
		p.cacheMu.Lock()
		p.handing = false
		p.cacheMu.Unlock()
	}()
	startAfter, err := p.catchUpOrdered(ctx)
	if err != nil {
		return err
	}
	feed, err := p.log.Feed(ctx, jetstream.FeedConfig{Durable: p.cfg.Durable, Held: p.hand.held, Skip: p.hand.skip, Pace: p.cfg.Pace, StartAfter: startAfter})
	if err != nil {
		return err
	}
	defer feed.Stop()
	pos, floor, err := p.openFeed(ctx, feed, startAfter)
	if err != nil {
		return err
	}
	u := unflushed{dirty: make(map[string]time.Time), compacted: make(map[string]uint64)}
	var pipe flushPipe
	defer pipe.wait() //nolint:errcheck // an error here is the feed's end anyway
	next, err := p.foldUnacknowledged(ctx, feed, pos, floor, &u, &pipe)
	if err != nil {
		return err
	}
	if pos.Undelivered == 0 && next > pos.Delivered {
		p.caughtUp.Store(true)
	}
	defer func() {
		// On shutdown, write what was folded and acknowledge it, so a
		// restart does not fold it again.
		if u.events > 0 && ctx.Err() != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := pipe.wait(); err == nil {
				err = p.flush(fctx, feed, &u, &pipe)
				if err == nil {
					err = pipe.wait()
				}
				if err != nil {
					p.cfg.Logger.Warn().Err(err).Msg("projection: final flush on shutdown")
				}
			}
		}
	}()
	return p.follow(ctx, feed, next, &u, &pipe)
}

// openFeed finds where feed starts folding (its acknowledged position,
// or the watermark when that is behind), resets the cache and the
// handed-over events to it, and opens the projection to handoffs. It
// returns the feed's position and the sequence folded up to.
func (p *Projection) openFeed(ctx context.Context, feed *jetstream.Feed, startAfter uint64) (jetstream.FeedPosition, uint64, error) {
	pos, err := feed.Position(ctx)
	if err != nil {
		return pos, 0, err
	}
	floor := pos.AckFloor
	if startAfter > 0 && floor < startAfter {
		p.cfg.Logger.Warn().Uint64("rebuilt_to", startAfter).Uint64("ack_floor", floor).Msg("projection: the server did not move the feed past the rebuilt views (no consumer reset: nats-server before 2.14, or not permitted): it folds them again")
	}
	// A feed that skipped handed-over events (FeedConfig.Skip) moved
	// the consumer's acknowledged position past them before their views
	// were written: the watermark, written after the views, is where they
	// are known folded. Start from it when it is behind (and fold from the
	// log what lies between, as for events delivered and not
	// acknowledged); a watermark without views written (0: none, or a
	// views refold under way) says nothing.
	folded, foldedViews, err := p.meta.Watermark(ctx)
	if err != nil {
		return pos, 0, err
	}
	p.viewsMark.Store(foldedViews)
	if foldedViews > 0 && folded < floor {
		p.cfg.Logger.Debug().Uint64("ack_floor", floor).Uint64("watermark", folded).Msg("projection feed starts from its watermark, behind the acknowledged position")
		floor = folded
	}
	// State cached by an earlier feed may be ahead of the views if that
	// feed failed before a flush: start from the views. What an ordered
	// catch-up just folded is the views, all written, and the feed starts
	// after it: it stays cached.
	p.cacheMu.Lock()
	if startAfter == 0 || floor != startAfter {
		p.cache = newCache()
		p.revs = make(map[string]uint64)
	}
	p.hand.reset()
	p.handing, p.handFloor = true, pos.Delivered
	p.cacheMu.Unlock()
	// A feed that never acknowledged anything rebuilds every view from the
	// first event: existing views (of an earlier feed) are overwritten. Its
	// ack floor is 0, or the sequence before the first when an erase
	// purged the stream's first events.
	p.trustCache = floor == 0 || pos.AckedNone
	p.evicted = nil
	if p.trustCache {
		p.evicted = newEvictedSet()
		if p.rebuildFrom, err = p.views.LastSeq(ctx); err != nil {
			return pos, 0, err
		}
	}
	p.feedStart = pos.Delivered
	p.setApplied(floor)
	p.cfg.Logger.Debug().Str("durable", p.cfg.Durable).Uint64("ack_floor", floor).Uint64("delivered", pos.Delivered).Msg("projection feed started")
	return pos, floor, nil
}

// foldUnacknowledged folds from the log, and writes, the events an earlier
// feed was handed and did not acknowledge (pos.Delivered past floor),
// and returns the sequence the feed folds next.
func (p *Projection) foldUnacknowledged(ctx context.Context, feed *jetstream.Feed, pos jetstream.FeedPosition, floor uint64, u *unflushed, pipe *flushPipe) (uint64, error) {
	next := floor + 1 // stream sequences are contiguous: every event is on a session subject
	if pos.Delivered > floor {
		// An earlier feed was handed these and did not acknowledge them
		// (a crash, or a shutdown mid-window); the server redelivers them
		// only after AckWait. Fold them from the log now: catch-up must
		// not wait for that timer.
		var recs []logport.Record
		err := p.log.ScanRange(ctx, next, pos.Delivered, func(r logport.Record) error {
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			return 0, err
		}
		if err := p.fold(ctx, recs, u); err != nil {
			return 0, err
		}
		if len(recs) > 0 {
			next = recs[len(recs)-1].Seq + 1
			u.last, u.events, u.since = recs[len(recs)-1], len(recs), time.Now()
		}
		u.pending = pos.Undelivered
		if err := p.flush(ctx, feed, u, pipe); err != nil {
			return 0, err
		}
		if err := pipe.wait(); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// follow folds the feed's deliveries from next on, writing a window's
// views when it is due, until an error or ctx ends.
func (p *Projection) follow(ctx context.Context, feed *jetstream.Feed, next uint64, u *unflushed, pipe *flushPipe) error {
	for {
		wait := time.Duration(-1)
		if u.events > 0 {
			wait = max(0, p.flushInterval(u)-time.Since(u.since))
		}
		b, err := feed.NextWithin(ctx, p.takeLimit(u), wait)
		if err != nil {
			return err
		}
		if len(b.Records) > 0 {
			// Acknowledging acknowledges everything before (AckAll),
			// including events an earlier feed received and never folded,
			// or deliveries lost in a consumer leader change: fill such
			// gaps from the log before folding.
			recs, err := p.fillGaps(ctx, next, b.Records)
			if err != nil {
				return err
			}
			if err := p.fold(ctx, recs, u); err != nil {
				return err
			}
			if len(recs) > 0 {
				next = recs[len(recs)-1].Seq + 1
				u.last = recs[len(recs)-1]
			}
			if u.events == 0 && len(recs) > 0 {
				u.since = p.windowStart(recs[0], b.Pending)
			}
			u.events += len(recs)
			u.batch, u.pending = b, b.Pending
		}
		if u.batch.Records == nil {
			continue
		}
		if !p.flushDue(u) {
			continue
		}
		if err := p.flush(ctx, feed, u, pipe); err != nil {
			return err
		}
	}
}

// windowStart is when the flush window that first holds rec began: now,
// or, for a paced feed that is caught up, when rec was stored, if at most
// Pace ago: the wait for the pull counts toward the window, so that
// pacing does not add to the time from an append to its view. (A
// server clock ahead of this one counts as now.)
func (p *Projection) windowStart(rec logport.Record, pending uint64) time.Time {
	now := time.Now()
	if p.cfg.Pace <= 0 || pending >= catchUpPending || rec.Time.After(now) {
		return now
	}
	if earliest := now.Add(-p.cfg.Pace); rec.Time.Before(earliest) {
		return earliest
	}
	return rec.Time
}

// Catch-up windows: while the feed is far behind (a replay, a restart
// after downtime), a window folds up to catchUpEvents events or
// catchUpSessions sessions, or for catchUpInterval, before its views are
// written, so a session touched many times in the backlog is written once
// per window, not once per BatchSize sessions. catchUpEvents stays well
// under the feed's MaxAckPending (400,000), or delivery would stop before
// the window is acknowledged. A replay writes about one view per session
// per window: at 250 ms windows it wrote nearly one view per event of a
// 10k-session stream, so a window lasts up to two seconds
// (at 80,000 events and one second, a replay of 170,000 events over
// 10,000 sessions took three windows, 30,000 view writes, and 17-21 µs of
// CPU per event; at 300,000 and two seconds two windows and 13-15 µs,
// BenchmarkReplayWindows).
const (
	catchUpPending  = 4096
	catchUpEvents   = 300_000
	catchUpSessions = 20_000
	catchUpInterval = 2 * time.Second
)

// catchingUp reports whether the last delivery left a backlog large
// enough for catch-up windows.
func (u *unflushed) catchingUp() bool { return u.pending >= catchUpPending }

// flushInterval is how long folded events may wait for their view write.
func (p *Projection) flushInterval(u *unflushed) time.Duration {
	if u.catchingUp() && p.cfg.FlushInterval > 0 {
		return max(p.cfg.FlushInterval, catchUpInterval)
	}
	return p.cfg.FlushInterval
}

// takeLimit is how many delivered events the next fold takes: while
// catching up, large batches (fewer, larger folds), else no more than
// fill the window to BatchSize sessions, so that a window (and the views
// kept in memory beyond CacheSize while they are written) stays within
// BatchSize however the feed's deliveries bunch up.
func (p *Projection) takeLimit(u *unflushed) int {
	if u.catchingUp() {
		return max(p.cfg.BatchSize, catchUpTake)
	}
	return max(1, p.cfg.BatchSize-len(u.order))
}

// catchUpTake is the most events one fold takes while catching up.
const catchUpTake = 4096

// flushDue reports whether the folded window should be written now.
func (p *Projection) flushDue(u *unflushed) bool {
	if p.cfg.FlushInterval <= 0 || time.Since(u.since) >= p.flushInterval(u) {
		return true
	}
	if u.catchingUp() {
		return u.events >= catchUpEvents || len(u.order) >= max(p.cfg.BatchSize, catchUpSessions)
	}
	return len(u.order) >= p.cfg.BatchSize
}

// unflushed is what has been folded into the cache but not yet written to
// the views and acknowledged.
type unflushed struct {
	dirty map[string]time.Time // dirty sessions, with the time of the last event folded into each
	order []string             // dirty sessions in first-touched order
	// compacted are the dirty sessions a SessionCompacted was folded into,
	// with the sequence of the last one.
	compacted map[string]uint64
	// anchors are the history anchors the fold took, to be written.
	anchors []anchorJob
	events  int
	since   time.Time
	last    logport.Record  // last folded record
	batch   jetstream.Batch // last delivered batch: acknowledging it covers all
	pending uint64
	// holdApplied: the flush does not move Applied (an ordered catch-up's
	// last window, see catchUpOrdered).
	holdApplied bool
}

// flushPipe runs at most one flush's writes at a time in the background,
// so folding goes on while the views of the previous window are stored;
// acknowledgements therefore go out in order.
type flushPipe struct {
	done chan error // nil when no flush is in flight
}

// wait blocks until the flush in flight, if any, has finished.
func (f *flushPipe) wait() error {
	if f.done == nil {
		return nil
	}
	err := <-f.done
	f.done = nil
	return err
}

// flush encodes the dirty views, resets u, and (after the previous flush
// finished) writes them and then acknowledges everything delivered, in the
// background.
func (p *Projection) flush(ctx context.Context, feed *jetstream.Feed, u *unflushed, pipe *flushPipe) error {
	puts := make([]jetstream.Put, 0, len(u.order))
	p.cacheMu.RLock()
	for _, s := range u.order {
		st, _ := p.cache.Get(s) // dirty: cached until evict, after the encoding
		data, err := aggregate.MarshalState(*st)
		if err != nil {
			p.cacheMu.RUnlock()
			return fmt.Errorf("encode view of %q: %w", s, err)
		}
		puts = append(puts, jetstream.Put{Key: s, Value: data})
		if st.Deleted() {
			// The marker that keeps it out of Sessions; written again
			// when later (rejected) events dirty the view.
			puts = append(puts, jetstream.Put{Key: DeletedKeyPrefix + s, Value: []byte{1}})
		}
	}
	p.cacheMu.RUnlock()
	anchors := p.anchorJobs(u)
	n, last, pending, batch, hold := u.events, u.last, u.pending, u.batch, u.holdApplied
	clear(u.dirty)
	clear(u.compacted)
	*u = unflushed{dirty: u.dirty, compacted: u.compacted, order: u.order[:0]}
	if err := pipe.wait(); err != nil {
		return err
	}
	// Each view is written only over the revision this runner read or
	// wrote: a runner that lost its lease cannot
	// overwrite the views of the one that took over.
	p.cacheMu.RLock()
	for i := range puts {
		if rev, ok := p.revs[puts[i].Key]; ok {
			puts[i].Cond, puts[i].Rev = true, rev
		}
	}
	p.cacheMu.RUnlock()
	p.evict(puts)
	pipe.done = make(chan error, 1)
	go func(done chan<- error) {
		revs, err := p.views.PutAllSeq(ctx, puts)
		if err != nil {
			done <- err
			return
		}
		p.writeAnchors(ctx, anchors)
		var viewsSeq uint64
		p.cacheMu.Lock()
		for i, rev := range revs {
			viewsSeq = max(viewsSeq, rev)
			if _, cached := p.cache.Get(puts[i].Key); cached {
				p.revs[puts[i].Key] = rev
			}
		}
		p.cacheMu.Unlock()
		if len(puts) == 0 {
			// Only misplaced events, no view written: the views sequence
			// recorded stands (0 would say a refold is under way).
			viewsSeq = p.viewsMark.Load()
		} else {
			p.viewsMark.Store(viewsSeq)
		}
		if n > 0 {
			// The watermark, written before the acknowledgement: a log
			// (or views bucket) found behind it on a later start lost
			// what it held.
			if err := p.meta.SetWatermark(ctx, last.Seq, viewsSeq); err != nil {
				done <- err
				return
			}
			if viewsSeq > 0 && len(puts) > 0 {
				// A restart now starts at most from here: the feed may
				// skip handed-over events (see runFeed).
				p.hand.mu.Lock()
				p.hand.skipping = true
				p.hand.mu.Unlock()
			}
		}
		if feed != nil { // nil: an ordered catch-up has nothing to acknowledge
			if err := feed.Ack(batch); err != nil {
				done <- err
				return
			}
		}
		if n > 0 {
			p.folded.Add(uint64(n))
			if !hold {
				p.setApplied(last.Seq)
			}
		}
		// An ordered catch-up (feed nil) is not caught up before its feed
		// exists: the integrity check looks for the feed from then on.
		p.caughtUp.Store(pending == 0 && feed != nil)
		if p.cfg.OnBatch != nil && n > 0 {
			p.cfg.OnBatch(n, time.Since(last.Time), pending)
		}
		done <- nil
	}(pipe.done)
	return nil
}

func (p *Projection) setApplied(seq uint64) {
	p.mu.Lock()
	if seq > p.applied.Load() {
		p.applied.Store(seq)
		close(p.advance)
		p.advance = make(chan struct{})
	}
	p.mu.Unlock()
}

// fold applies records to the cached views and marks the touched ones.
func (p *Projection) fold(ctx context.Context, recs []logport.Record, u *unflushed) error {
	// Load the views of sessions not cached, and the registries in force
	// for the events whose verdict needs one, outside the lock.
	if err := p.loadAll(ctx, recs); err != nil {
		return err
	}
	if err := p.heldCovered(ctx, recs); err != nil {
		return err
	}
	// The registry in force, for the few events whose fold needs one
	// (read outside the lock); the others are folded as delivered,
	// without an intermediate copy.
	var regOf map[int]*resolver.Registry
	for i, rec := range recs {
		if rec.Held || rec.Err != nil || !aggregate.NeedsRegistry(rec.Envelope) {
			continue
		}
		ev, err := p.regs.Stored(ctx, rec)
		if err != nil {
			return err
		}
		if regOf == nil {
			regOf = make(map[int]*resolver.Registry)
		}
		regOf[i] = ev.Registry
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	for i := range recs {
		rec := &recs[i]
		if misplaced(*rec) {
			p.report(*rec, rec.Err) // its session's view is another partition's: none is touched
			continue
		}
		st, _ := p.cache.Get(rec.Session) // loaded above; evict runs between batches
		if rec.Held {
			p.heldN.Add(1)
		}
		if rec.Seq > st.LastSeq {
			ev := aggregate.StoredRecord(*rec)
			ev.Registry = regOf[i]
			if err := st.ApplyStored(ev); err != nil {
				p.report(*rec, err)
			} else if compactedIn(rec) {
				u.compacted[rec.Session] = rec.Seq
			}
		}
		if rec.Seq == st.LastSeq {
			p.anchor(u, st, rec.Time)
		}
		// Marked for writing even when the state already holds it: folded
		// by a writer's Handoff, or (after a restart) a redelivery the
		// view holds, written again unchanged.
		if _, ok := u.dirty[rec.Session]; !ok {
			u.order = append(u.order, rec.Session)
		}
		u.dirty[rec.Session] = rec.Time
	}
	return nil
}

// misplaced reports whether rec was stored in a partition its session does
// not belong to (a publisher that picked the wrong stream): the fold skips
// it without touching a view, on every engine alike.
func misplaced(rec logport.Record) bool { return errors.Is(rec.Err, logport.ErrWrongPartition) }

// heldCovered decodes, in place, the records the feed left undecoded
// (Held) whose handed-over fold the cache no longer holds (the session
// was evicted in between), reading from the log those the feed skipped
// without a delivery, and fails when a delivered event was not the one
// handed over. Only the feed's goroutine evicts, so a record covered
// here stays covered until fold has run.
func (p *Projection) heldCovered(ctx context.Context, recs []logport.Record) error {
	p.hand.mu.Lock()
	err := p.hand.mismatch
	p.hand.mu.Unlock()
	if err != nil {
		p.cfg.Logger.Error().Err(err).Msg("projection: a handed-over event is not the log's; starting over from the views")
		return err
	}
	var unread []int // skipped records to read from the log
	p.cacheMu.RLock()
	for i, rec := range recs {
		if !rec.Held {
			continue
		}
		if st, ok := p.cache.Get(rec.Session); !ok || st.LastSeq < rec.Seq {
			if rec.Data == nil {
				unread = append(unread, i)
				continue
			}
			recs[i] = p.log.Decode(rec)
		}
	}
	p.cacheMu.RUnlock()
	for _, i := range unread {
		seq := recs[i].Seq
		// readGap: the log's read, asked again while a replica lags, then
		// the stream leader, before the event is called lost.
		gap, err := p.readGap(ctx, seq, seq)
		if err != nil {
			return fmt.Errorf("read skipped event %d of %q: %w", seq, recs[i].Session, err)
		}
		if len(gap) == 0 {
			return fmt.Errorf("skipped event %d of %q: not in the log", seq, recs[i].Session)
		}
		recs[i] = gap[0]
	}
	return nil
}

// report logs and counts an event the fold did not apply.
func (p *Projection) report(rec logport.Record, err error) {
	ev := p.cfg.Logger.Warn().Uint64("seq", rec.Seq).Str("session", rec.Session).Str("id", rec.Envelope.ID).Err(err)
	if errors.Is(err, aggregate.ErrRejected) {
		p.rejected.Add(1)
		ev.Str("type", string(rec.Envelope.Type)).Msg("event rejected: it breaks a fold rule; kept in the log, not applied")
		if p.cfg.OnReject != nil {
			p.cfg.OnReject(rec, err)
		}
		return
	}
	p.skipped.Add(1)
	ev.Msg("event skipped: cannot be folded")
	if p.cfg.OnSkip != nil {
		p.cfg.OnSkip(rec)
	}
}
