package service

// Retention of idle sessions: a policy that deletes (or erases, or
// compacts) the sessions whose last event is older than a limit, a
// bounded number of sessions per tick.
//
// Where the idle time comes from: the envelope time (time_ms, the writer's
// clock, the documented wire field every event carries) of the session's
// last event, read from the log at the sequence the session's view ends
// at (one direct get). aggregate.State keeps no time, and the view's
// sequence already names the last event, so no new state field is needed;
// an event the engine could not decode falls back to the time the log
// stored it, and a SessionCompacted counts as written when the last event
// it replaced was (so a compaction does not make a session fresh). A session written after its view was read is not deleted:
// the SessionDeleted is appended on the condition that the session is
// still at the examined sequence (the CAS path), so the newer write wins
// and the tick counts a conflict. Two engines running retention at once
// are therefore harmless: the second append of a delete is a conflict.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/tick"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// RetentionAction is what retention does to an idle session.
type RetentionAction string

// The retention actions.
const (
	// RetainDelete appends a SessionDeleted: the events stay in the log.
	RetainDelete RetentionAction = "delete"
	// RetainErase deletes and then purges the session's events through
	// the engine's eraser, leaving the audit record (see Erase).
	RetainErase RetentionAction = "erase"
	// RetainCompact replaces the session's events by one SessionCompacted
	// and purges them through the engine's eraser (see Compact): the
	// session stays, its state unchanged; a session already compact (its
	// last event is its snapshot) is kept as is.
	RetainCompact RetentionAction = "compact"
)

// Defaults of a zero RetentionConfig.
const (
	DefaultRetentionBatch = 1000
	DefaultRetentionTick  = time.Minute
)

// RetentionOrigin is the origin of the events retention writes: the
// channel "engine" and the actor "engine:retention" (no channel's user).
var RetentionOrigin = Origin{Channel: "engine", Actor: "engine:retention"}

// RetentionConfig configures a Retention. Idle is required; the other
// zero fields take the defaults.
type RetentionConfig struct {
	// Idle is the limit: a session whose last event is older is deleted.
	Idle time.Duration
	// Action is RetainDelete (default), RetainErase or RetainCompact.
	Action RetentionAction
	// Batch bounds the sessions one tick examines (default 1000).
	Batch int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Observe, when set, receives each tick's counts.
	Observe func(RetentionTick)
}

// Validate reports every problem of c at once, naming the serve flag.
func (c RetentionConfig) Validate() error {
	var errs []error
	if c.Idle <= 0 {
		errs = append(errs, fmt.Errorf("--retain-idle %v: want a positive duration such as 90d, 36h or 30m: %w", c.Idle, ErrInvalid))
	}
	switch c.Action {
	case "", RetainDelete, RetainErase, RetainCompact:
	default:
		errs = append(errs, fmt.Errorf("--retain-action %q: want delete, erase or compact: %w", c.Action, ErrInvalid))
	}
	if c.Batch < 0 {
		errs = append(errs, fmt.Errorf("--retain-batch %d: want 1 or more (0: the default %d): %w", c.Batch, DefaultRetentionBatch, ErrInvalid))
	}
	return errors.Join(errs...)
}

// RetentionTick is what one tick did.
type RetentionTick struct {
	// Started is when the tick began; Took how long it ran.
	Started time.Time
	Took    time.Duration
	// Examined counts the sessions looked at (at most the batch).
	Examined int
	// Deleted counts the idle sessions deleted (action delete), Erased
	// those erased (action erase), with the erases interrupted earlier
	// that the tick finished first. An erase that fails is counted in
	// Errors and finished by a later tick.
	Deleted, Erased int
	// Compacted counts the idle sessions compacted (action compact).
	Compacted int
	// Conflicts counts idle sessions written (or deleted by another
	// engine) between the examination and the delete (or compaction, or
	// in an open turn, which a compaction waits for): they are kept.
	Conflicts int
	// Errors counts sessions whose examination or delete failed; they are
	// examined again in the next pass.
	Errors int
	// Remaining is how many sessions of the current pass are still to be
	// examined; 0 when this tick ended the pass (the next lists anew).
	Remaining int
}

// Retention applies a RetentionConfig to an engine's sessions. Tick may
// be called from one goroutine at a time (calls are serialized).
type Retention struct {
	e   *Engine
	cfg RetentionConfig

	mu      sync.Mutex
	pending []string // the current pass's sessions not yet examined, sorted
}

// NewRetention returns the retention policy cfg over e's sessions. The
// erase action needs the engine's eraser (SetEraser before): without one
// it is ErrEraseUnavailable.
func (e *Engine) NewRetention(cfg RetentionConfig) (*Retention, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Action == "" {
		cfg.Action = RetainDelete
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultRetentionBatch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Action == RetainErase && e.getEraser() == nil {
		return nil, fmt.Errorf("--retain-action erase: this engine cannot erase (it needs the privileged connection that purges the event stream: the embedded server's admin or --nats-erase-user); use --retain-action delete: %w", ErrEraseUnavailable)
	}
	if _, ok := e.getEraser().(Compactor); cfg.Action == RetainCompact && !ok {
		return nil, fmt.Errorf("--retain-action compact: this engine cannot compact (it purges the replaced events through the privileged connection that purges the event stream: the embedded server's admin or --nats-erase-user); use --retain-action delete: %w", ErrEraseUnavailable)
	}
	return &Retention{e: e, cfg: cfg}, nil
}

// CanErase reports whether the engine has an eraser (SetEraser).
func (e *Engine) CanErase() bool { return e.getEraser() != nil }

// Config is the retention's configuration with its defaults filled in.
func (r *Retention) Config() RetentionConfig { return r.cfg }

// Tick examines at most Batch sessions, resuming where the previous tick
// stopped: a pass walks the sessions listed when it began, in order, and
// the tick after the pass's last lists them again. Each idle session is
// deleted (and erased) as RetentionOrigin, with the reason "retention:
// idle since <RFC 3339 time>". The error is the listing's; a session that
// fails is counted in Errors and examined again in the next pass.
func (r *Retention) Tick(ctx context.Context) (RetentionTick, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := RetentionTick{Started: r.cfg.Now()}
	wall := time.Now()
	defer func() {
		t.Took = time.Since(wall)
		if r.cfg.Observe != nil {
			r.cfg.Observe(t)
		}
	}()
	if len(r.pending) == 0 {
		all, err := r.e.proj.Sessions(ctx)
		if err != nil {
			return t, fmt.Errorf("retention: list sessions: %w", err)
		}
		r.pending = all
	}
	budget := r.cfg.Batch
	if r.cfg.Action == RetainErase {
		// An erase this retention (or anyone) began and a crash
		// interrupted is finished first.
		fr, err := r.e.FinishErases(ctx)
		if err != nil {
			r.e.cfg.Logger.Warn().Err(err).Msg("retention: read the unfinished erases")
		}
		t.Erased += fr.Finished
		t.Conflicts += fr.Cancelled
		t.Errors += fr.Errors
	}
	n := min(budget, len(r.pending))
	batch := r.pending[:n]
	r.pending = r.pending[n:]
	if len(r.pending) == 0 {
		r.pending = nil // free the listing
	}
	t.Remaining = len(r.pending)
	cutoff := t.Started.Add(-r.cfg.Idle)
	var erase []eraseItem // the idle sessions of an erase action, begun
	for _, s := range batch {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		t.Examined++
		err := r.examine(ctx, s, cutoff)
		var idle *idleErase
		if errors.As(err, &idle) {
			erase = append(erase, eraseItem{session: s, origin: RetentionOrigin, reason: idle.reason, expected: idle.seq})
			continue
		}
		r.count(&t, s, err)
	}
	// The erases, begun one by one, are carried on together: their
	// deletes, one wait for the views to fold them, their purges.
	if x := r.e.getEraser(); x != nil {
		for len(erase) > 0 {
			n := min(len(erase), eraseBatchSize)
			for _, it := range r.e.eraseBatch(ctx, x, erase[:n]) {
				err := it.err
				if err == nil {
					err = errDeletedNow
				} else if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrDeleted) {
					err = fmt.Errorf("%w: %w", errNotErased, err)
				}
				r.count(&t, it.session, err)
			}
			erase = erase[n:]
		}
	}
	return t, nil
}

// count adds the outcome err of session's examination to t.
func (r *Retention) count(t *RetentionTick, s string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, errKept):
	case errors.Is(err, errCompactedNow):
		t.Compacted++
	case errors.Is(err, errDeletedNow):
		if r.cfg.Action == RetainErase {
			t.Erased++
		} else {
			t.Deleted++
		}
	case errors.Is(err, errNotErased):
		t.Errors++
		r.e.cfg.Logger.Warn().Err(err).Str("session", s).Msg("retention: the erase of an idle session began and did not finish; a later tick finishes it")
	case errors.Is(err, ErrConflict), errors.Is(err, ErrDeleted):
		t.Conflicts++
	default:
		t.Errors++
		r.e.cfg.Logger.Warn().Err(err).Str("session", s).Msg("retention: session not examined")
	}
}

// idleErase is examine's outcome for an idle session under the erase
// action: its erase is begun (the intent recorded), to be carried on with
// the tick's others.
type idleErase struct {
	seq    uint64
	reason string
}

func (i *idleErase) Error() string { return fmt.Sprintf("idle, erase begun at sequence %d", i.seq) }

// Outcomes of examine besides errors.
var (
	errKept       = errors.New("kept")
	errDeletedNow = errors.New("deleted")
	errNotErased  = errors.New("erase begun, not finished")
	// errCompactedNow: compacted by this examination (action compact).
	errCompactedNow = errors.New("compacted")
)

