package service

import (
	"context"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// The ports of the engine: what it needs from the event log,
// the idempotency-key store and the session views, declared here, by their
// consumer, but for Log, whose contract package logport states beside the
// log's vocabulary. *jetstream.Log, *jetstream.Keys and
// *projection.Projection implement them (checked below); memlog.Log is an
// in-memory Log, and logtest.Run is the conformance suite every Log passes.

// Log is the session event log, as package logport states its contract
// (checked by logtest.Run).
type Log = logport.Log

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
