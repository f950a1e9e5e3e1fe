// Package projection keeps the current view of every session (intent,
// loaded deferred set, last checkpoint, last sequence) in a JetStream KV
// bucket, folded from the event log by one durable consumer, so that
// reading a session is one KV get, never a replay (R24).
//
// The view stored for a session is also its snapshot: it carries the
// sequence of the last event folded into it, so a read that must be fresher
// folds only the events after it (bounded replay).
//
// Delivery is at least once. A batch of events is folded, the touched views
// are written, and only then is the batch acknowledged; a crash in between
// redelivers events that the views already hold, and the fold skips them by
// sequence. Nothing acknowledged is ever missing from a view.
//
// One Projection should run per durable name (per stream); other engine
// processes read the views without running one.
package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
)

// DefaultDurable is the feed's consumer name when Config.Durable is empty.
const DefaultDurable = "views"

// Config configures a projection. The zero value is usable.
type Config struct {
	// Durable is the feed's consumer name. Default DefaultDurable.
	Durable string
	// Bucket names the views bucket (<PREFIX>_<Bucket>). Default "VIEWS".
	Bucket string
	// BatchSize bounds the sessions whose views are written in one flush.
	// Default 1000.
	BatchSize int
	// FlushInterval is the longest an event waits in memory before its
	// view is written and it is acknowledged. Events of one session that
	// arrive within it cost one view write. Reads that ask for their own
	// write (MinSeq) are not delayed by it: they fold the log's tail.
	// Default 20ms; negative flushes after every delivery.
	FlushInterval time.Duration
	// CacheSize bounds the views kept in memory between batches. Default
	// 100,000. Beyond it, cached views are dropped and re-read from KV.
	CacheSize int
	// Logger receives structured logs; the zero value logs nothing.
	Logger zerolog.Logger
	// OnSkip, when set, is called for each event that cannot be folded
	// (undecodable, unknown type, future version) (R26).
	OnSkip func(rec jetstream.Record)
	// OnReject, when set, is called for each event the fold rejects
	// because it breaks a fold rule, with the reason (R28).
	OnReject func(rec jetstream.Record, reason error)
	// OnBatch, when set, is called after each acknowledged batch with the
	// number of events and the age of the newest one.
	OnBatch func(n int, lag time.Duration, pending uint64)
	// AcceptGaps folds past sequences that cannot be read from the log,
	// logging them, instead of stopping with ErrDamagedLog (engine
	// rebuild, which accepts the loss).
	AcceptGaps bool
	// Elect makes Run take the runner lease in the meta bucket before it
	// folds (issue 12, item 7): of the engines on one stream exactly one
	// folds at a time; the others stand by and take over within about
	// LeaseTTL when it dies. Without it, Run folds at once (one engine).
	Elect bool
	// Owner names this runner in the lease. Default host:pid:random.
	Owner string
	// LeaseTTL is how long a lease lasts without renewal. Default 5s.
	LeaseTTL time.Duration
	// RenewEvery is how often the runner renews its lease and a standby
	// tries to take it. Default LeaseTTL*3/10.
	RenewEvery time.Duration
}

func (c Config) withDefaults() Config {
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.Bucket == "" {
		c.Bucket = "VIEWS"
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 1000
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 100_000
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = 20 * time.Millisecond
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.RenewEvery <= 0 {
		c.RenewEvery = c.LeaseTTL * 3 / 10
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s:%d:%x", host, os.Getpid(), rand.Uint32())
	}
	return c
}

// Projection folds the log into per-session views. Read, WaitApplied and
// the accessors may be called concurrently with Run.
type Projection struct {
	log   *jetstream.Log
	views *jetstream.Views
	meta  *jetstream.Meta
	regs  *Registries
	cfg   Config

	damaged atomic.Pointer[error] // log damage this process detected (issue 12, item 3)

	// cacheMu guards cache: Run folds into it, Read copies from it.
	cacheMu    sync.RWMutex
	cache      map[string]*aggregate.State
	revs       map[string]uint64 // KV revision of each cached view as read or written; absent: unknown (write unconditionally)
	trustCache bool              // misses are new sessions (fresh rebuild, nothing evicted); Run only
	runner     atomic.Bool       // this projection holds the runner lease (or does not elect)

	applied  atomic.Uint64 // highest stream sequence folded and acknowledged
	caughtUp atomic.Bool
	skipped  atomic.Uint64
	rejected atomic.Uint64
	folded   atomic.Uint64

	interrupted atomic.Uint64 // feeds that failed and were started again
	lastErr     atomic.Pointer[error]

	mu      sync.Mutex
	advance chan struct{} // closed and replaced whenever applied moves
}

// Open opens the views bucket. Run starts folding.
func Open(ctx context.Context, log *jetstream.Log, cfg Config) (*Projection, error) {
	cfg = cfg.withDefaults()
	views, err := log.OpenViews(ctx, cfg.Bucket)
	if err != nil {
		return nil, err
	}
	meta, err := log.OpenMeta(ctx)
	if err != nil {
		return nil, err
	}
	return &Projection{log: log, views: views, meta: meta, regs: NewRegistries(log), cfg: cfg, advance: make(chan struct{})}, nil
}

// Registries answers which registry was in force when an event was
// stored; every fold of this projection, and any replay that must give
// the same verdicts (history, explain), takes events through its Stored.
func (p *Projection) Registries() *Registries {
	if p == nil {
		return nil
	}
	return p.regs
}

// Meta is the projection's bucket of watermark, damage record and runner
// lease.
func (p *Projection) Meta() *jetstream.Meta { return p.meta }

// Damaged returns the log damage this projection detected or found
// recorded (matching jetstream.ErrDamagedLog), or nil: the engine must not
// report ready then (issue 12, item 3). It asks the meta bucket, so an
// engine that does not run the projection sees what the runner recorded.
func (p *Projection) Damaged(ctx context.Context) error {
	if e := p.damaged.Load(); e != nil {
		return *e
	}
	msg, err := p.meta.Damage(ctx)
	if err != nil || msg == "" {
		return nil // the stream and NATS checks report an unreachable server
	}
	return fmt.Errorf("%w: %s", jetstream.ErrDamagedLog, msg)
}

// setDamaged records damage (once per message) and logs it at error.
func (p *Projection) setDamaged(ctx context.Context, msg string) error {
	err := fmt.Errorf("%w: %s", jetstream.ErrDamagedLog, msg)
	if prev := p.damaged.Load(); prev == nil || (*prev).Error() != err.Error() {
		p.cfg.Logger.Error().Err(err).Msg("log damaged: acknowledged events are missing; not ready until restored or rebuilt (engine rebuild)")
	}
	p.damaged.Store(&err)
	if rerr := p.meta.SetDamage(ctx, msg); rerr != nil {
		p.cfg.Logger.Error().Err(rerr).Msg("cannot record the log damage")
	}
	return err
}

// checkLog compares the stream with the watermark: a stream whose last
// sequence is below what the views have folded lost acknowledged events.
func (p *Projection) checkLog(ctx context.Context) error {
	if err := p.Damaged(ctx); err != nil {
		return err
	}
	w, wv, err := p.meta.Watermark(ctx)
	if err != nil {
		return err
	}
	last, err := p.log.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	if last < w {
		return p.setDamaged(ctx, fmt.Sprintf("stream last seq %d < folded %d: %d acknowledged events are gone from the store; restore the data directory from a backup or a replica, or accept the loss with engine rebuild", last, w, w-last))
	}
	vlast, err := p.views.LastSeq(ctx)
	if err != nil {
		return err
	}
	if vlast < wv {
		// The views file lost values: views may be missing or older than
		// the log. They are derived data: fold every view again from the
		// first event (a feed that never acknowledged anything).
		p.cfg.Logger.Error().Uint64("views_last_seq", vlast).Uint64("views_written_seq", wv).
			Msg("views damaged: the views bucket lost values; refolding every view from the log")
		if err := p.log.ResetFeed(ctx, p.cfg.Durable); err != nil {
			return err
		}
		if err := p.meta.SetWatermark(ctx, w, 0); err != nil {
			return err
		}
	}
	return nil
}

// Views is the KV bucket the projection writes.
func (p *Projection) Views() *jetstream.Views { return p.views }

// Applied is the highest stream sequence folded into the views and
// acknowledged.
func (p *Projection) Applied() uint64 { return p.applied.Load() }

// CaughtUp reports whether the last batch left nothing pending.
func (p *Projection) CaughtUp() bool { return p.caughtUp.Load() }

// Skipped counts events that could not be folded (R26).
func (p *Projection) Skipped() uint64 { return p.skipped.Load() }

// Rejected counts events the fold rejected (R28).
func (p *Projection) Rejected() uint64 { return p.rejected.Load() }

// Folded counts events folded since Run started.
func (p *Projection) Folded() uint64 { return p.folded.Load() }

// Runner reports whether this projection folds now: it holds the runner
// lease (Config.Elect), or runs without election.
func (p *Projection) Runner() bool { return p.runner.Load() }

// Owner is this projection's name in the runner lease.
func (p *Projection) Owner() string { return p.cfg.Owner }

// Interruptions counts the times Run's feed failed (a lost connection, a
// leader election, a view write that timed out) and Run started it again
// from the acknowledged position, and returns the last such error (nil
// when there was none). Run itself only returns when its context ends.
func (p *Projection) Interruptions() (uint64, error) {
	var err error
	if e := p.lastErr.Load(); e != nil {
		err = *e
	}
	return p.interrupted.Load(), err
}

// Run folds events until ctx ends, and returns nil then. It resumes after
// the last acknowledged event of the durable feed (catch-up after a
// restart). Transient failures (a lost connection, a leader election, a
// view write that timed out) do not stop it: it logs them, backs off, drops
// its in-memory state and starts again from the feed's acknowledged
// position. With Config.Elect it folds only while it holds the runner
// lease, and stands by otherwise.
func (p *Projection) Run(ctx context.Context) error {
	if !p.cfg.Elect {
		p.runner.Store(true)
		defer p.runner.Store(false)
		return p.runLoop(ctx)
	}
	for {
		lease, err := p.acquire(ctx)
		if err != nil {
			return nil // ctx ended
		}
		p.cfg.Logger.Info().Str("owner", p.cfg.Owner).Msg("projection runner: holding the lease, folding")
		lctx, cancel := context.WithCancel(ctx)
		kept := make(chan jetstream.Lease, 1)
		go func() { kept <- p.keepLease(lctx, lease, cancel) }()
		p.runner.Store(true)
		_ = p.runLoop(lctx)
		cancel()
		lease = <-kept
		p.runner.Store(false)
		p.caughtUp.Store(false)
		p.cacheMu.Lock()
		p.cache, p.revs = nil, nil // a standby reads the views the runner writes
		p.cacheMu.Unlock()
		if ctx.Err() != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := p.meta.Release(rctx, lease); err == nil {
				p.cfg.Logger.Info().Str("owner", p.cfg.Owner).Msg("projection runner: lease released")
			}
			rcancel()
			return nil
		}
		p.cfg.Logger.Warn().Str("owner", p.cfg.Owner).Msg("projection runner: lease lost, standing by")
	}
}

