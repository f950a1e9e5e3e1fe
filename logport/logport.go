// Package logport is the event log's port, free of NATS: the Log
// interface and its contract, what an append returns, the record a read
// returns, the conflicts and other conditions callers test, an
// idempotency key's claim, and the back-off of retries. The service, the
// JetStream log (package jetstream), the in-memory log (memlog) and the
// conformance suite (logtest) share it; only events is below it.
package logport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/toolintent/engine/events"
)

// MaxBatch is the largest multi-event append (the server's atomic batch
// limit).
const MaxBatch = 1000

// AppendResult says where an append landed.
type AppendResult struct {
	// First and Last are the stream sequences of the first and last event.
	First, Last uint64
	// Duplicate is true when the log had already stored these events (a
	// retried append with the same ids): nothing new was written.
	Duplicate bool
}

// Record is one stored event as read back from the log. When the payload
// cannot be decoded, Err says why and Envelope holds what could be read
// of the header; the record is still returned so the caller can report
// and skip it.
type Record struct {
	Seq     uint64
	Subject string
	Session string
	Time    time.Time
	// MsgID is the message's id header as stored, "" when it has none;
	// the fold checks it against the envelope id.
	MsgID    string
	Data     []byte
	Envelope events.Envelope
	Err      error
	// First reports that the log stored the event on the condition that
	// its session held no earlier event (an expected sequence of 0, as the
	// engine appends a new session's first event or batch): the session
	// had no events before it, so a projection need not read a view it
	// cannot have.
	First bool
	// Held reports that the feed did not decode the record because its
	// consumer already holds the event (a writer of the same process
	// handed it over): Envelope is zero and Err nil; the log's Decode
	// decodes it when the consumer needs it after all.
	Held bool
}

// ErrConflict is the sentinel for an optimistic-concurrency conflict: the
// session's last sequence was not the one the append expected. Match it
// with errors.Is; the *ConflictError carries the sequences.
var ErrConflict = errors.New("conflict")

