package service

// Erasing a session: a resumable operation whose steps the audit stream
// records (jetstream.Eraser): the intent (begun), the SessionDeleted that
// closes the session (it stays in the log as the id's tombstone, so that
// every reader of the log folds the id as deleted, a rebuild included),
// the range and the purge of every event before it, and the end (done).
// An erase a crash interrupted is finished by FinishErases, which serve
// runs at start and every minute on the engine that runs the projection.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// ErrEraseUnavailable: this engine has no eraser (Engine.SetEraser), so it
// cannot purge a session's events.
var ErrEraseUnavailable = errors.New("erase unavailable")

// Eraser purges a session's events through a privileged path (never a
// channel's connection) and records each step of an erase in the audit
// stream, which no channel may write. *jetstream.Eraser implements it.
type Eraser interface {
	// Begin records the intent to erase session; expected, when not 0,
	// is the sequence the session must still be at for its delete.
	Begin(ctx context.Context, session string, expected uint64) error
	// Cancel records that a conditional erase does not go on.
	Cancel(ctx context.Context, session string) error
	// Erase purges the session's events before deleted (the sequence of
	// its SessionDeleted, which stays) and records the range and the end.
	Erase(ctx context.Context, session string, deleted uint64) (jetstream.EraseReport, error)
	// Erased reports whether an audit record says session was erased.
	Erased(ctx context.Context, session string) (bool, error)
	// Unfinished reads the erase records after a sequence of the audit
	// stream: the last of each session, and where it read up to.
	Unfinished(ctx context.Context, after uint64) (map[string]jetstream.AuditRecord, uint64, error)
}

var _ Eraser = (*jetstream.Eraser)(nil)

// EraseOrigin is the origin of the SessionDeleted an erase finished by the
// engine appends: the channel "engine" and the actor "engine:erase".
var EraseOrigin = Origin{Channel: "engine", Actor: "engine:erase"}

// EraseResult is the outcome of Erase.
type EraseResult struct {
	// DeleteSeq is the sequence of the SessionDeleted the erase appended,
	// 0 when the session was deleted before.
	DeleteSeq uint64
	jetstream.EraseReport
	// Keys counts the idempotency keys forgotten.
	Keys int
}

// SetEraser gives the engine its privileged eraser; without one, Erase
// answers ErrEraseUnavailable and an erased id is known only by its view.
func (e *Engine) SetEraser(x Eraser) {
	e.eraser.Store(&x)
}

func (e *Engine) getEraser() Eraser {
	if p := e.eraser.Load(); p != nil {
		return *p
	}
	return nil
}

// Erase deletes session (when not deleted yet), forgets its idempotency
// keys and purges its events before the delete through the eraser,
// recording each step in the audit stream. A session erased before
// answers again with Purged 0; one with no events and no audit record is
// ErrNotFound. Which channel may erase is the transport's rule (api: the
// erase channel).
func (e *Engine) Erase(ctx context.Context, session string, origin Origin, reason string) (EraseResult, error) {
	x, err := e.eraserFor(session)
	if err != nil {
		return EraseResult{}, err
	}
	st, err := e.lifecycleRead(ctx, session)
	if err != nil {
		return EraseResult{}, err
	}
	erased, err := x.Erased(ctx, session)
	if err != nil {
		return EraseResult{}, err
	}
	if st.LastSeq == 0 && !erased {
		return EraseResult{}, fmt.Errorf("erase session %q: it has no events: %w", session, ErrNotFound)
	}
	// An erase that reached its purge needs no new intent: erasing again
	// finishes it, and its id stays refused meanwhile.
	if !erased {
		if err := e.beginErase(ctx, x, session, 0); err != nil {
			return EraseResult{}, err
		}
	}
	return e.finishErase(ctx, x, session, origin, reason, 0)
}

// beginErase records the erase's intent and that this process began it.
func (e *Engine) beginErase(ctx context.Context, x Eraser, session string, expected uint64) error {
	if err := x.Begin(ctx, session, expected); err != nil {
		return err
	}
	e.erases.live.Lock()
	e.erases.mine[session] = true
	e.erases.live.Unlock()
	return nil
}