// examine deletes session when its last event is before cutoff, on the
// condition that it is still at the sequence examined.
func (r *Retention) examine(ctx context.Context, session string, cutoff time.Time) error {
	st, err := r.e.proj.Read(ctx, session, projection.ReadOptions{MinSeq: r.e.floor(session, 0)})
	if err != nil {
		return fmt.Errorf("read view: %w", err)
	}
	if st.Deleted() || st.LastSeq == 0 {
		return errKept // a delete already closed it (or nothing to keep)
	}
	last, ok, err := r.lastEventTime(ctx, session, st.LastSeq)
	if err != nil {
		return err
	}
	if !ok {
		// The view is behind a compaction that purged its last event
		//: fold what the log holds after it, once.
		if st, err = r.e.proj.Read(ctx, session, projection.ReadOptions{Latest: true}); err != nil {
			return fmt.Errorf("read view: %w", err)
		}
		if st.Deleted() || st.LastSeq == 0 {
			return errKept
		}
		if last, ok, err = r.lastEventTime(ctx, session, st.LastSeq); err != nil {
			return err
		}
	}
	if !ok {
		return fmt.Errorf("the view's last event %d is not in the log: %w", st.LastSeq, ErrConflict)
	}
	if !last.Before(cutoff) {
		return errKept
	}
	reason := "retention: idle since " + last.UTC().Format(time.RFC3339)
	if r.cfg.Action == RetainCompact {
		return r.compact(ctx, session, st.LastSeq, reason)
	}
	expected := st.LastSeq
	if r.cfg.Action == RetainErase {
		// The erase's begun record, before the delete, makes it
		// resumable: a crash at any later step leaves it to FinishErases.
		x, err := r.e.eraserFor(session)
		if err != nil {
			return err
		}
		if err := r.e.beginErase(ctx, x, session, expected); err != nil {
			return fmt.Errorf("%w: %w", errNotErased, err)
		}
		return &idleErase{seq: expected, reason: reason}
	}
	if _, err := r.e.Apply(ctx, session, RetentionOrigin, &expected, events.SessionDeleted{Reason: reason}); err != nil {
		return err
	}
	r.e.dropSession(session)
	r.e.cfg.Logger.Debug().Str("session", session).Str("reason", reason).Str("action", string(r.cfg.Action)).Msg("retention: idle session deleted")
	return errDeletedNow
}

// compact compacts the idle session whose view ends at seq, unless its
// last event is already its snapshot. A write after seq, or one that lands
// during the compaction, makes it a conflict (the session is kept as is,
// with the write).
func (r *Retention) compact(ctx context.Context, session string, seq uint64, reason string) error {
	// A session whose last event is its snapshot is compact already, or
	// its purge was interrupted (a crash between the snapshot and the
	// purge): compact finishes the purge then, and answers Already when
	// nothing was left to purge.
	res, err := r.e.compact(ctx, session, RetentionOrigin, reason, &seq)
	if err != nil {
		return err
	}
	if res.Already {
		return errKept
	}
	r.e.cfg.Logger.Debug().Str("session", session).Str("reason", reason).Uint64("events", res.Count).Msg("retention: idle session compacted")
	return errCompactedNow
}

// lastEventTime is the time of the session's event at seq: its envelope's
// time_ms, or the time the log stored it when the event cannot be decoded
// (or carries no time). ok is false when the log has no event of the
// session at seq (purged, or the view is ahead of a rebuilt log).
func (r *Retention) lastEventTime(ctx context.Context, session string, seq uint64) (time.Time, bool, error) {
	recs, err := r.e.log.ReadSession(ctx, session, seq, seq)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the last event: %w", err)
	}
	if len(recs) == 0 || recs[0].Seq != seq {
		return time.Time{}, false, nil
	}
	return recordTime(recs[0]), true, nil
}

// recordTime is rec's envelope time, or its stored time when the envelope
// has none; for a SessionCompacted, the time of the last event it
// replaced.
func recordTime(rec logport.Record) time.Time {
	if p, ok := rec.Envelope.Payload.(events.SessionCompacted); ok && rec.Err == nil && p.LastMs > 0 {
		return time.UnixMilli(p.LastMs)
	}
	if rec.Err == nil && rec.Envelope.TimeMs > 0 {
		return time.UnixMilli(rec.Envelope.TimeMs)
	}
	return rec.Time
}

// Run ticks every interval (DefaultRetentionTick when 0) until ctx ends,
// while active reports true (nil: always; serve passes "this engine runs
// the projection", so one engine of several runs retention). A tick that
// deleted something logs its counts at info.
func (r *Retention) Run(ctx context.Context, interval time.Duration, active func() bool) {
	if interval <= 0 {
		interval = DefaultRetentionTick
	}
	tick.Every(ctx, interval, func() bool {
		if active != nil && !active() {
			return true
		}
		t, err := r.Tick(ctx)
		log := r.e.cfg.Logger
		if err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("retention tick")
			return true
		}
		ev := log.Debug()
		if t.Deleted+t.Erased+t.Compacted > 0 || t.Errors > 0 {
			ev = log.Info()
		}
		ev.Int("examined", t.Examined).Int("deleted", t.Deleted).Int("erased", t.Erased).Int("compacted", t.Compacted).Int("conflicts", t.Conflicts).
			Int("errors", t.Errors).Int("remaining", t.Remaining).Dur("took", t.Took).Str("idle_limit", r.cfg.Idle.String()).
			Msg("retention tick")
		return true
	})
}