// ConflictError reports which sequence an append expected and which one the
// session has. Actual is 0 when the log did not say and a look-up failed.
type ConflictError struct {
	Session  string
	Expected uint64
	Actual   uint64
	// InFlight: the log refused the expected sequence because a write to
	// the session was in flight, not by naming another one.
	InFlight bool
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict on session %q: expected last sequence %d, session is at %d: read the session again and retry", e.Session, e.Expected, e.Actual)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrOutcomeUnknown is matched (errors.Is) by an append whose request may
// have reached the log but whose acknowledgement never came (a timeout or
// a connection lost after sending): the events may or may not be stored.
// It is not a refusal: read the session to learn which.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// OutcomeUnknownError says an append's outcome is unknown and where to
// look: the session's events after AfterSeq hold the answer (the events'
// ids are deduplicated, so re-sending them stores them at most once).
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
// the connection to the log was down: nothing was stored. Retry when the
// connection is back.
var ErrNotSent = errors.New("not sent: the NATS connection is down, nothing was stored")

// ErrStorageFull is matched by an append refused because the store's disk
// has less free space than the engine needs: nothing was written.
var ErrStorageFull = errors.New("disk full")

// ErrBatchUnsupported is returned by a multi-event append when the log
// cannot store atomic batches. Nothing was written.
var ErrBatchUnsupported = errors.New("atomic batch publish unsupported")

// ErrKeyInUse is matched (errors.Is) by an append whose idempotency key
// (its first event's id) is already used by an event of another session,
// or claimed for another session. Nothing was written and nothing of the
// other session is returned.
var ErrKeyInUse = errors.New("idempotency key already used on another session")

// KeyInUseError names the key refused and the session it was sent on (never
// the session that holds it). Channel is set when the key is this
// session's but was used by another channel than the one sending it.
type KeyInUseError struct {
	Key     string
	Session string
	Channel string
}

func (e *KeyInUseError) Error() string {
	if e.Channel != "" {
		return fmt.Sprintf("idempotency key %s was already used on session %q by another channel than %q: a key belongs to the channel and session it was first used by; use a new key for this append", e.Key, e.Session, e.Channel)
	}
	return fmt.Sprintf("idempotency key %s was already used on another session; it cannot be used on session %q: a key belongs to the session it was first used on; use a new key for this append", e.Key, e.Session)
}

// Unwrap makes errors.Is(err, ErrKeyInUse) true.
func (e *KeyInUseError) Unwrap() error { return ErrKeyInUse }

// ErrWrongPartition is matched (errors.Is) by a call that names a session
// of another partition than the log's own (a log of a partitioned layout
// holds only the sessions events.Partition puts in it), and by a stored
// event read back from a partition its session does not belong to.
var ErrWrongPartition = errors.New("session of another partition")

// WrongPartitionError names the session, the partition it belongs to and
// the stream that was asked.
type WrongPartitionError struct {
	Session         string
	Partition       int // the session's partition
	Partitions      int // of the layout
	Stream          string
	StreamPartition int // the partition Stream holds
	// OneStream is set on a store migrated from one stream to partitions:
	// the session is one the migration kept on the one stream (Partition
	// is then -1), or, asked of that stream, one that is not (a partition's).
	OneStream string
}

func (e *WrongPartitionError) Error() string {
	switch {
	case e.OneStream != "" && e.Partition < 0:
		return fmt.Sprintf("session %q is one the migration to partitions kept on stream %s, not one of stream %s: send it to the log of %s",
			e.Session, e.OneStream, e.Stream, e.OneStream)
	case e.OneStream != "":
		return fmt.Sprintf("session %q is not one the migration to partitions kept on stream %s: it belongs to a partition's stream",
			e.Session, e.OneStream)
	}
	return fmt.Sprintf("session %q belongs to partition %d of %d, not to stream %s (partition %d): send it to the log of partition %d",
		e.Session, e.Partition, e.Partitions, e.Stream, e.StreamPartition, e.Partition)
}

// Unwrap makes errors.Is(err, ErrWrongPartition) true.
func (e *WrongPartitionError) Unwrap() error { return ErrWrongPartition }

// ErrKeyMismatch is matched (errors.Is) by an append whose idempotency key
// this session used before with other commands (the IETF
// Idempotency-Key draft's 422): nothing was written. It also matches
// ErrKeyInUse: the key is taken, by another request.
var ErrKeyMismatch = errors.New("idempotency key already used with other commands")

// Backoff is a doubling wait between attempts: First, then twice the
// last, never more than Max. With Jitter each wait is drawn from
// [d/2, 1.5·d) around the doubling value d, so that many clients retrying
// together spread out. The zero value waits 100 ms, doubling up to 5 s,
// without jitter. A Backoff is not safe for concurrent use.
type Backoff struct {
	First  time.Duration // first wait; 0: 100 ms
	Max    time.Duration // cap of the doubling value; 0: 5 s
	Jitter bool

	next time.Duration
}

// Next returns the wait before the next attempt and doubles the one after.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.First
		if b.next <= 0 {
			b.next = 100 * time.Millisecond
		}
	}
	d := b.next
	limit := b.Max
	if limit <= 0 {
		limit = 5 * time.Second
	}
	b.next = min(b.next*2, max(limit, b.next))
	if b.Jitter && d > 0 {
		return d/2 + rand.N(d)
	}
	return d
}

// Sleep waits d or until ctx ends, whichever comes first, and returns
// ctx's error in the second case. A d of 0 or less returns nil at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// KeyClaim is the entry of an idempotency key in the key index (on
// JetStream the KV bucket <PREFIX>_KEYS): the session the key belongs to
// and, once the append was acknowledged, where its events are. A claim is
// written before the append (pending: Count 0) and settled after it, so
// that a crash in between leaves a claim that names the session and the
// sequence after which its events, if stored, are.
type KeyClaim struct {
	// Session owns the key, sent by Channel ("" in entries that did not
	// record it).
	Session string `json:"session"`
	Channel string `json:"channel,omitempty"`
	// After is a sequence of the stream the session had reached before the
	// append: its events, if stored, come after it.
	After uint64 `json:"after"`
	// First is the stream sequence of the first event, Count how many
	// events; 0 while the claim is pending.
	First uint64 `json:"first,omitempty"`
	Count int    `json:"count,omitempty"`
	// IDs names how the events' ids derive from the key: "v1" is
	// jetstream.KeyEventIDs; "" (entries of engines) is the key itself,
	// then key+1, ...
	IDs string `json:"ids,omitempty"`
	// Digest is jetstream.CommandsDigest of the commands the key was
	// first sent with, Commands their types, comma-separated ("" in older
	// entries: not checked).
	Digest   string `json:"digest,omitempty"`
	Commands string `json:"commands,omitempty"`
	// Rev is the revision of the claim in the store it was read from
	// (0: not read from a store), for the compare-and-set of its
	// changes; it is not part of the stored claim.
	Rev uint64 `json:"-"`
}

