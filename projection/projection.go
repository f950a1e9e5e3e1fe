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
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
)

// Config configures a projection. The zero value is usable.
type Config struct {
	// Durable is the feed's consumer name. Default "views".
	Durable string
	// Bucket names the views bucket (<PREFIX>_<Bucket>). Default "VIEWS".
	Bucket string
	// BatchSize bounds events folded per KV write round. Default 1000.
	BatchSize int
	// CacheSize bounds the views kept in memory between batches. Default
	// 100,000. Beyond it, cached views are dropped and re-read from KV.
	CacheSize int
	// Logger receives structured logs; the zero value logs nothing.
	Logger zerolog.Logger
	// OnSkip, when set, is called for each event that cannot be folded
	// (undecodable, unknown type, future version) (R26).
	OnSkip func(rec jetstream.Record)
	// OnBatch, when set, is called after each acknowledged batch with the
	// number of events and the age of the newest one.
	OnBatch func(n int, lag time.Duration, pending uint64)
}

func (c Config) withDefaults() Config {
	if c.Durable == "" {
		c.Durable = "views"
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
	return c
}

// Projection folds the log into per-session views. Read, WaitApplied and
// the accessors may be called concurrently with Run.
type Projection struct {
	log   *jetstream.Log
	views *jetstream.Views
	cfg   Config

	cache      map[string]*aggregate.State // owned by Run
	trustCache bool                        // misses are new sessions (fresh rebuild, nothing evicted)

	applied  atomic.Uint64 // highest stream sequence folded and acknowledged
	caughtUp atomic.Bool
	skipped  atomic.Uint64
	folded   atomic.Uint64

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
	return &Projection{log: log, views: views, cfg: cfg, advance: make(chan struct{})}, nil
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

// Folded counts events folded since Run started.
func (p *Projection) Folded() uint64 { return p.folded.Load() }

// Run folds events until ctx ends, and returns nil then. It resumes after
// the last acknowledged event of the durable feed (catch-up after a
// restart). Transient failures (a lost connection, a leader election, a
// view write that timed out) do not stop it: it logs them, backs off, drops
// its in-memory state and starts again from the feed's acknowledged
// position.
func (p *Projection) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := p.runFeed(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.caughtUp.Store(false)
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
	feed, err := p.log.Feed(ctx, jetstream.FeedConfig{Durable: p.cfg.Durable})
	if err != nil {
		return err
	}
	defer feed.Stop()
	floor, err := feed.AckFloor(ctx)
	if err != nil {
		return err
	}
	// State cached by an earlier feed may be ahead of the views if that
	// feed failed mid-batch: start from the views.
	p.cache = make(map[string]*aggregate.State)
	// A feed that never acknowledged anything rebuilds every view from the
	// first event: existing views (of an earlier feed) are overwritten.
	p.trustCache = floor == 0
	p.setApplied(floor)
	if pending, err := feed.Pending(ctx); err == nil && pending == 0 {
		p.caughtUp.Store(true)
	}
	p.cfg.Logger.Debug().Str("durable", p.cfg.Durable).Uint64("ack_floor", floor).Msg("projection feed started")
	next := floor + 1 // stream sequences are contiguous: every event is on a session subject
	for {
		b, err := feed.Next(ctx, p.cfg.BatchSize)
		if err != nil {
			return err
		}
		// Acknowledging a batch acknowledges everything before it (AckAll),
		// including events an earlier feed received and never folded, or
		// deliveries lost in a consumer leader change: fill such gaps from
		// the log before folding.
		recs, err := p.fillGaps(ctx, next, b.Records)

		if err != nil {
			return err
		}
		if err := p.fold(ctx, recs); err != nil {
			return err
		}
		if err := feed.Ack(ctx, b); err != nil {
			return err
		}
		if len(recs) == 0 {
			continue // only redeliveries of folded events
		}
		last := recs[len(recs)-1]
		next = last.Seq + 1
		p.folded.Add(uint64(len(recs)))
		p.caughtUp.Store(b.Pending == 0)
		p.setApplied(last.Seq)
		if p.cfg.OnBatch != nil {
			p.cfg.OnBatch(len(recs), time.Since(last.Time), b.Pending)
		}
	}
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
			err := p.log.ScanRange(ctx, next, r.Seq-1, func(g jetstream.Record) error {
				out = append(out, g)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		out = append(out, r)
		next = r.Seq + 1
	}
	return out, nil
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

// fold applies records to the cached views and writes the touched ones.
func (p *Projection) fold(ctx context.Context, recs []jetstream.Record) error {
	touched := make([]string, 0, len(recs))
	seen := make(map[string]bool, len(recs))
	for _, rec := range recs {
		st, err := p.state(ctx, rec.Session)
		if err != nil {
			return err
		}
		if rec.Seq <= st.LastSeq {
			continue // redelivered: already in the view
		}
		if rec.Err != nil {
			st.Skip(rec.Seq)
			p.skipped.Add(1)
			p.cfg.Logger.Warn().Uint64("seq", rec.Seq).Str("session", rec.Session).
				Str("id", rec.Envelope.ID).Err(rec.Err).Msg("event skipped: cannot be folded")
			if p.cfg.OnSkip != nil {
				p.cfg.OnSkip(rec)
			}
		} else {
			st.Apply(rec.Seq, rec.Envelope)
		}
		if !seen[rec.Session] {
			seen[rec.Session] = true
			touched = append(touched, rec.Session)
		}
	}
	puts := make([]jetstream.Put, 0, len(touched))
	for _, s := range touched {
		data, err := aggregate.MarshalState(*p.cache[s])
		if err != nil {
			return fmt.Errorf("encode view of %q: %w", s, err)
		}
		puts = append(puts, jetstream.Put{Key: s, Value: data})
	}
	if err := p.views.PutAll(ctx, puts); err != nil {
		return err
	}
	p.evict()
	return nil
}

// state returns the cached state of a session, loading it from its view on
// a miss.
func (p *Projection) state(ctx context.Context, session string) (*aggregate.State, error) {
	if st, ok := p.cache[session]; ok {
		return st, nil
	}
	st := &aggregate.State{Session: session}
	if session != "" && !p.trustCache {
		data, err := p.views.Get(ctx, session)
		if err != nil {
			return nil, err
		}
		if data != nil {
			s, err := aggregate.UnmarshalState(data)
			if err != nil {
				// A view this build cannot read is rebuilt from the log.
				p.cfg.Logger.Warn().Str("session", session).Err(err).Msg("view unreadable: rebuilding from the log")
				s, err = p.foldLog(ctx, session, aggregate.State{Session: session}, 0)
				if err != nil {
					return nil, err
				}
			}
			st = &s
		}
	}
	p.cache[session] = st
	return st, nil
}

func (p *Projection) evict() {
	if len(p.cache) <= p.cfg.CacheSize {
		return
	}
	// Drop about a tenth; map order is random, which is all eviction
	// needs (no output depends on it).
	n := len(p.cache) - p.cfg.CacheSize + p.cfg.CacheSize/10
	for k := range p.cache {
		if n == 0 {
			break
		}
		delete(p.cache, k)
		n--
	}
	p.trustCache = false
}

// foldLog folds the session's events after st.LastSeq, up to upTo (0: the
// end), into st.
func (p *Projection) foldLog(ctx context.Context, session string, st aggregate.State, upTo uint64) (aggregate.State, error) {
	err := p.log.ScanSession(ctx, session, st.LastSeq+1, upTo, func(r jetstream.Record) error {
		if r.Err != nil {
			st.Skip(r.Seq)
			return nil
		}
		st.Apply(r.Seq, r.Envelope)
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

// Read returns a session's view: one KV get, plus a tail fold from the log
// only when opts ask for something fresher than the view. A session with no
// events reads as the zero state (intent: follow the profile), not an
// error.
func (p *Projection) Read(ctx context.Context, session string, opts ReadOptions) (aggregate.State, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.State{}, fmt.Errorf("read session %q: %w", session, err)
	}
	data, err := p.views.Get(ctx, session)
	if err != nil {
		return aggregate.State{}, err
	}
	st := aggregate.State{Session: session}
	if data != nil {
		if st, err = aggregate.UnmarshalState(data); err != nil {
			st = aggregate.State{Session: session}
			opts.Latest = true
		}
	}
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
