package service

// Deleting a session: a SessionDeleted closes it for good. Reads
// answer ErrDeleted instead of the defaults (which would silently
// resurrect it), writes are refused, and the id never starts a new
// incarnation. History and explain stay readable: the log keeps the
// events (an erase purges them).

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/projection"
)

// Sentinels of the session lifecycle.
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

// Delete closes session for good: it appends a SessionDeleted
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
