package service

// Deleting a session (#30): a SessionDeleted closes it for good. Reads
// answer ErrDeleted instead of the defaults (which would silently
// resurrect it), writes are refused, and the id never starts a new
// incarnation. History and explain stay readable: the log keeps the
// events (an erase purges them).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// Sentinels of the session lifecycle (#30).
var (
	// ErrDeleted: the session was deleted; it answers no read and takes
	// no write, and its id starts no new session.
	ErrDeleted = aggregate.ErrDeleted
	// ErrNotFound: the operation needs a session with events and this one
	// has none.
	ErrNotFound = errors.New("session not found")
)

// DeleteResult is the outcome of Delete.
type DeleteResult struct {
	// Seq is the stream sequence of the SessionDeleted event.
	Seq uint64
	// EventID is its id.
	EventID string
}

// Delete closes session for good (#30): it appends a SessionDeleted
// (reason optional, never personal data) on the condition that the session
// is still at the sequence it was decided against, re-deciding after a
// conflict, and forgets what this engine caches of the session. A session
// with no events is ErrNotFound; a deleted one ErrDeleted.
func (e *Engine) Delete(ctx context.Context, session string, origin Origin, reason string) (DeleteResult, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return DeleteResult{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	st, err := e.lifecycleRead(ctx, session)
	if err != nil {
		return DeleteResult{}, err
	}
	if err := alive(session, st); err != nil {
		return DeleteResult{}, err
	}
	if st.LastSeq == 0 {
		return DeleteResult{}, fmt.Errorf("delete session %q: it has no events: %w", session, ErrNotFound)
	}
	res, err := e.Apply(ctx, session, origin, nil, events.SessionDeleted{Reason: reason})
	if err != nil {
		return DeleteResult{}, err
	}
	e.dropSession(session)
	out := DeleteResult{Seq: res.Last}
	if len(res.EventIDs) > 0 {
		out.EventID = res.EventIDs[0]
	}
	return out, nil
}

// lifecycleRead reads the session as the log holds it for a delete or an
// erase. A session that reads as having no events is asked of the
// stream's leader before it is refused as not found: a replica behind the
// leader answers "none" for a session written since, and "nothing to
// erase" would leave its events in the log.
func (e *Engine) lifecycleRead(ctx context.Context, session string) (aggregate.State, error) {
	read := func() (aggregate.State, error) {
		return e.proj.Read(ctx, session, projection.ReadOptions{Latest: true, MinSeq: e.floor(session, 0)})
	}
	st, err := read()
	if err != nil || st.LastSeq != 0 {
		return st, err
	}
	if last, err := e.raiseToLeader(ctx, session); err != nil || last == 0 {
		return st, err
	}
	return read()
}

// dropSession forgets what this engine caches of session: its state, its
// open turn and its last dispatch.
func (e *Engine) dropSession(session string) {
	e.forget(session)
	e.ts.turns.Remove(session)
	e.ts.last.Remove(session)
}

// alive returns an error matching ErrDeleted when st is deleted.
func alive(session string, st aggregate.State) error {
	if st.Deleted() {
		return fmt.Errorf("session %q was deleted at sequence %d: %w", session, st.DeletedSeq, ErrDeleted)
	}
	return nil
}

// ErrEraseUnavailable: this engine has no eraser (Engine.SetEraser), so it
// cannot purge a session's events.
var ErrEraseUnavailable = errors.New("erase unavailable")

// Eraser purges a session's events through a privileged path (never a
// channel's connection) and keeps the audit of erased sessions (#30).
// *jetstream.Eraser implements it.
type Eraser interface {
	// Erase purges the session's events and appends an audit record
	// naming the session, the time and the purged range, nothing else.
	Erase(ctx context.Context, session string) (jetstream.EraseReport, error)
	// Erased reports whether an audit record says session was erased.
	Erased(ctx context.Context, session string) (bool, error)
}

// EraseResult is the outcome of Erase.
type EraseResult struct {
	// DeleteSeq is the sequence of the SessionDeleted the erase appended,
	// 0 when the session was deleted before.
	DeleteSeq uint64
	jetstream.EraseReport
	// Keys counts the idempotency keys forgotten.
	Keys int
}

// SetEraser gives the engine its privileged eraser (#30); without one,
// Erase answers ErrEraseUnavailable and an erased id is known only by
// its view.
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
// keys, purges its events through the eraser and writes the audit record
// (#30). A session erased before answers again with Purged 0; one with no
// events and no audit record is ErrNotFound. Which channel may erase is
// the transport's rule (api: the erase channel).
func (e *Engine) Erase(ctx context.Context, session string, origin Origin, reason string) (EraseResult, error) {
	var res EraseResult
	x := e.getEraser()
	if x == nil {
		return res, fmt.Errorf("erase %q: this engine has no eraser (it needs a connection allowed to purge the event stream): %w", session, ErrEraseUnavailable)
	}
	if err := events.ValidateSessionID(session); err != nil {
		return res, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	st, err := e.lifecycleRead(ctx, session)
	if err != nil {
		return res, err
	}
	switch {
	case st.Deleted():
	case st.LastSeq == 0:
		erased, err := x.Erased(ctx, session)
		if err != nil {
			return res, err
		}
		if !erased {
			return res, fmt.Errorf("erase session %q: it has no events: %w", session, ErrNotFound)
		}
	default:
		d, err := e.Delete(ctx, session, origin, reason)
		if err != nil && !errors.Is(err, ErrDeleted) {
			return res, err
		}
		res.DeleteSeq = d.Seq
	}
	e.dropSession(session)
	if err := e.waitFolded(ctx, max(res.DeleteSeq, st.LastSeq)); err != nil {
		return res, fmt.Errorf("erase %q: %w", session, err)
	}
	if res.Keys, err = e.forgetKeys(ctx, session); err != nil {
		return res, fmt.Errorf("erase %q: forget idempotency keys: %w", session, err)
	}
	rep, err := x.Erase(ctx, session)
	res.EraseReport = rep
	if err != nil {
		return res, err
	}
	e.dropSession(session)
	e.marks.forget(session) // its sequences are purged: reads ask for none of them
	return res, nil
}

// foldWait bounds how long an erase waits for the views to fold its
// session's SessionDeleted.
const foldWait = 10 * time.Second

// waitFolded waits until the views have folded seq: the projection
// runner's watermark (whichever engine runs it) has passed it, so the
// session's view is the deleted state before its events are purged, on
// every engine. It fails (KindUnavailable: erase again) when that takes
// longer than foldWait, for example when no engine runs the projection.
func (e *Engine) waitFolded(ctx context.Context, seq uint64) error {
	p, ok := e.proj.(interface {
		FoldedUpTo(ctx context.Context) (uint64, error)
	})
	if !ok || seq == 0 {
		return nil
	}
	deadline := time.Now().Add(foldWait)
	for {
		folded, err := p.FoldedUpTo(ctx)
		if err == nil && folded >= seq {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the views have folded up to %d, not yet the delete at %d, after %s (is a projection running?); nothing was purged, erase again: %w", folded, seq, foldWait, projection.ErrNotCaughtUp)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the views to fold the delete at %d: %w: %w", seq, projection.ErrNotCaughtUp, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// forgetKeys drops the idempotency keys of session, when the engine has a
// key store that can (jetstream.Keys).
func (e *Engine) forgetKeys(ctx context.Context, session string) (int, error) {
	if e.keys == nil {
		return 0, nil
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

// erased reports whether st, a session read with no events, is an erased
// id (#30): its first write is refused and its reads answer ErrDeleted,
// never the defaults of a new session.
func (e *Engine) erasedID(ctx context.Context, session string, st aggregate.State) error {
	if st.LastSeq != 0 || st.Deleted() {
		return nil
	}
	x := e.getEraser()
	if x == nil {
		return nil
	}
	erased, err := x.Erased(ctx, session)
	if err != nil {
		return err
	}
	if erased {
		return fmt.Errorf("session %q was erased; an erased id starts no new session: %w", session, ErrDeleted)
	}
	return nil
}
