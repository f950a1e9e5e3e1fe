package jetstream

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// ErrConflict is the sentinel for an optimistic-concurrency conflict: the
// session's last sequence was not the one the append expected (JetStream
// error codes 10071 and 10164). Match it with errors.Is; the *ConflictError
// carries the sequences.
var ErrConflict = errors.New("conflict")

// ErrBatchUnsupported is returned by a multi-event Append when the server
// or stream cannot publish atomic batches (nats-server before 2.12, or a
// stream without AllowAtomicPublish). Nothing was written.
var ErrBatchUnsupported = errors.New("atomic batch publish unsupported")

// ErrInvalidSession is matched by a session id that cannot be a single
// subject token: the log checks ids with the one rule,
// events.ValidateSessionID, and this is its sentinel. It is
// events.ErrInvalidSession itself, kept so that callers matching it keep
// compiling; new code matches events.ErrInvalidSession.
var ErrInvalidSession = events.ErrInvalidSession

// ConflictError reports which sequence an append expected and which one the
// session has. Actual is 0 when the server did not say and a look-up failed.
type ConflictError struct {
	Session  string
	Expected uint64
	Actual   uint64
	// InFlight: the server refused the expected sequence because a write
	// to the session was in flight (10164), not by naming another one.
	InFlight bool
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict on session %q: expected last sequence %d, session is at %d: read the session again and retry", e.Session, e.Expected, e.Actual)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrOutcomeUnknown is matched (errors.Is) by an append whose request may
// have reached the server but whose acknowledgement never came (a timeout
// or a connection lost after sending): the events may or may not be
// stored. It is not a refusal: read the session to learn which.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// OutcomeUnknownError says an append's outcome is unknown and where to
// look: the session's events after AfterSeq hold the answer (the events'
// ids are their Nats-Msg-Id, so re-sending them stores them at most once).
type OutcomeUnknownError struct {
	Session  string
	AfterSeq uint64
	Err      error // the transport error that left the outcome open
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("outcome unknown: the append to session %q may or may not be stored (%v): read the session at seq %d", e.Session, e.Err, e.AfterSeq)
}

// Unwrap makes errors.Is(err, ErrOutcomeUnknown) and the transport error
// match.
func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

// ErrNotSent is matched by an append that never left the process because
// the NATS connection was down: nothing was stored (no publish is buffered
// across a reconnect). Retry when the connection is back.
var ErrNotSent = errors.New("not sent: the NATS connection is down, nothing was stored")

// ErrStorageFull is matched by an append refused because the store's disk
// has less free space than the engine needs: nothing was written (issue
// 12, item 4).
var ErrStorageFull = errors.New("disk full")

// IsCASConflict reports whether err is JetStream's refusal of an
// expected-last-sequence header: 10071 (the subject or stream has moved
// on) or 10164 (a replicated stream's leader refuses a CAS publish to a
// subject that already has a write in flight). Both mean "read again and
// retry"; a replicated stream or KV bucket answers 10164 where a single
// server answers 10071, so matching one code alone misses conflicts on a
// cluster.
func IsCASConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSeq || apiErr.ErrorCode == codeWrongLastSeqConstant)
}
