package service

import (
	"context"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// The ports of the engine: what it needs from the event log,
// the idempotency-key store and the session views, declared here, by their
// consumer. *jetstream.Log, *jetstream.Keys and *projection.Projection
// implement them (checked below); memlog.Log is an in-memory Log, and
// logtest.Run is the conformance suite every Log passes.

// Log is the session event log: one ordered stream of events, each
// session's events a subsequence of it. Implementations are safe for
// concurrent use.
//
// The contract, checked by logtest.Run:
//   - Sequences are stream-wide, start at 1 and only grow; a session's
//     events are read back in the order they were appended.
//   - Append stores evs (all for session) all or nothing, provided the
//     session's last sequence is expected (0: no events yet); otherwise it
//     returns a *logport.ConflictError (errors.Is ErrConflict) naming
//     the session's actual sequence and stores nothing.
//   - An append of envelopes whose ids are already stored on the session
//     (a re-send) stores nothing and returns their sequences with
//     Duplicate set, whether or not the expectation still holds; ids
//     stored on another session are refused (errors.Is
//     logport.ErrKeyInUse).
//   - A session id that is not one subject token fails every method with
//     an error matching events.ErrInvalidSession.
//   - A done context fails the call with an error matching ctx.Err()
//     (for Append, possibly an outcome-unknown error wrapping it).
type Log interface {
	// Append stores evs on session if its last sequence is expected.
	Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (logport.AppendResult, error)
	// LastSeq is the sequence of the session's last event, 0 for none;
	// on a replicated stream it may come from a replica behind the leader.
	LastSeq(ctx context.Context, session string) (uint64, error)
	// LeaderLastSeq is LastSeq as the stream's leader holds it, for the
	// answers that must not rest on a replica behind it (a refusal that
	// the session has no events); it may cost more than LastSeq.
	LeaderLastSeq(ctx context.Context, session string) (uint64, error)
	// ReadSession returns the session's events with sequence in
	// [from, upTo] (from 0 is 1; upTo 0: to the end), in order.
	ReadSession(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error)
	// ReadSessionThrough is ReadSession for a caller that knows the
	// session holds an event at upTo (a sequence the log acknowledged or
	// a state folded): it reads through upTo even when the replica first
	// asked lags the stream's leader, where ReadSession may end early.
	ReadSessionThrough(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error)
	// ScanSession calls fn for each event ReadSession would return, in
	// order, and stops at fn's first error, which it returns (wrapped).
	ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error
	// StoredAt reports whether the events at sequences first, first+1, ...
	// are the session's events with ids, in order.
	StoredAt(ctx context.Context, session string, first uint64, ids []string) (bool, error)
}

// Keys is the idempotency-key store of ApplyKeyed: a claim per client key
// naming the session, the channel and where the keyed events landed.
type Keys interface {
	// Claim stores c under key unless the key is claimed; it returns the
	// claim in force and whether this call made it.
	Claim(ctx context.Context, key string, c logport.KeyClaim) (got logport.KeyClaim, claimed bool, err error)
	// Settle records where the keyed events were stored.
	Settle(ctx context.Context, key string, c logport.KeyClaim, first uint64, count int) error
	// Advance moves a pending claim's read position past after.
	Advance(ctx context.Context, key string, c logport.KeyClaim, after uint64) error
	// Release drops a pending claim whose write was refused.
	Release(ctx context.Context, key string, c logport.KeyClaim) error
	// Legacy is the sequence up to which keys from before the store
	// existed (written at t) must be looked for in the log; 0: none.
	Legacy(t time.Time) uint64
}

// Views serves session views to the engine: a session's state at least
// at a sequence, and the registries stored events were decided against.
type Views interface {
	// Read returns the session's view as opts ask.
	Read(ctx context.Context, session string, opts projection.ReadOptions) (aggregate.State, error)
	// Stored is rec as the views fold it: with the registry in force
	// when it was stored, for the folds that judge it against one, so a
	// replay gives the views' verdicts.
	Stored(ctx context.Context, rec logport.Record) (aggregate.Stored, error)
	// Sessions lists the sessions that have a view, sorted.
	Sessions(ctx context.Context) ([]string, error)
}

// Ports are an engine's stores, for NewFromPorts.
type Ports struct {
	// Log is the event log. Required.
	Log Log
	// Keys opens the idempotency-key store on first use; nil: ApplyKeyed
	// with a key fails (ErrInvalid) and Apply is unaffected.
	Keys func(ctx context.Context) (Keys, error)
	// Views serves session views. Required.
	Views Views
	// Pages, when set, serves the session scans of history pages (Log
	// otherwise): a log of the same stream on a connection of its own, so
	// that a page's batch of hundreds of messages does not queue ahead of
	// the appends' acknowledgements on Log's connection.
	Pages SessionScanner
}

// SessionScanner reads a session's events in order, as Log.ScanSession.
type SessionScanner interface {
	ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error
}

// Compile-time checks that the JetStream adapter and the projection
// implement the ports (jetstream cannot import service, so they live here).
var (
	_ Log   = (*jetstream.Log)(nil)
	_ Keys  = (*jetstream.Keys)(nil)
	_ Views = (*projection.Projection)(nil)
)

// JetStreamPorts returns the ports of a JetStream log and its projection.
func JetStreamPorts(log *jetstream.Log, proj *projection.Projection) Ports {
	return Ports{
		Log: log,
		Keys: func(ctx context.Context) (Keys, error) {
			k, err := log.Keys(ctx)
			if err != nil {
				return nil, err // not a typed nil in a non-nil Keys
			}
			return k, nil
		},
		Views: proj,
	}
}
