package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// Live subscriptions: a session's or every session's events as they
// are appended.
//
// Deleted sessions: a watch of one session ends after delivering its
// SessionDeleted (Next returns ErrWatchEnded), since nothing can follow
// it. A watch that starts at or after a session's SessionDeleted is
// ErrDeleted, like every read of a deleted session; one that starts
// before it replays up to the SessionDeleted and then ends. An erased
// session's purged events are absent from every watch (only its
// SessionDeleted audit record remains). The all-sessions watch never ends
// for a deletion: it delivers the SessionDeleted and goes on.

// ErrWatchStopped is what Watch.Next returns after Stop or the end of
// Watch's context.
var ErrWatchStopped = jetstream.ErrWatchStopped

// WatchedEvent is one event a Watch delivers: the stored record, with Err
// set when the engine cannot decode it.
type WatchedEvent = logport.Record

// ErrWatchEnded is what Watch.Next returns after a watched session's
// SessionDeleted: the session takes no more events.
var ErrWatchEnded = errors.New("watched session was deleted: no more events")

// LiveLog is the optional port of a Log that can be followed live
// (*jetstream.Log implements it); an engine over a Log without it answers
// Watch with an error matching errors.ErrUnsupported.
type LiveLog interface {
	Watch(ctx context.Context, session string, afterSeq uint64) (*jetstream.Watcher, error)
}

var _ LiveLog = (*jetstream.Log)(nil)

// Watch follows a session's events, or every session's.
type Watch struct {
	w       *jetstream.Watcher
	session string
	ended   bool
}

// Watch follows session's events ("": every session's) from stream
// sequence afterSeq+1 on, stored ones first, then live, in stream order
// (see the package comment above for deleted sessions). A bad session id
// is ErrInvalid. The caller must Stop the watch.
func (e *Engine) Watch(ctx context.Context, session string, afterSeq uint64) (*Watch, error) {
	ll, ok := e.log.(LiveLog)
	if !ok {
		return nil, fmt.Errorf("watch: this engine's log cannot be followed live: %w", errors.ErrUnsupported)
	}
	if session != "" {
		if err := events.ValidateSessionID(session); err != nil {
			return nil, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
		}
		// At least what this engine acknowledged (a deletion it just
		// wrote), as every read (Session).
		st, err := e.proj.Read(ctx, session, projection.ReadOptions{MinSeq: e.floor(session, 0)})
		if err != nil {
			return nil, fmt.Errorf("watch session %q: %w", session, err)
		}
		if st.Deleted() && afterSeq >= st.DeletedSeq {
			return nil, fmt.Errorf("watch session %q: deleted at sequence %d, nothing follows: %w", session, st.DeletedSeq, ErrDeleted)
		}
		st.Session = session
		if err := e.erasedID(ctx, session, st); err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
	}
	w, err := ll.Watch(ctx, session, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	return &Watch{w: w, session: session}, nil
}

// Next returns the next event, waiting for one. It returns ctx's error
// when ctx ends first (the watch stays usable), ErrWatchEnded after a
// watched session's SessionDeleted, ErrWatchStopped after Stop,
// or the read error that ended the watch.
func (w *Watch) Next(ctx context.Context) (WatchedEvent, error) {
	if w.ended {
		return WatchedEvent{}, ErrWatchEnded
	}
	r, err := w.w.Next(ctx)
	if err != nil {
		return r, err
	}
	if w.session != "" && r.Err == nil && r.Envelope.Type == events.TypeSessionDeleted {
		w.ended = true
	}
	return r, nil
}

// Stop ends the watch and releases its resources.
func (w *Watch) Stop() { w.w.Stop() }
