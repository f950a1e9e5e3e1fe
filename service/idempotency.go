package service

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/wire"
)

// KeyMismatchError refuses an idempotency key this session used before
// with other commands; it matches ErrKeyMismatch and, being a
// kind of key in use, logport.ErrKeyInUse (KindKeyInUse).
type KeyMismatchError = jetstream.KeyMismatchError

// ErrKeyMismatch is matched by a *KeyMismatchError.
var ErrKeyMismatch = logport.ErrKeyMismatch

// KeyedIDs returns the ids of the n events an append with idempotency key
// key stores on session (jetstream.KeyEventIDs): a hash of the
// session and the key written as a ULID, then that number plus 1, 2, ...
// It fails (ErrInvalid) on a key that is not 1 to 255 bytes of printable
// UTF-8 (wire.CheckIdempotencyKey). Keys are opaque and case-sensitive.
func KeyedIDs(session, key string, n int) ([]string, error) {
	if err := wire.CheckIdempotencyKey(key); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return jetstream.KeyEventIDs(session, key, n), nil
}

// commandsDigest is the digest and the types of cmds a key's claim
// records, so that a retry with other commands is refused.
func commandsDigest(cmds []events.Payload) (digest, types string, err error) {
	enc := make([][]byte, len(cmds))
	names := make([]string, len(cmds))
	for i, c := range cmds {
		if enc[i], err = events.EncodeCommand(c); err != nil {
			return "", "", fmt.Errorf("%w: command %d: %w", ErrInvalid, i, err)
		}
		names[i] = string(c.EventType())
	}
	return jetstream.CommandsDigest(enc), clip.String(strings.Join(names, ","), 200), nil
}

// ApplyKeyed is Apply with a client-supplied idempotency key:
// any opaque string of 1 to 255 bytes (a UUID, a ULID...),
// case-sensitive. The stored events' ids derive from the session and the
// key (KeyedIDs). A retry with the same key and the same commands after
// the first call stored its events returns where they are (Duplicate, the
// original sequences and ids) and writes nothing, whether the retry comes
// within the log's dedupe window or long after it; the same key with other
// commands is refused (logport.ErrKeyMismatch, which is also
// ErrKeyInUse) and writes nothing. An empty key is Apply.
//
// A key belongs to the session and the channel it was first used by:
// sent on another session, or by another channel, it is refused
// (logport.ErrKeyInUse) and nothing of the session that holds it is
// returned or folded.
//
// The key is found through the index (jetstream.Keys, one get), never by reading the session from its start. The key is claimed
// there before the append and settled after it, so that an engine dying
// in between leaves a claim naming the sequence after which the events,
// if stored, are: a later retry reads only the events after it. Claims of
// engines (ULID keys whose first event's id is the key) are
// read as they were written.
//
// Two calls with one key that race each other are settled by the log: the
// loser's append fails its expected sequence or is deduplicated, and the
// winner's events are returned to both.
func (e *Engine) ApplyKeyed(ctx context.Context, session string, origin Origin, expected *uint64, key string, cmds ...events.Payload) (res CommandResult, err error) {
	if key == "" {
		return e.Apply(ctx, session, origin, expected, cmds...)
	}
	if _, err := KeyedIDs(session, key, 1); err != nil {
		return CommandResult{}, err
	}
	if err := checkWrite(session, cmds); err != nil {
		return CommandResult{}, err
	}
	digest, types, err := commandsDigest(cmds)
	if err != nil {
		return CommandResult{}, err
	}
	if e.keys == nil {
		return CommandResult{}, fmt.Errorf("%w: idempotency key %q: this engine has no key store (Ports.Keys): send the command without a key", ErrInvalid, key)
	}
	keys, err := e.keys(ctx)
	if err != nil {
		return CommandResult{}, err
	}
	after, err := e.log.LastSeq(ctx, session)
	if err != nil {
		return CommandResult{}, err
	}
	claim, claimed, err := keys.Claim(ctx, key, logport.KeyClaim{Session: session, Channel: origin.Channel, After: after,
		IDs: logport.KeyIDsV1, Digest: digest, Commands: types})
	if err != nil {
		return CommandResult{}, err
	}
	switch {
	case !claimed && claim.Session != session:
		return CommandResult{}, &logport.KeyInUseError{Key: key, Session: session}
	case !claimed && claim.Channel != "" && claim.Channel != origin.Channel:
		return CommandResult{}, &logport.KeyInUseError{Key: key, Session: session, Channel: origin.Channel}
	case !claimed && claim.Digest != "" && claim.Digest != digest:
		return CommandResult{}, &jetstream.KeyMismatchError{Key: key, Was: claim.Commands, Now: types}
	case !claimed:
		stored, found, seen, ferr := e.findClaimed(ctx, keys, session, key, claim)
		if ferr != nil || found {
			return stored, ferr
		}
		// Pending and not stored: the first call is in flight, was
		// refused, or its engine died. Append with the same ids: the log
		// deduplicates a twin still in flight (or fails its expected
		// sequence and finds it stored).
		defer func() {
			if len(res.EventIDs) == 0 && seen > claim.After {
				// Still nothing stored: later retries need read only
				// what comes after what this one read.
				if aerr := keys.Advance(ctx, key, claim, seen); aerr != nil {
					e.cfg.Logger.Debug().Str("session", session).Str("key", key).Err(aerr).Msg("pending idempotency key not advanced")
				}
			}
		}()
	default:
		// A ULID key older than the index may be stored without an
		// entry, under the ids engines gave it.
		if kid, ok := jetstream.LegacyKeyEventIDs(key, 1); ok {
			u, _ := ulid.ParseStrict(kid[0])
			if upTo := keys.Legacy(ulid.Time(u.Time())); upTo > 0 {
				res, found, _, err := e.findKeyed(ctx, session, key, kid[0], 0, upTo)
				if err != nil {
					return res, err
				}
				if found {
					old := claim
					old.IDs, old.Digest, old.Commands = "", "", ""
					e.settle(ctx, keys, session, key, old, res)
					return res, nil
				}
			}
		}
	}
	ids := func(i int) string { return claimIDs(session, key, claim, i+1)[i] } // a command may decide several events
	res, err = e.apply(ctx, session, origin, expected, ids, cmds)
	switch {
	case err == nil && len(res.EventIDs) > 0:
		e.settle(ctx, keys, session, key, claim, res)
	case claimed && (err == nil || refused(err)):
		// Nothing stored: the key is free again (another session may
		// use it). Only the call that claimed it releases it, and only
		// while the claim is as it made it.
		if rerr := keys.Release(ctx, key, claim); rerr != nil {
			e.cfg.Logger.Debug().Str("session", session).Str("key", key).Err(rerr).Msg("idempotency key not released")
		}
	}
	return res, err
}

