package service

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// Kind is what an error of the engine means to a caller: the one place
// that reads the sentinels of the core packages and of the log. A
// transport maps each kind to its own codes (api: wire's codes).
type Kind uint8

// The kinds. KindOf tests deleted and not-found first.
const (
	// KindInternal is a bug or an unexpected failure.
	KindInternal Kind = iota
	// KindConflict: the session moved past the expected sequence
	// (ErrConflict; a *ConflictError carries the sequences).
	KindConflict
	// KindNoTurn: the operation needs an open turn (ErrNoTurn).
	KindNoTurn
	// KindOutcomeUnknown: a write was sent but never acknowledged; it may
	// or may not be stored.
	KindOutcomeUnknown
	// KindStorageFull: the store is short of free space; nothing written.
	KindStorageFull
	// KindKeyInUse: the idempotency key belongs to another session or
	// channel (a *KeyInUseError says why, without the other session).
	KindKeyInUse
	// KindInvalid: the request itself is wrong (a session id, a name, a
	// command, a preset, a profile, ...).
	KindInvalid
	// KindUnavailable: JetStream or the connection to it cannot serve now,
	// or the views have not caught up: worth a retry later.
	KindUnavailable
	// KindDeleted: the session was deleted (ErrDeleted); it answers
	// no read and takes no write, for good.
	KindDeleted
	// KindNotFound: the operation needs a session with events (ErrNotFound).
	KindNotFound
	// KindForbidden: the engine's store or connections may not do this
	// (an erase on a stream that denies purge, or without an eraser).
	KindForbidden
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindConflict:
		return "conflict"
	case KindNoTurn:
		return "no_turn"
	case KindOutcomeUnknown:
		return "outcome_unknown"
	case KindStorageFull:
		return "storage_full"
	case KindKeyInUse:
		return "key_in_use"
	case KindInvalid:
		return "invalid"
	case KindUnavailable:
		return "unavailable"
	case KindDeleted:
		return "deleted"
	case KindNotFound:
		return "not_found"
	case KindForbidden:
		return "forbidden"
	}
	return "internal"
}

// ConflictError is the conflict of an append with an expected sequence:
// errors.As gives the session, the expected and the actual sequence.
type ConflictError = logport.ConflictError

// KeyInUseError says why an idempotency key may not be used here; its
// Error names no other session.
type KeyInUseError = logport.KeyInUseError

// invalidErrs are the sentinels of a request the engine cannot accept.
var invalidErrs = []error{
	ErrInvalid,
	events.ErrInvalidSession, events.ErrInvalidName, events.ErrInvalidEvent, events.ErrTooLarge,
	aggregate.ErrInvalidCommand, aggregate.ErrMaterialized, aggregate.ErrUnknownTool,
	resolver.ErrUnknownPreset, resolver.ErrUnknownProfile, resolver.ErrInvalidRequest,
	checkpoint.ErrNotInContract, jetstream.ErrInvalidSession,
}

// KindOf classifies an error returned by an Engine (or by the packages
// under it). It is safe for concurrent use; nil is KindInternal, as is
// any error it does not know.
func KindOf(err error) Kind {
	switch {
	case err == nil:
		return KindInternal
	case errors.Is(err, ErrConflict), errors.Is(err, ErrSnapshotMismatch):
		return KindConflict
	case errors.Is(err, ErrDeleted):
		return KindDeleted // before invalid: a command refused as deleted is wrapped in ErrInvalid
	case errors.Is(err, ErrNotFound):
		return KindNotFound
	case errors.Is(err, jetstream.ErrPurgeDenied), errors.Is(err, ErrEraseUnavailable):
		return KindForbidden
	case errors.Is(err, ErrNoTurn):
		return KindNoTurn
	case errors.Is(err, logport.ErrOutcomeUnknown):
		return KindOutcomeUnknown
	case errors.Is(err, logport.ErrStorageFull):
		return KindStorageFull
	case errors.Is(err, logport.ErrKeyInUse):
		return KindKeyInUse
	case isAny(err, invalidErrs):
		return KindInvalid
	case jetstream.Transient(err), errors.Is(err, projection.ErrNotCaughtUp),
		errors.Is(err, context.Canceled), errors.Is(err, nats.ErrConnectionDraining):
		// The log or its connection cannot serve now (jetstream's one
		// classifier), the views have not caught up, the
		// caller gave up or the engine is shutting down.
		return KindUnavailable
	}
	return KindInternal
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
