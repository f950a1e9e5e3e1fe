package events

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrMalformed means the bytes are not a valid event envelope. Every
	// *DecodeError matches it except ErrUnknownType and ErrFutureVersion.
	ErrMalformed = errors.New("malformed event")
	// ErrUnknownType means the event's type is not one this version of
	// the engine knows; the event is kept in the log and skipped.
	ErrUnknownType = errors.New("unknown event type")
	// ErrFutureVersion means the event was written with a schema version
	// newer than SchemaVersion; upgrade the engine to read it.
	ErrFutureVersion = errors.New("event schema version newer than this engine")
	// ErrTooLarge means an encoded event exceeds MaxEventBytes. A decode
	// error that matches it also matches ErrMalformed.
	ErrTooLarge = errors.New("event too large")
	// ErrInvalidSession means a session id does not match
	// ^[A-Za-z0-9_-]{1,128}$.
	ErrInvalidSession = errors.New("invalid session id")
	// ErrInvalidName means a tool or preset name does not match
	// ^[A-Za-z][A-Za-z0-9_-]{0,63}$.
	ErrInvalidName = errors.New("invalid tool name")
	// ErrInvalidEvent means an envelope or payload breaks a rule other than
	// the ones above (bad id, mismatched type, list too long, ...).
	ErrInvalidEvent = errors.New("invalid event")
)

// DecodeError is returned by Decode. It carries whatever header fields could
// be read before the problem was found, so that a caller can report the
// event (id, session, type) and skip it. Err matches one of
// ErrMalformed, ErrUnknownType or ErrFutureVersion, and possibly a more
// specific sentinel (ErrTooLarge, ErrInvalidSession, ErrInvalidName,
// ErrInvalidEvent).
type DecodeError struct {
	// ID is the event id as read, possibly "" or invalid.
	ID string
	// Session is the session id as read, possibly "" or invalid.
	Session string
	// Type is the event type as read, possibly "" or unknown.
	Type Type
	// Version is the schema version as read, 0 when unreadable.
	Version int
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode event id=%q session=%q type=%q v=%d: %v", e.ID, e.Session, e.Type, e.Version, e.Err)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }
