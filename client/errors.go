package client

import (
	"github.com/toolintent/engine/wire"
)

// Error is an error reply of the engine (docs/api.md, "Error codes"):
// wire.Error. Status is the HTTP status (over NATS,
// Nats-Service-Error-Code); Code is stable, Message is for people.
// Expected and Actual are the sequences of a conflict; RetryAfter the
// reply's Retry-After. errors.Is matches it against the sentinels below
// by code.
type Error = wire.Error

// Sentinels for errors.Is, one per error code of docs/api.md (the codes
// are wire.Code*; a test reads these literals against docs/api.md).
var (
	// ErrConflict (409): the session moved past the expected sequence.
	ErrConflict = &Error{Code: "conflict"}
	// ErrInvalid (400): the request is wrong; the message names the value.
	ErrInvalid = &Error{Code: "invalid"}
	// ErrNoTurn (409): the operation needs an open turn.
	ErrNoTurn = &Error{Code: "no_turn"}
	// ErrNotFound (404): no such route, or nothing recorded to show.
	ErrNotFound = &Error{Code: "not_found"}
	// ErrMethodNotAllowed (405): the route exists for other methods.
	ErrMethodNotAllowed = &Error{Code: "method_not_allowed"}
	// ErrTooLarge (413): the request body exceeds the engine's bound.
	ErrTooLarge = &Error{Code: "too_large"}
	// ErrUnavailable (503): the engine cannot serve now; retry later.
	ErrUnavailable = &Error{Code: "unavailable"}
	// ErrInternal (500): a bug or an unexpected failure.
	ErrInternal = &Error{Code: "internal"}
	// ErrBusy (429): too many requests in flight; retry later.
	ErrBusy = &Error{Code: "busy"}
	// ErrUnauthorized (401): no valid bearer token.
	ErrUnauthorized = &Error{Code: "unauthorized"}
	// ErrForbidden (403): the caller may not do this.
	ErrForbidden = &Error{Code: "forbidden"}
	// ErrUnsupportedMedia (415): a body neither JSON nor msgpack.
	ErrUnsupportedMedia = &Error{Code: "unsupported_media_type"}
	// ErrKeyInUse (422): the idempotency key (EventID) was already used
	// on another session or by another channel; nothing was written.
	ErrKeyInUse = &Error{Code: "idempotency_key_in_use"}
	// ErrKeyMismatch (422): the idempotency key (EventID) was already used
	// on this session with other commands; nothing was written. Retry
	// with the same commands, or use a new key.
	ErrKeyMismatch = &Error{Code: "idempotency_key_mismatch"}
	// ErrOutcomeUnknown (503): the write was sent but its acknowledgement
	// never came; it may or may not be stored. Read the session before
	// writing again (or retry with the same EventID).
	ErrOutcomeUnknown = &Error{Code: "outcome_unknown"}
	// ErrStorageFull (507): the engine's store is short of free space;
	// nothing was written.
	ErrStorageFull = &Error{Code: "storage_full"}
	// ErrDeleted (410): the session was deleted: it takes no write, its id
	// starts no new session, and every read answers this but, unless it
	// was erased, history (its timeline up to the deletion) and a live
	// stream from before the deletion.
	ErrDeleted = &Error{Code: "deleted"}
)

// replyError decodes an error reply, or makes one from the status when
// the body is not the engine's envelope (a proxy in between).
func replyError(status int, data []byte) error { return wire.DecodeError(status, data, "") }

// IdempotencyEventIDs returns the ids of the n events an append with
// idempotency key (AppendRequest.EventID) stores on session: the engine
// derives them from the session and the key (wire.IdempotencyEventIDs),
// so a caller knows them before the reply comes.
func IdempotencyEventIDs(session, key string, n int) []string {
	return wire.IdempotencyEventIDs(session, key, n)
}
