// Package projection keeps the current view of every session (intent,
// loaded deferred set, last checkpoint, last sequence) in a JetStream KV
// bucket, folded from the event log by one durable consumer, so that
// reading a session is one KV get, never a replay.
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
	"github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/internal/tick"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// DefaultDurable is the feed's consumer name when Config.Durable is empty.
const DefaultDurable = "views"

// DefaultBucket names the views bucket (<PREFIX>_VIEWS) when Config.Bucket
// is empty.
const DefaultBucket = "VIEWS"

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
	// Pace is how often the feed pulls the events stored since its last
	// pull while it is caught up: a writer of this process hands its
	// events over (Handoff) and the feed only verifies them and writes
	// their views, so they need not be delivered one by one as they are
	// stored, on the writer's cores. Events of other writers reach the
	// views at most Pace later. Default FlushInterval/10 (2ms at the
	// default FlushInterval), at most 25ms: at FlushInterval/4 (5ms) the
	// ack-to-view lag p99 under 64 writing sessions was 49-55 ms, over
	// its 50 ms target, at /10 35 ms, with the same append ratios;
	// negative (or a negative FlushInterval): a standing pull, every event
	// delivered as it is stored.
	Pace time.Duration
	// CacheSize bounds the views kept in memory between batches. Default
	// 100,000. Beyond it, cached views are dropped and re-read from KV.
	CacheSize int
	// Logger receives structured logs; the zero value logs nothing.
	Logger zerolog.Logger
	// OnSkip, when set, is called for each event that cannot be folded
	// (undecodable, unknown type, future version).
	OnSkip func(rec logport.Record)
	// OnReject, when set, is called for each event the fold rejects
	// because it breaks a fold rule, with the reason.
	OnReject func(rec logport.Record, reason error)
	// OnBatch, when set, is called after each acknowledged batch with the
	// number of events and the age of the newest one.
	OnBatch func(n int, lag time.Duration, pending uint64)
	// OnStandby, when set, is called when Run stops folding: its lease
	// was lost or Run returns. The lag OnBatch last reported is then
	// another engine's to report.
	OnStandby func()
	// AcceptGaps folds past sequences that cannot be read from the log,
	// logging them, instead of stopping with ErrDamagedLog (engine
	// rebuild, which accepts the loss).
	AcceptGaps bool
	// Elect makes Run take the runner lease in the meta bucket before it
	// folds: of the engines on one stream exactly one
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
		c.Bucket = DefaultBucket
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
	if c.Pace == 0 && c.FlushInterval > 0 {
		c.Pace = min(c.FlushInterval/10, 25*time.Millisecond)
	}
	if c.Pace < 0 || c.FlushInterval < 0 {
		c.Pace = 0
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
	views ViewStore // *jetstream.Views from Open
	meta  *jetstream.Meta
	regs  *Registries
	cfg   Config

	history  *jetstream.HistoryIndex    // history anchors (nil: none written or read)
	anchored *lru.Cache[string, uint64] // the last anchor written per session; under cacheMu

	damaged atomic.Pointer[error] // log damage this process detected

	// cacheMu guards the states in cache: Run folds into them, Read
	// copies from them. The cache is the one LRU, trimmed to
	// CacheSize after each batch (evict), never during one.
	cacheMu     sync.RWMutex
	cache       *lru.Cache[string, *aggregate.State]
	revs        map[string]uint64 // KV revision of each cached view as read or written; absent: unknown (write unconditionally)
	trustCache  bool              // misses not in evicted are new sessions (fresh rebuild); Run only
	evicted     *evictedSet       // sessions evicted since the rebuild began (trustCache); Run only
	rebuildFrom uint64            // the views' last revision when the rebuild began: later ones are its writes (trustCache); Run only
	feedStart   uint64            // the feed's delivered sequence when it started: later events were never folded; Run only
	runner      atomic.Bool       // this projection holds the runner lease (or does not elect)
	handing     bool              // a feed runs: Handoff may fold into cache
	handFloor   uint64            // feedStart, for Handoff (under cacheMu)
	hand        handed            // events handed over, not yet delivered
	heldN       atomic.Uint64     // delivered events skipped because handed over

	applied atomic.Uint64 // highest stream sequence folded and acknowledged
	// viewsMark is the views sequence the last watermark recorded (0: none
	// yet, or a refold under way), kept by a window that writes no view.
	viewsMark atomic.Uint64
	caughtUp  atomic.Bool
	skipped   atomic.Uint64
	rejected  atomic.Uint64
	folded    atomic.Uint64

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
	history, err := log.OpenHistoryIndex(ctx)
	if err != nil {
		return nil, err
	}
	return &Projection{log: log, views: views, meta: meta, regs: NewRegistries(log), cfg: cfg, cache: newCache(), advance: make(chan struct{}),
		history: history, anchored: lru.New[string, uint64](cfg.CacheSize)}, nil
}

// Stored is rec as this projection folds it: with the registry in force
// when it was stored, so a replay (history, explain) gives the
// projection's verdicts.
func (p *Projection) Stored(ctx context.Context, rec logport.Record) (aggregate.Stored, error) {
	return p.regs.Stored(ctx, rec)
}

// Meta is the projection's bucket of watermark, damage record and runner
// lease.
func (p *Projection) Meta() *jetstream.Meta { return p.meta }

// Damaged returns the log damage this projection detected or found
// recorded (matching jetstream.ErrDamagedLog), or nil: the engine must not
// report ready then. It asks the meta bucket, so an
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
		p.viewsMark.Store(0)
	}
	return nil
}

// Views is the KV bucket the projection writes; nil when its ViewStore
// is not a JetStream bucket.
func (p *Projection) Views() *jetstream.Views {
	v, _ := p.views.(*jetstream.Views)
	return v
}

// Applied is the highest stream sequence folded into the views and
// acknowledged.
func (p *Projection) Applied() uint64 { return p.applied.Load() }

// CaughtUp reports whether the last batch left nothing pending.
func (p *Projection) CaughtUp() bool { return p.caughtUp.Load() }

// Skipped counts events that could not be folded.
func (p *Projection) Skipped() uint64 { return p.skipped.Load() }

// Rejected counts events the fold rejected.
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
		defer p.standBy()
		return p.runLoop(ctx)
	}
	// mayHold: a lease write of this projection may have been stored (it
	// held the lease, or an acquire went unanswered). A projection stopped
	// while standing by may then hold the lease all the same: an acquire
	// or a renewal that timed out here can have reached the server.
	mayHold := false
	for {
		lease, err := p.acquire(ctx, &mayHold)
		if err != nil { // ctx ended
			if mayHold {
				p.releaseOnStop(ctx)
			}
			return nil
		}
		mayHold = true
		p.cfg.Logger.Info().Str("owner", p.cfg.Owner).Msg("projection runner: holding the lease, folding")
		lctx, cancel := context.WithCancel(ctx)
		kept := make(chan struct{})
		go func() { p.keepLease(lctx, lease, cancel); close(kept) }()
		p.runner.Store(true)
		_ = p.runLoop(lctx)
		cancel()
		<-kept
		p.standBy()
		p.caughtUp.Store(false)
		p.cacheMu.Lock()
		p.cache, p.revs = newCache(), nil // a standby reads the views the runner writes
		p.cacheMu.Unlock()
		if ctx.Err() != nil {
			p.releaseOnStop(ctx)
			return nil
		}
		p.cfg.Logger.Warn().Str("owner", p.cfg.Owner).Msg("projection runner: lease lost, standing by")
	}
}

// releaseOnStop gives the runner lease up, if this projection holds it,
// as the projection stops (ctx ended): another engine, or engine rebuild,
// takes over at once instead of after the lease's expiry.
func (p *Projection) releaseOnStop(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	released, err := p.meta.ReleaseOwner(rctx, p.cfg.Owner)
	switch {
	case err != nil:
		p.cfg.Logger.Warn().Err(err).Str("owner", p.cfg.Owner).Dur("expires_in", p.cfg.LeaseTTL).Msg("projection runner: cannot release the lease: another runner takes over when it expires")
	case released:
		p.cfg.Logger.Info().Str("owner", p.cfg.Owner).Msg("projection runner: lease released")
	}
}

// standBy marks the projection as no longer folding and tells
// Config.OnStandby.
func (p *Projection) standBy() {
	p.runner.Store(false)
	if p.cfg.OnStandby != nil {
		p.cfg.OnStandby()
	}
}

// acquire waits until this projection holds the runner lease, or ctx
// ends; it sets *mayHold when an acquire's write went unanswered.
func (p *Projection) acquire(ctx context.Context, mayHold *bool) (jetstream.Lease, error) {
	logged := false
	for {
		lease, err := p.meta.Acquire(ctx, p.cfg.Owner, p.cfg.LeaseTTL)
		if err == nil {
			return lease, nil
		}
		if errors.Is(err, jetstream.ErrLeaseUnknown) {
			*mayHold = true
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
// before its lease expires and another takes over.
func (p *Projection) keepLease(ctx context.Context, lease jetstream.Lease, cancel context.CancelFunc) {
	tick.Every(ctx, p.cfg.RenewEvery, func() bool {
		rctx, rcancel := context.WithTimeout(ctx, p.cfg.RenewEvery)
		next, err := p.meta.Renew(rctx, lease, p.cfg.LeaseTTL)
		rcancel()
		if err != nil {
			if ctx.Err() == nil {
				p.cfg.Logger.Warn().Err(err).Str("owner", p.cfg.Owner).Msg("projection runner: cannot renew the lease: stopping folding")
			}
			cancel()
			return false
		}
		lease = next
		return true
	})
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