// acquire waits until this projection holds the runner lease, or ctx ends.
func (p *Projection) acquire(ctx context.Context) (jetstream.Lease, error) {
	logged := false
	for {
		lease, err := p.meta.Acquire(ctx, p.cfg.Owner, p.cfg.LeaseTTL)
		if err == nil {
			return lease, nil
		}
		if !logged {
			ev := p.cfg.Logger.Info()
			if !errors.Is(err, jetstream.ErrLeaseHeld) {
				ev = p.cfg.Logger.Warn()
			}
			ev.Err(err).Str("owner", p.cfg.Owner).Msg("projection runner: standing by")
			logged = true
		}
		select {
		case <-ctx.Done():
			return jetstream.Lease{}, ctx.Err()
		case <-time.After(p.cfg.RenewEvery):
		}
	}
}

// keepLease renews the lease every RenewEvery until ctx ends; when a
// renewal fails (someone else took the lease, or NATS cannot be reached)
// it cancels the folding at once: a runner that cannot renew must stop
// before its lease expires and another takes over. It returns the lease
// as last renewed.
func (p *Projection) keepLease(ctx context.Context, lease jetstream.Lease, cancel context.CancelFunc) jetstream.Lease {
	t := time.NewTicker(p.cfg.RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return lease
		case <-t.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, p.cfg.RenewEvery)
		next, err := p.meta.Renew(rctx, lease, p.cfg.LeaseTTL)
		rcancel()
		if err != nil {
			if ctx.Err() == nil {
				p.cfg.Logger.Warn().Err(err).Str("owner", p.cfg.Owner).Msg("projection runner: cannot renew the lease: stopping folding")
			}
			cancel()
			return lease
		}
		lease = next
	}
}

