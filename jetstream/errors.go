package jetstream

import (
	"errors"
	"fmt"
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

// ErrInvalidSession is returned for a session id that cannot be a single
// subject token.
var ErrInvalidSession = errors.New("invalid session id")

// ConflictError reports which sequence an append expected and which one the
// session has. Actual is 0 when the server did not say and a look-up failed.
type ConflictError struct {
	Session  string
	Expected uint64
	Actual   uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict on session %q: expected last sequence %d, session is at %d: read the session again and retry", e.Session, e.Expected, e.Actual)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }
