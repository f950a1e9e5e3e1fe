package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
)

// KeyedIDs returns the ids of n events appended under a client's
// idempotency key: the key itself (a ULID) for the first, then the key
// plus 1, 2, ... read as a 128-bit number, so that a command that decides
// several events names each one. It fails (ErrInvalid) on a key that is
// not a ULID.
func KeyedIDs(key string, n int) ([]string, error) {
	id, err := ulid.ParseStrict(key)
	if err != nil {
		return nil, fmt.Errorf("%w: idempotency key %q is not a ULID (26 characters of Crockford base32, e.g. %s): %w", ErrInvalid, clip(key), events.NewID(), err)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = id.String()
		for b := len(id) - 1; b >= 0; b-- { // id + 1
			id[b]++
			if id[b] != 0 {
				break
			}
		}
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// ApplyKeyed is Apply with a client-supplied idempotency key (#20 item
// 4): the first stored event's id is key (a ULID; further events of the
// same commands get key+1, key+2, ...). A retry with the same key after
// the first call stored its events returns where they are (Duplicate,
// the original sequences and ids) and writes nothing, whether the
// retry comes within the log's dedupe window or long after it: the
// session's events are searched for the key. An empty key is Apply.
//
// Two calls with one key that race each other are settled by the log: the
// loser's append fails its expected sequence or is deduplicated, and the
// winner's events are returned to both.
func (e *Engine) ApplyKeyed(ctx context.Context, session string, origin Origin, expected *uint64, key string, cmds ...events.Payload) (CommandResult, error) {
	if key == "" {
		return e.Apply(ctx, session, origin, expected, cmds...)
	}
	if _, err := KeyedIDs(key, 1); err != nil {
		return CommandResult{}, err
	}
	if err := events.ValidateSessionID(session); err != nil {
		return CommandResult{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	res, found, err := e.findKeyed(ctx, session, key)
	if err != nil || found {
		return res, err
	}
	ids := func(i int) string {
		out, _ := KeyedIDs(key, i+1) // valid: checked above
		return out[i]
	}
	return e.apply(ctx, session, origin, expected, ids, cmds)
}

// findKeyed looks for the events stored under key on the session: the
// event whose id is key and those right after it with ids key+1, key+2...
func (e *Engine) findKeyed(ctx context.Context, session, key string) (CommandResult, bool, error) {
	var res CommandResult
	next := key
	stop := errors.New("stop")
	err := e.log.ScanSession(ctx, session, 0, 0, func(r jetstream.Record) error {
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
		ids, _ := KeyedIDs(id, 2)
		next = ids[1]
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return res, false, fmt.Errorf("look for idempotency key %s on session %q: %w", key, session, err)
	}
	if res.First == 0 {
		return res, false, nil
	}
	res.Duplicate = true
	st, err := e.current(ctx, session, true, res.Last)
	if err != nil {
		return res, true, err
	}
	res.State = st
	return res, true, nil
}