// claimIDs are the ids of the first n events of a claim: KeyEventIDs, or
// for a claim of an engine the key and key+1, ...
func claimIDs(session, key string, claim logport.KeyClaim, n int) []string {
	if claim.IDs == "" {
		if ids, ok := jetstream.LegacyKeyEventIDs(key, n); ok {
			return ids
		}
	}
	return jetstream.KeyEventIDs(session, key, n)
}

// refused reports an append error that certainly stored nothing.
func refused(err error) bool {
	if errors.Is(err, logport.ErrOutcomeUnknown) {
		return false
	}
	return errors.Is(err, ErrInvalid) || errors.Is(err, logport.ErrConflict) || errors.Is(err, logport.ErrKeyInUse) ||
		errors.Is(err, events.ErrInvalidSession) || errors.Is(err, ErrNoTurn)
}

// settle records where the key's events are; a failure leaves the claim
// pending, which a later retry resolves by reading the events after it.
func (e *Engine) settle(ctx context.Context, keys Keys, session, key string, claim logport.KeyClaim, res CommandResult) {
	if err := keys.Settle(ctx, key, claim, res.First, len(res.EventIDs)); err != nil {
		e.cfg.Logger.Warn().Str("session", session).Str("key", key).Err(err).Msg("idempotency key stored but its index entry left pending: a retry reads the session after it")
	}
}