// runLoop folds from the feed until ctx ends, restarting after failures.
func (p *Projection) runLoop(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := p.runFeed(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.caughtUp.Store(false)
		p.interrupted.Add(1)
		p.lastErr.Store(&err)
		p.cfg.Logger.Warn().Err(err).Dur("retry_in", backoff).Msg("projection interrupted: resuming from the acknowledged position")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// runFeed folds from one feed until an error or ctx ends.
func (p *Projection) runFeed(ctx context.Context) error {
	if err := p.checkLog(ctx); err != nil {
		return err
	}
	feed, err := p.log.Feed(ctx, jetstream.FeedConfig{Durable: p.cfg.Durable})
	if err != nil {
		return err
	}
	defer feed.Stop()
	pos, err := feed.Position(ctx)
	if err != nil {
		return err
	}
	floor := pos.AckFloor
	// State cached by an earlier feed may be ahead of the views if that
	// feed failed before a flush: start from the views.
	p.cacheMu.Lock()
	p.cache = make(map[string]*aggregate.State)
	p.revs = make(map[string]uint64)
	p.cacheMu.Unlock()
	// A feed that never acknowledged anything rebuilds every view from the
	// first event: existing views (of an earlier feed) are overwritten.
	p.trustCache = floor == 0
	p.setApplied(floor)
	p.cfg.Logger.Debug().Str("durable", p.cfg.Durable).Uint64("ack_floor", floor).Uint64("delivered", pos.Delivered).Msg("projection feed started")
	u := unflushed{dirty: make(map[string]bool)}
	var pipe flushPipe
	defer pipe.wait() //nolint:errcheck // an error here is the feed's end anyway
	next := floor + 1 // stream sequences are contiguous: every event is on a session subject
	if pos.Delivered > floor {
		// An earlier feed was handed these and did not acknowledge them
		// (a crash, or a shutdown mid-window); the server redelivers them
		// only after AckWait. Fold them from the log now: catch-up must
		// not wait for that timer.
		var recs []jetstream.Record
		err := p.log.ScanRange(ctx, next, pos.Delivered, func(r jetstream.Record) error {
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			return err
		}
		if err := p.fold(ctx, recs, u.dirty, &u.order); err != nil {
			return err
		}
		if len(recs) > 0 {
			next = recs[len(recs)-1].Seq + 1
			u.last, u.events, u.since = recs[len(recs)-1], len(recs), time.Now()
		}
		u.pending = pos.Undelivered
		if err := p.flush(ctx, feed, &u, &pipe); err != nil {
			return err
		}
		if err := pipe.wait(); err != nil {
			return err
		}
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
	for {
		wait := time.Duration(-1)
		if u.events > 0 {
			wait = max(0, p.flushInterval(&u)-time.Since(u.since))
		}
		b, err := feed.NextWithin(ctx, p.cfg.BatchSize, wait)
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
			if err := p.fold(ctx, recs, u.dirty, &u.order); err != nil {
				return err
			}
			if len(recs) > 0 {
				next = recs[len(recs)-1].Seq + 1
				u.last = recs[len(recs)-1]
			}
			if u.events == 0 && len(recs) > 0 {
				u.since = time.Now()
			}
			u.events += len(recs)
			u.batch, u.pending = b, b.Pending
		}
		if u.batch.Records == nil {
			continue
		}
		if !p.flushDue(&u) {
			continue
		}
		if err := p.flush(ctx, feed, &u, &pipe); err != nil {
			return err
		}
	}
}

// Catch-up windows: while the feed is far behind (a replay, a restart
// after downtime), a window folds up to catchUpEvents events or
// catchUpSessions sessions, or for catchUpInterval, before its views are
// written, so a session touched many times in the backlog is written once
// per window, not once per BatchSize sessions. catchUpEvents stays well
// under the feed's MaxAckPending (100,000), or delivery would stop before
// the window is acknowledged.
const (
	catchUpPending  = 4096
	catchUpEvents   = 50_000
	catchUpSessions = 20_000
	catchUpInterval = 250 * time.Millisecond
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
	dirty   map[string]bool
	order   []string // dirty sessions in first-touched order
	events  int
	since   time.Time
	last    jetstream.Record // last folded record
	batch   jetstream.Batch  // last delivered batch: acknowledging it covers all
	pending uint64
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
		data, err := aggregate.MarshalState(*p.cache[s])
		if err != nil {
			p.cacheMu.RUnlock()
			return fmt.Errorf("encode view of %q: %w", s, err)
		}
		puts = append(puts, jetstream.Put{Key: s, Value: data})
	}
	p.cacheMu.RUnlock()
	n, last, pending, batch := u.events, u.last, u.pending, u.batch
	clear(u.dirty)
	*u = unflushed{dirty: u.dirty, order: u.order[:0]}
	if err := pipe.wait(); err != nil {
		return err
	}
	// Each view is written only over the revision this runner read or
	// wrote (issue 12, item 7): a runner that lost its lease cannot
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
		var viewsSeq uint64
		p.cacheMu.Lock()
		for i, rev := range revs {
			viewsSeq = max(viewsSeq, rev)
			if _, cached := p.cache[puts[i].Key]; cached {
				p.revs[puts[i].Key] = rev
			}
		}
		p.cacheMu.Unlock()
		if n > 0 {
			// The watermark, written before the acknowledgement: a log
			// (or views bucket) found behind it on a later start lost
			// what it held.
			if err := p.meta.SetWatermark(ctx, last.Seq, viewsSeq); err != nil {
				done <- err
				return
			}
		}
		if err := feed.Ack(batch); err != nil {
			done <- err
			return
		}
		if n > 0 {
			p.folded.Add(uint64(n))
			p.setApplied(last.Seq)
		}
		p.caughtUp.Store(pending == 0)
		if p.cfg.OnBatch != nil && n > 0 {
			p.cfg.OnBatch(n, time.Since(last.Time), pending)
		}
		done <- nil
	}(pipe.done)
	return nil
}

// fillGaps returns the records to fold from a delivered batch, in stream
// order from next on: redeliveries below next are dropped and missing
// sequences are read from the log.
func (p *Projection) fillGaps(ctx context.Context, next uint64, delivered []jetstream.Record) ([]jetstream.Record, error) {
	out := make([]jetstream.Record, 0, len(delivered))
	for _, r := range delivered {
		if r.Seq < next {
			continue
		}
		if r.Seq > next {
			p.cfg.Logger.Info().Uint64("from", next).Uint64("to", r.Seq-1).Msg("projection: filling a delivery gap from the log")
			gap, err := p.readGap(ctx, next, r.Seq-1)
			if err != nil {
				return nil, err
			}
			out = append(out, gap...)
		}
		out = append(out, r)
		next = r.Seq + 1
	}
	return out, nil
}

// readGap reads the events [from, to] the feed did not deliver. The
// stream's sequences are contiguous (deletes are denied), so a sequence
// that cannot be read is damage: reported (ErrDamagedLog), not skipped,
// unless AcceptGaps. A replica may lag a moment behind the leader: the
// read is tried again for about two seconds first.
func (p *Projection) readGap(ctx context.Context, from, to uint64) ([]jetstream.Record, error) {
	var out []jetstream.Record
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		out = out[:0]
		err := p.log.ScanRange(ctx, from, to, func(g jetstream.Record) error {
			out = append(out, g)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if uint64(len(out)) == to-from+1 {
			return out, nil
		}
		if p.cfg.AcceptGaps {
			p.cfg.Logger.Warn().Uint64("from", from).Uint64("to", to).Int("readable", len(out)).Msg("damaged log: unreadable sequences skipped (rebuild accepts the loss)")
			return out, nil
		}
		if wait > time.Second {
			return nil, p.setDamaged(ctx, fmt.Sprintf("sequences %d..%d cannot be read from the stream (%d of %d readable): acknowledged events are gone from the store; restore the data directory from a backup or a replica, or accept the loss with engine rebuild", from, to, len(out), to-from+1))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
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
func (p *Projection) fold(ctx context.Context, recs []jetstream.Record, dirty map[string]bool, order *[]string) error {
	// Load the views of sessions not cached, and the registries in force
	// for the events whose verdict needs one, outside the lock.
	evs := make([]aggregate.Stored, len(recs))
	for i, rec := range recs {
		if err := p.load(ctx, rec.Session); err != nil {
			return err
		}
		var err error
		if evs[i], err = p.regs.Stored(ctx, rec); err != nil {
			return err
		}
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	for i, rec := range recs {
		st := p.cache[rec.Session]
		if rec.Seq <= st.LastSeq {
			continue // redelivered: already in the view
		}
		if err := st.ApplyStored(evs[i]); err != nil {
			p.report(rec, err)
		}
		if !dirty[rec.Session] {
			dirty[rec.Session] = true
			*order = append(*order, rec.Session)
		}
	}
	return nil
}

// stored is rec as the fold takes it, without a registry (see
// Registries.Stored).
func stored(rec jetstream.Record) aggregate.Stored {
	return aggregate.Stored{Seq: rec.Seq, MsgID: rec.MsgID, Envelope: rec.Envelope, Err: rec.Err}
}

// report logs and counts an event the fold did not apply (R26, R28).
func (p *Projection) report(rec jetstream.Record, err error) {
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

// load makes sure a session's state is cached, reading its view on a miss.
func (p *Projection) load(ctx context.Context, session string) error {
	p.cacheMu.RLock()
	_, ok := p.cache[session]
	p.cacheMu.RUnlock()
	if ok {
		return nil
	}
	st := &aggregate.State{Session: session}
	var rev uint64
	known := false
	if session != "" && !p.trustCache {
		s, r, err := p.viewRev(ctx, session)
		if err != nil {
			return err
		}
		st, rev, known = &s, r, true
	}
	p.cacheMu.Lock()
	if _, ok := p.cache[session]; !ok {
		p.cache[session] = st
		if known {
			p.revs[session] = rev
		}
	}
	p.cacheMu.Unlock()
	return nil
}

// viewOf reads a session's view (see viewRev).
func (p *Projection) viewOf(ctx context.Context, session string) (aggregate.State, error) {
	st, _, err := p.viewRev(ctx, session)
	return st, err
}

// viewRev reads a session's view from KV and its revision: the fold of
// its log when it has none (a new session reads as the zero state) or the
// view cannot be decoded by this build.
func (p *Projection) viewRev(ctx context.Context, session string) (aggregate.State, uint64, error) {
	data, rev, err := p.views.GetRev(ctx, session)
	if err != nil {
		return aggregate.State{Session: session}, 0, err
	}
	if data == nil {
		// No view: a new session, or a view lost with a damaged views
		// file. Never serve the defaults for a session with events: fold
		// its log (issue 12, item 3).
		st, err := p.foldLog(ctx, session, aggregate.State{Session: session}, 0)
		if err == nil && st.LastSeq > 0 {
			p.cfg.Logger.Warn().Str("session", session).Uint64("seq", st.LastSeq).Msg("view missing: refolded from the log")
		}
		return st, 0, err
	}
	st, err := aggregate.UnmarshalState(data)
	if err != nil {
		p.cfg.Logger.Warn().Str("session", session).Err(err).Msg("view unreadable: rebuilding from the log")
		st, err = p.foldLog(ctx, session, aggregate.State{Session: session}, 0)
		return st, rev, err
	}
	return st, rev, nil
}

// evict drops cached views beyond CacheSize, but not those being written
// (inflight): read back before their write lands, they would be stale.
func (p *Projection) evict(inflight []jetstream.Put) {
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	if len(p.cache) <= p.cfg.CacheSize {
		return
	}
	// Drop about a tenth; map order is random, which is all eviction
	// needs (no output depends on it).
	n := len(p.cache) - p.cfg.CacheSize + p.cfg.CacheSize/10
	keep := make(map[string]bool, len(inflight))
	for _, put := range inflight {
		keep[put.Key] = true
	}
	for k := range p.cache {
		if n == 0 {
			break
		}
		if keep[k] {
			continue
		}
		delete(p.cache, k)
		delete(p.revs, k)
		n--
	}
	p.trustCache = false
}

// foldLog folds the session's events after st.LastSeq, up to upTo (0: the
// end), into st.
func (p *Projection) foldLog(ctx context.Context, session string, st aggregate.State, upTo uint64) (aggregate.State, error) {
	err := p.log.ScanSession(ctx, session, st.LastSeq+1, upTo, func(r jetstream.Record) error {
		ev, err := p.regs.Stored(ctx, r)
		if err != nil {
			return err
		}
		st.ApplyStored(ev) //nolint:errcheck // recorded in st; the projection reports
		return nil
	})
	return st, err
}

// ReadOptions qualify a read.
type ReadOptions struct {
	// MinSeq asks for read-your-writes: the view returned has folded every
	// event of the session up to at least this stream sequence. When the
	// stored view is older, the missing tail is folded from the log (a
	// bounded replay from the view's sequence).
	MinSeq uint64
	// Latest folds whatever the log holds after the view (strong read).
	Latest bool
}

// Read returns a session's view: from the memory of the projection when
// this process runs it and holds the session (fresher than the KV view,
// which it writes at most FlushInterval later), else one KV get; plus a
// tail fold from the log only when opts ask for something fresher. A
// session with no events reads as the zero state (intent: follow the
// profile), not an error.
func (p *Projection) Read(ctx context.Context, session string, opts ReadOptions) (aggregate.State, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.State{}, fmt.Errorf("read session %q: %w", session, err)
	}
	st, ok := p.cached(session)
	if !ok {
		var err error
		if st, err = p.viewOf(ctx, session); err != nil {
			return aggregate.State{}, err
		}
	}
	var err error
	if !opts.Latest && st.LastSeq >= opts.MinSeq {
		return st, nil
	}
	st, err = p.foldLog(ctx, session, st, 0)
	// On a replicated stream any replica may answer a direct get, and a
	// follower can lag the leader for a moment: the write at MinSeq was
	// acknowledged, so wait (bounded) for the replicas to have it.
	deadline := time.Now().Add(readYourWritesWait)
	for wait := 5 * time.Millisecond; err == nil && opts.MinSeq > 0 && st.LastSeq < opts.MinSeq; wait = min(wait*2, 200*time.Millisecond) {
		if time.Now().After(deadline) {
			return st, fmt.Errorf("read session %q: no replica has sequence %d after %s (the session is at %d; is that sequence this session's?): %w",
				session, opts.MinSeq, readYourWritesWait, st.LastSeq, ErrNotCaughtUp)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("read session %q at sequence %d (have %d): %w: %w", session, opts.MinSeq, st.LastSeq, ErrNotCaughtUp, ctx.Err())
		case <-time.After(wait):
		}
		st, err = p.foldLog(ctx, session, st, 0)
	}
	return st, err
}

// readYourWritesWait bounds how long a read waits for a replica to have
// the sequence it asks for.
const readYourWritesWait = 5 * time.Second

// cached returns a copy of the session's state in the projection's memory.
func (p *Projection) cached(session string) (aggregate.State, bool) {
	p.cacheMu.RLock()
	defer p.cacheMu.RUnlock()
	st, ok := p.cache[session]
	if !ok {
		return aggregate.State{}, false
	}
	return st.Clone(), true
}

// ErrNotCaughtUp is returned by WaitApplied when ctx ends first.
var ErrNotCaughtUp = errors.New("projection has not reached the sequence")

// WaitApplied blocks until the projection has folded and acknowledged the
// stream up to seq, or ctx ends.
func (p *Projection) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		p.mu.Lock()
		if p.applied.Load() >= seq {
			p.mu.Unlock()
			return nil
		}
		ch := p.advance
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for sequence %d (at %d): %w: %w", seq, p.applied.Load(), ErrNotCaughtUp, ctx.Err())
		}
	}
}

// Sessions lists the sessions that have a view, sorted.
func (p *Projection) Sessions(ctx context.Context) ([]string, error) {
	return p.views.Keys(ctx)
}

// Reconcile checks every stored view against the log, after a rebuild
// of a damaged store: a view that claims a later sequence than its
// session has in the log (its events were lost with the store) is
// refolded from what the log holds (the zero view when it holds nothing), so
// that the session does not refuse every append as a conflict. It
// returns how many views it corrected. Run it with the projection
// stopped.
func (p *Projection) Reconcile(ctx context.Context) (int, error) {
	keys, err := p.views.Keys(ctx)
	if err != nil {
		return 0, err
	}
	fixed := 0
	for _, s := range keys {
		if events.ValidateSessionID(s) != nil {
			continue
		}
		v, err := p.viewOf(ctx, s)
		if err != nil {
			return fixed, err
		}
		last, err := p.log.LastSeq(ctx, s)
		if err != nil {
			return fixed, err
		}
		if v.LastSeq <= last {
			continue
		}
		st, err := p.foldLog(ctx, s, aggregate.State{Session: s}, 0)
		if err != nil {
			return fixed, err
		}
		p.cfg.Logger.Warn().Str("session", s).Uint64("view_seq", v.LastSeq).Uint64("log_seq", last).Msg("view ahead of the damaged log: refolded from what the log holds")
		// A session the log holds nothing of gets the zero view (no KV
		// delete: a tombstone would hide the key's revision from the
		// conditional writes).
		data, err := aggregate.MarshalState(st)
		if err == nil {
			err = p.views.PutAll(ctx, []jetstream.Put{{Key: s, Value: data}})
		}
		if err != nil {
			return fixed, err
		}
		fixed++
	}
	return fixed, nil
}

// Cached is the number of sessions whose state the projection holds in
// memory (at most Config.CacheSize after each flush).
func (p *Projection) Cached() int {
	p.cacheMu.RLock()
	defer p.cacheMu.RUnlock()
	return len(p.cache)
}