func (e *Engine) eraserFor(session string) (Eraser, error) {
	x := e.getEraser()
	if x == nil {
		return nil, fmt.Errorf("erase %q: this engine has no eraser (it needs a connection allowed to purge the event stream): %w", session, ErrEraseUnavailable)
	}
	if err := events.ValidateSessionID(session); err != nil {
		return nil, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	return x, nil
}

// finishErase carries a begun erase to its end (eraseBatch of one).
func (e *Engine) finishErase(ctx context.Context, x Eraser, session string, origin Origin, reason string, expected uint64) (EraseResult, error) {
	out := e.eraseBatch(ctx, x, []eraseItem{{session: session, origin: origin, reason: reason, expected: expected}})
	return out[0].res, out[0].err
}

// eraseItem is one erase of an eraseBatch, and its outcome.
type eraseItem struct {
	session, reason string
	origin          Origin
	expected        uint64
	res             EraseResult
	err             error
	deleted, folded uint64
	marked          bool // this call marked it running
}

// eraseBatch carries begun erases to their end: for each, it appends the
// SessionDeleted when the session is not deleted (on the condition that it
// is at expected, when not 0: otherwise the erase is cancelled, an
// ErrConflict); then it waits once for the views to fold every delete;
// then, for each, it forgets the session's idempotency keys and has the
// eraser purge what precedes the delete. Each step is idempotent, so it
// finishes an erase stopped at any point. An erase of a session this
// process is erasing already is an ErrConflict.
func (e *Engine) eraseBatch(ctx context.Context, x Eraser, items []eraseItem) []eraseItem {
	s := e.erases
	s.live.Lock()
	for i := range items {
		it := &items[i]
		if s.running[it.session] {
			it.err = fmt.Errorf("erase %q: an erase of it is in progress on this engine: %w", it.session, ErrConflict)
			continue
		}
		s.running[it.session], it.marked = true, true
	}
	s.live.Unlock()
	defer func() {
		s.live.Lock()
		for _, it := range items {
			if !it.marked {
				continue
			}
			delete(s.running, it.session)
			if it.err == nil || (errors.Is(it.err, ErrConflict) && it.expected != 0) {
				delete(s.mine, it.session) // ended: done or cancelled
			}
		}
		s.live.Unlock()
	}()
	for i := range items {
		it := &items[i]
		if it.err == nil {
			it.err = e.closeForErase(ctx, x, it)
		}
	}
	if err := e.waitFolded(ctx, items); err != nil {
		for i := range items {
			if items[i].err == nil {
				items[i].err = fmt.Errorf("erase %q: %w", items[i].session, err)
			}
		}
		return items
	}
	for i := range items {
		it := &items[i]
		if it.err != nil {
			continue
		}
		if it.res.Keys, it.err = e.forgetKeys(ctx, it.session); it.err != nil {
			it.err = fmt.Errorf("erase %q: forget idempotency keys: %w", it.session, it.err)
			continue
		}
		it.res.EraseReport, it.err = x.Erase(ctx, it.session, it.deleted)
		if it.err == nil {
			e.forgetAnchors(ctx, it.session) // a history anchor holds the session's state
			e.dropSession(it.session)
			e.marks.forget(it.session) // its sequences are purged: reads ask for none of them
		}
	}
	return items
}

// closeForErase appends the SessionDeleted of it when the session is not
// deleted (cancelling a conditional erase whose session moved), and sets
// it.deleted and the sequence the views must fold before the purge.
func (e *Engine) closeForErase(ctx context.Context, x Eraser, it *eraseItem) error {
	st, err := e.lifecycleRead(ctx, it.session)
	if err != nil && !errors.Is(err, ErrDeleted) {
		return err
	}
	it.deleted = st.DeletedSeq
	if st.Deleted() {
		// An engine that purged the SessionDeleted too left the id no
		// tombstone in the log: a rebuild would fold an event appended
		// since as a new session. It gets one now.
		kept, err := e.log.ReadSessionThrough(ctx, it.session, st.DeletedSeq, st.DeletedSeq)
		if err != nil {
			return fmt.Errorf("erase %q: read its SessionDeleted: %w", it.session, err)
		}
		if len(kept) == 0 {
			if it.deleted, err = e.appendTombstone(ctx, it.session, it.origin, it.reason); err != nil {
				return err
			}
			it.res.DeleteSeq = it.deleted
		}
	} else {
		if it.expected != 0 && st.LastSeq != it.expected {
			if err := x.Cancel(ctx, it.session); err != nil {
				return err
			}
			return fmt.Errorf("erase %q: the session moved from %d to %d since it was examined; it is kept: %w", it.session, it.expected, st.LastSeq,
				&logport.ConflictError{Session: it.session, Expected: it.expected, Actual: st.LastSeq})
		}
		if it.deleted, err = e.tombstone(ctx, it.session, it.origin, it.reason, st, it.expected); err != nil {
			return err
		}
		it.res.DeleteSeq = it.deleted
	}
	e.dropSession(it.session)
	it.folded = max(it.deleted, st.LastSeq)
	return nil
}

// tombstone appends the SessionDeleted that closes session for an erase
// and returns its sequence. A session with events is deleted as Delete
// does (conditionally on expected, when not 0). An erased id whose
// subject holds nothing (erased before the SessionDeleted was kept as a
// tombstone) gets one, so that a rebuild cannot fold the id as new.
func (e *Engine) tombstone(ctx context.Context, session string, origin Origin, reason string, st aggregate.State, expected uint64) (uint64, error) {
	if st.LastSeq > 0 {
		var exp *uint64
		if expected != 0 {
			exp = &expected
		}
		r, err := e.Apply(ctx, session, origin, exp, events.SessionDeleted{Reason: reason})
		if errors.Is(err, ErrDeleted) {
			st, err = e.lifecycleRead(ctx, session)
			if !st.Deleted() && err == nil {
				err = fmt.Errorf("erase %q: deleted, yet its view is not: %w", session, ErrConflict)
			}
			return st.DeletedSeq, ignoreDeleted(err)
		}
		if err != nil {
			return 0, err
		}
		if r.Last == 0 {
			return 0, fmt.Errorf("erase %q: its delete stored nothing: %w", session, ErrConflict)
		}
		return r.Last, nil
	}
	return e.appendTombstone(ctx, session, origin, reason)
}

// appendTombstone appends a SessionDeleted to session's subject after
// whatever it holds as the stream's leader says, whatever the session's
// state (an erased id whose SessionDeleted was purged), and returns its
// sequence.
func (e *Engine) appendTombstone(ctx context.Context, session string, origin Origin, reason string) (uint64, error) {
	last, err := e.raiseToLeader(ctx, session)
	if err != nil {
		return 0, fmt.Errorf("erase %q: %w", session, err)
	}
	envs, _, err := e.decide(aggregate.State{Session: session}, origin, []events.Payload{events.SessionDeleted{Reason: reason}})
	if err != nil {
		return 0, err
	}
	ar, err := e.appendResend(ctx, session, last, envs)
	if err != nil {
		return 0, fmt.Errorf("erase %q: append its tombstone: %w", session, err)
	}
	e.forget(session)
	return ar.Last, nil
}

func ignoreDeleted(err error) error {
	if errors.Is(err, ErrDeleted) {
		return nil
	}
	return err
}

// foldWait bounds how long an erase waits for the views to fold its
// session's SessionDeleted.
const foldWait = 10 * time.Second

// waitFolded waits until the views have folded the delete of every
// item still going: the watermark of the projection runner of each
// session's stream (whichever engine runs it) has passed it, so the
// session's view is the deleted state before its events are purged, on
// every engine. It fails (KindUnavailable: erase again) when that takes
// longer than foldWait in all, for example when no engine runs the
// projection.
func (e *Engine) waitFolded(ctx context.Context, items []eraseItem) error {
	p, ok := e.proj.(interface {
		FoldedFor(ctx context.Context, session string) (uint64, error)
	})
	if !ok {
		return nil
	}
	deadline := time.Now().Add(foldWait)
	for i := range items {
		it := &items[i]
		if it.err != nil || it.folded == 0 {
			continue
		}
		for {
			folded, err := p.FoldedFor(ctx, it.session)
			if (err == nil && folded >= it.folded) || errors.Is(err, errors.ErrUnsupported) {
				break // folded, or views that cannot tell: no wait
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the views have folded up to %d, not yet the delete of %q at %d, after %s (is a projection running?); nothing was purged, erase again: %w", folded, it.session, it.folded, foldWait, projection.ErrNotCaughtUp)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for the views to fold the delete of %q at %d: %w: %w", it.session, it.folded, projection.ErrNotCaughtUp, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// forgetKeys drops the idempotency keys of session, when the engine has a
// key store that can (jetstream.Keys).
func (e *Engine) forgetKeys(ctx context.Context, session string) (int, error) {
	if e.keys == nil {
		return 0, nil
	}
	if h, ok := e.log.(interface {
		HasKeys(ctx context.Context) (bool, error)
	}); ok {
		// No bucket, no keys: an erase does not create it.
		if has, err := h.HasKeys(ctx); err != nil || !has {
			return 0, err
		}
	}
	k, err := e.keys(ctx)
	if err != nil {
		return 0, err
	}
	f, ok := k.(interface {
		ForgetSession(ctx context.Context, session string) (int, error)
	})
	if !ok {
		return 0, nil
	}
	return f.ForgetSession(ctx, session)
}

// erasedID reports whether st, a session read with no events, is an
// erased id: its first write is refused and its reads answer ErrDeleted,
// never the defaults of a new session.
func (e *Engine) erasedID(ctx context.Context, session string, st aggregate.State) error {
	if st.LastSeq != 0 || st.Deleted() {
		return nil
	}
	x := e.getEraser()
	if x == nil {
		return nil
	}
	return refuseErased(ctx, x, session, "; an erased id starts no new session")
}

// erasedHistory is ErrDeleted for an erased session: its events are
// purged, and its history answers as its other reads do (a deleted one's
// history stays readable).
func (e *Engine) erasedHistory(ctx context.Context, session string) error {
	x := e.getEraser()
	if x == nil {
		return nil
	}
	st, err := e.proj.Read(ctx, session, projection.ReadOptions{MinSeq: e.floor(session, 0)})
	if err != nil || st.LastSeq != 0 && !st.Deleted() {
		return nil
	}
	return refuseErased(ctx, x, session, ": its events are purged and it has no history")
}

// refuseErased asks x whether session was erased: ErrDeleted, its message
// ending in why, when it was.
func refuseErased(ctx context.Context, x Eraser, session, why string) error {
	erased, err := x.Erased(ctx, session)
	if err != nil {
		return err
	}
	if erased {
		return fmt.Errorf("session %q was erased%s: %w", session, why, ErrDeleted)
	}
	return nil
}

// DefaultEraseTakeover is Config.EraseTakeover's default.
const DefaultEraseTakeover = 30 * time.Second

// eraseBatchSize bounds the erases eraseBatch carries at once: their
// deletes are appended, then folded with one wait, then purged.
const eraseBatchSize = 256

// eraseScan is what FinishErases knows of the audit stream (where it read
// up to, and the erases whose last record it read is not their end) and
// of this process's erases.
type eraseScan struct {
	mu    sync.Mutex
	after uint64
	open  map[string]jetstream.AuditRecord

	live    sync.Mutex
	mine    map[string]bool // begun by this process, not ended
	running map[string]bool // being carried on by this process now
}

func newEraseScan() *eraseScan {
	return &eraseScan{open: map[string]jetstream.AuditRecord{}, mine: map[string]bool{}, running: map[string]bool{}}
}

// FinishReport is what one FinishErases call did.
type FinishReport struct {
	// Open counts the unfinished erases known after the call.
	Open int
	// Finished counts the erases it carried to their end, Cancelled
	// those whose condition no longer held (the session was written).
	Finished, Cancelled int
	// Errors counts the erases it could not finish (tried again next
	// call).
	Errors int
}

// FinishErases finishes every erase a crash interrupted, on this engine
// or another: the audit stream's records after the last call are read
// (all of them on the first call), and each erase whose last record is
// neither its end nor its cancellation is finished as it began:
// conditionally on the sequence its begun record names, if any. One that
// another process began is taken over once its last record is older than
// Config.EraseTakeover (an erase in flight there writes its next record
// well within it). Calls are serialized; the error is the audit
// stream's.
func (e *Engine) FinishErases(ctx context.Context) (FinishReport, error) {
	var rep FinishReport
	x := e.getEraser()
	if x == nil {
		return rep, nil
	}
	s := e.erases
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, after, err := x.Unfinished(ctx, s.after)
	if err != nil {
		return rep, err
	}
	for session, rec := range recs {
		if rec.Phase == jetstream.PhaseDone || rec.Phase == jetstream.PhaseCancelled {
			delete(s.open, session)
			continue
		}
		s.open[session] = rec
	}
	s.after = after
	now := e.clock()
	var items []eraseItem
	s.live.Lock()
	for session, rec := range s.open {
		if s.running[session] || !s.mine[session] && now.Sub(rec.Time) < e.cfg.EraseTakeover {
			continue
		}
		items = append(items, eraseItem{session: session, origin: EraseOrigin, expected: rec.ExpectedSeq})
	}
	s.live.Unlock()
	slices.SortFunc(items, func(a, b eraseItem) int { return strings.Compare(a.session, b.session) })
	for len(items) > 0 && ctx.Err() == nil {
		batch := items[:min(len(items), eraseBatchSize)]
		items = items[len(batch):]
		for _, it := range e.eraseBatch(ctx, x, batch) {
			switch {
			case it.err == nil:
				rep.Finished++
				delete(s.open, it.session)
			case errors.Is(it.err, ErrConflict) && it.expected != 0:
				rep.Cancelled++
				delete(s.open, it.session)
			default:
				rep.Errors++
				e.cfg.Logger.Warn().Err(it.err).Str("session", it.session).Msg("erase interrupted earlier: not finished yet; tried again")
			}
		}
	}
	rep.Open = len(s.open)
	return rep, nil
}