// findClaimed returns the events of a claim of this session: where a
// settled claim says (checked against the log), or, for a pending claim,
// looked for after the sequence it was claimed at (seen: the last
// sequence of the session that search read).
func (e *Engine) findClaimed(ctx context.Context, keys Keys, session, key string, claim logport.KeyClaim) (res CommandResult, found bool, seen uint64, err error) {
	if claim.Pending() {
		// Search up to where the stream's leader says the session is: a
		// replica behind it ends the search before the key's events, and
		// once the dedupe window has passed the retry would store them
		// a second time. Without an answer from the leader the search
		// reads what the replica holds, as before.
		_, _ = e.raiseToLeader(ctx, session)
		res, found, seen, err = e.findKeyed(ctx, session, key, claimIDs(session, key, claim, 1)[0], claim.After+1, 0)
		if err == nil && found {
			e.settle(ctx, keys, session, key, claim, res)
		}
		return res, found, seen, err
	}
	ids := claimIDs(session, key, claim, claim.Count)
	ok, err := e.log.StoredAt(ctx, session, claim.First, ids)
	if err != nil || !ok {
		// A compaction replaced the claimed events by a snapshot
		// that folds them (the log no longer holds them): they were
		// stored, the retry is a duplicate.
		var ce *CompactedError
		last := claim.First + uint64(claim.Count) - 1
		if cerr := e.compactedBefore(ctx, session, Until{Seq: claim.First}); errors.As(cerr, &ce) && ce.FirstSeq <= claim.First && last <= ce.LastSeq {
			res, found, err := e.duplicate(ctx, session, CommandResult{First: claim.First, Last: last, EventIDs: ids})
			return res, found, 0, err
		}
	}
	if err != nil {
		return CommandResult{}, false, 0, fmt.Errorf("idempotency key %q: read its events at sequence %d: %w", key, claim.First, err)
	}
	if !ok {
		return CommandResult{}, false, 0, fmt.Errorf("idempotency key %q: the index says session %q holds it at sequence %d, the log does not: %w", key, session, claim.First, jetstream.ErrDamagedLog)
	}
	res = CommandResult{First: claim.First, Last: claim.First + uint64(claim.Count) - 1, EventIDs: ids}
	res, found, err = e.duplicate(ctx, session, res)
	return res, found, 0, err
}

// findKeyed looks for the events stored under key on the session between
// sequences from and upTo (0: the end): the event whose id is first and
// those right after it with ids first+1, first+2... seen is the last
// sequence read.
func (e *Engine) findKeyed(ctx context.Context, session, key, first string, from, upTo uint64) (res CommandResult, found bool, seen uint64, err error) {
	next := first
	stop := errors.New("stop")
	err = e.scanSessionFrom(ctx, session, max(from, 1), upTo, func(r logport.Record) error {
		seen = r.Seq
		id := r.MsgID
		if r.Err == nil {
			id = r.Envelope.ID
		}
		if id != next {
			if res.First != 0 {
				return stop
			}
			return nil
		}
		if res.First == 0 {
			res.First = r.Seq
		}
		res.Last = r.Seq
		res.EventIDs = append(res.EventIDs, id)
		next = jetstream.NextEventID(id)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return res, false, seen, fmt.Errorf("look for idempotency key %q on session %q: %w", key, session, err)
	}
	if res.First == 0 {
		return res, false, seen, nil
	}
	res, found, err = e.duplicate(ctx, session, res)
	return res, found, seen, err
}

// duplicate completes the result of a stored keyed append with the
// session's state, which includes it.
func (e *Engine) duplicate(ctx context.Context, session string, res CommandResult) (CommandResult, bool, error) {
	res.Duplicate = true
	st, err := e.current(ctx, session, true, res.Last)
	if err != nil {
		return res, true, err
	}
	res.State = st
	return res, true, nil
}

// writeLocks serializes, within this process, apply's read-decide-append
// of one session: writers of this engine then never fail each other's
// expected sequence, so a retry-safe write sent without one is not
// starved into a conflict by a busier writer of the same session (a
// keyed writer beside an unkeyed one got 409s it did not ask
// for). Writers of other engines still conflict, and are retried. The log
// serializes appends per session anyway; this holds the lock over the
// state read and the decision too. The zero value is ready.
type writeLocks struct {
	once  sync.Once
	slots [512]chan struct{}
}

// lock takes the session's slot, or gives up when ctx ends.
func (w *writeLocks) lock(ctx context.Context, session string) (unlock func(), err error) {
	w.once.Do(func() {
		for i := range w.slots {
			w.slots[i] = make(chan struct{}, 1)
		}
	})
	h := fnv.New32a()
	h.Write([]byte(session))
	slot := w.slots[h.Sum32()%uint32(len(w.slots))]
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
