package jetstream

import (
	"context"
	"time"

	"github.com/toolintent/engine/logport"
)

// The log's vocabulary is package logport's, free of NATS; these names
// keep it under the package that implements the log.
type (
	// AppendResult says where an append landed.
	AppendResult = logport.AppendResult
	// Record is one stored event as read back from the log.
	Record = logport.Record
	// ConflictError reports which sequence an append expected and which
	// one the session has.
	ConflictError = logport.ConflictError
	// OutcomeUnknownError says an append's outcome is unknown and where to
	// look.
	OutcomeUnknownError = logport.OutcomeUnknownError
	// KeyInUseError names an idempotency key refused and the session it
	// was sent on.
	KeyInUseError = logport.KeyInUseError
	// Backoff is a doubling wait between attempts.
	Backoff = logport.Backoff
	// KeyClaim is an idempotency key's entry in the key index.
	KeyClaim = logport.KeyClaim
	// WrongPartitionError names a session sent to another partition's
	// log.
	WrongPartitionError = logport.WrongPartitionError
)

// KeyIDsV1 is KeyClaim.IDs of keys whose events' ids are KeyEventIDs.
const KeyIDsV1 = logport.KeyIDsV1

// The log's sentinels (logport's).
var (
	ErrConflict         = logport.ErrConflict
	ErrOutcomeUnknown   = logport.ErrOutcomeUnknown
	ErrNotSent          = logport.ErrNotSent
	ErrStorageFull      = logport.ErrStorageFull
	ErrBatchUnsupported = logport.ErrBatchUnsupported
	ErrKeyInUse         = logport.ErrKeyInUse
	ErrKeyMismatch      = logport.ErrKeyMismatch
	ErrWrongPartition   = logport.ErrWrongPartition
)

// MaxBatch is the largest multi-event append (the server's atomic batch
// limit).
const MaxBatch = logport.MaxBatch

// Sleep waits d or until ctx ends, whichever comes first (logport.Sleep).
func Sleep(ctx context.Context, d time.Duration) error { return logport.Sleep(ctx, d) }