// KeyIDsV1 is KeyClaim.IDs of keys whose events' ids are
// jetstream.KeyEventIDs.
const KeyIDsV1 = "v1"

// Pending reports a claim whose append was not settled (in flight, failed,
// or the engine died before it settled it).
func (c KeyClaim) Pending() bool { return c.Count == 0 }

// ReadOptions say how fresh a read of a session's view must be.
type ReadOptions struct {
	// MinSeq asks for read-your-writes: the view returned has folded every
	// event of the session up to at least this stream sequence. When the
	// stored view is older, the missing tail is folded from the log (a
	// bounded replay from the view's sequence).
	MinSeq uint64
	// Latest folds whatever the log holds after the view (strong read).
	Latest bool
}

// Log is the session event log: one ordered stream of events, each
// session's events a subsequence of it. Implementations are safe for
// concurrent use.
//
// The contract, checked by logtest.Run:
//   - Sequences are stream-wide, start at 1 and only grow; a session's
//     events are read back in the order they were appended.
//   - Append stores evs (all for session) all or nothing, provided the
//     session's last sequence is expected (0: no events yet); otherwise it
//     returns a *ConflictError (errors.Is ErrConflict) naming
//     the session's actual sequence and stores nothing.
//   - An append of envelopes whose ids are already stored on the session
//     (a re-send) stores nothing and returns their sequences with
//     Duplicate set, whether or not the expectation still holds; ids
//     stored on another session are refused (errors.Is
//     ErrKeyInUse).
//   - A session id that is not one subject token fails every method with
//     an error matching events.ErrInvalidSession.
//   - A done context fails the call with an error matching ctx.Err()
//     (for Append, possibly an outcome-unknown error wrapping it).
type Log interface {
	// Append stores evs on session if its last sequence is expected.
	Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (AppendResult, error)
	// LastSeq is the sequence of the session's last event, 0 for none;
	// on a replicated stream it may come from a replica behind the leader.
	LastSeq(ctx context.Context, session string) (uint64, error)
	// LeaderLastSeq is LastSeq as the stream's leader holds it, for the
	// answers that must not rest on a replica behind it (a refusal that
	// the session has no events); it may cost more than LastSeq.
	LeaderLastSeq(ctx context.Context, session string) (uint64, error)
	// ReadSession returns the session's events with sequence in
	// [from, upTo] (from 0 is 1; upTo 0: to the end), in order.
	ReadSession(ctx context.Context, session string, from, upTo uint64) ([]Record, error)
	// ReadSessionThrough is ReadSession for a caller that knows the
	// session holds an event at upTo (a sequence the log acknowledged or
	// a state folded): it reads through upTo even when the replica first
	// asked lags the stream's leader, where ReadSession may end early.
	ReadSessionThrough(ctx context.Context, session string, from, upTo uint64) ([]Record, error)
	// ScanSession calls fn for each event ReadSession would return, in
	// order, and stops at fn's first error, which it returns (wrapped).
	ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(Record) error) error
	// StoredAt reports whether the events at sequences first, first+1, ...
	// are the session's events with ids, in order.
	StoredAt(ctx context.Context, session string, first uint64, ids []string) (bool, error)
}

// Collect returns the records scan hands its fn, in order: ReadSession
// over ScanSession. On scan's error it returns the records handed before
// it with the error.
func Collect(scan func(fn func(Record) error) error) ([]Record, error) {
	var out []Record
	err := scan(func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}
