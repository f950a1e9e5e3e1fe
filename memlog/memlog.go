// Package memlog is an in-memory event log implementing service.Log: the
// same contract as the JetStream log (stream-wide sequences, appends with
// an expected per-session sequence, all or nothing, deduplicated by event
// id), checked by the same conformance suite, logtest.Run.
//
// It is for tests and tools that need a log without a NATS server. It is
// not durable, its dedupe window is its whole life (JetStream's is
// LogConfig.Duplicates), and a Record's Subject is the session id (there
// is no NATS subject).
package memlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Log is an in-memory event log. The zero value is an empty log ready for
// use; a Log is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	recs []logport.Record  // recs[i] has sequence i+1
	last map[string]uint64 // session -> sequence of its last event
	ids  map[string]uint64 // event id -> its sequence
}

// New returns an empty log.
func New() *Log { return &Log{} }

func check(ctx context.Context, what, session string) error {
	if err := events.ValidateSessionID(session); err != nil {
		return fmt.Errorf("%s %q: %w", what, session, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %q: %w", what, session, err)
	}
	return nil
}

// Append stores evs on session, all or nothing, provided the session's
// last sequence is expected (0: no events). See service.Log for the
// contract.
func (l *Log) Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (logport.AppendResult, error) {
	if err := check(ctx, "append to", session); err != nil {
		return logport.AppendResult{}, err
	}
	if len(evs) == 0 {
		return logport.AppendResult{}, errors.New("append: no events given")
	}
	if len(evs) > logport.MaxBatch {
		return logport.AppendResult{}, fmt.Errorf("append: %d events exceed the atomic batch limit %d: split the command", len(evs), logport.MaxBatch)
	}
	data := make([][]byte, len(evs))
	seen := make(map[string]bool, len(evs))
	for i, e := range evs {
		if e.Session != session {
			return logport.AppendResult{}, fmt.Errorf("append: event %s is for session %q, not %q", e.ID, e.Session, session)
		}
		if seen[e.ID] {
			return logport.AppendResult{}, fmt.Errorf("append to %q: event id %s twice in one batch: give each event its own id", session, e.ID)
		}
		seen[e.ID] = true
		b, err := events.Encode(e)
		if err != nil {
			return logport.AppendResult{}, fmt.Errorf("append: encode event %s: %w", e.ID, err)
		}
		data[i] = b
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.ids = make(map[string]uint64), make(map[string]uint64)
	}
	actual := l.last[session]
	if actual != expected {
		// A re-send of events stored after expected is their duplicate.
		if res, ok := l.storedAfter(session, expected, evs); ok {
			return res, nil
		}
		return logport.AppendResult{}, &logport.ConflictError{Session: session, Expected: expected, Actual: actual}
	}
	if first, ok := l.ids[evs[0].ID]; ok {
		if l.storedAtLocked(session, first, evs) {
			return logport.AppendResult{First: first, Last: first + uint64(len(evs)) - 1, Duplicate: true}, nil
		}
		return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, &logport.KeyInUseError{Key: evs[0].ID, Session: session})
	}
	for _, e := range evs[1:] {
		if _, ok := l.ids[e.ID]; ok {
			return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, &logport.KeyInUseError{Key: e.ID, Session: session})
		}
	}
	now := time.Now().UTC()
	first := uint64(len(l.recs)) + 1
	for i, e := range evs {
		seq := first + uint64(i)
		r := logport.Record{Seq: seq, Subject: session, Session: session, Time: now, MsgID: e.ID, Data: data[i]}
		r.Envelope, r.Err = events.Decode(data[i])
		l.recs = append(l.recs, r)
		l.ids[e.ID] = seq
	}
	last := first + uint64(len(evs)) - 1
	l.last[session] = last
	return logport.AppendResult{First: first, Last: last}, nil
}

// storedAfter reports whether evs are stored on the session, in order and
// contiguously, after sequence expected, and where.
func (l *Log) storedAfter(session string, expected uint64, evs []events.Envelope) (logport.AppendResult, bool) {
	first, ok := l.ids[evs[0].ID]
	if !ok || first <= expected || !l.storedAtLocked(session, first, evs) {
		return logport.AppendResult{}, false
	}
	return logport.AppendResult{First: first, Last: first + uint64(len(evs)) - 1, Duplicate: true}, true
}

func (l *Log) storedAtLocked(session string, first uint64, evs []events.Envelope) bool {
	for i, e := range evs {
		seq := first + uint64(i)
		if seq == 0 || seq > uint64(len(l.recs)) {
			return false
		}
		r := l.recs[seq-1]
		if r.Session != session || r.MsgID != e.ID {
			return false
		}
	}
	return true
}

// LastSeq returns the sequence of the session's last event, 0 when it has
// none.
func (l *Log) LastSeq(ctx context.Context, session string) (uint64, error) {
	if err := check(ctx, "last sequence of", session); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[session], nil
}

// ReadSession returns the session's events with sequence in [from, upTo]
// (from 0 is 1; upTo 0: to the end), in order.
func (l *Log) ReadSession(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	return logport.Collect(func(fn func(logport.Record) error) error {
		return l.ScanSession(ctx, session, from, upTo, fn)
	})
}

// LeaderLastSeq is LastSeq: the memory log has no replicas to lag behind.
func (l *Log) LeaderLastSeq(ctx context.Context, session string) (uint64, error) {
	return l.LastSeq(ctx, session)
}

// ReadSessionThrough is ReadSession: the memory log has no replicas to
// lag behind.
func (l *Log) ReadSessionThrough(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	return l.ReadSession(ctx, session, from, upTo)
}

// ScanSession calls fn for each of the session's events with sequence in
// [from, upTo] (upTo 0: to the end at the time of the call), in order, and
// returns fn's first error, wrapped. fn runs without the log's lock: it
// may append.
func (l *Log) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error {
	if err := check(ctx, "read session", session); err != nil {
		return err
	}
	from = max(from, 1)
	l.mu.Lock()
	end := uint64(len(l.recs))
	if upTo == 0 || upTo > end {
		upTo = end
	}
	var recs []logport.Record
	for seq := from; seq <= upTo; seq++ {
		if r := l.recs[seq-1]; r.Session == session {
			recs = append(recs, r)
		}
	}
	l.mu.Unlock()
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read session %q: %w", session, err)
		}
		if err := fn(r); err != nil {
			return fmt.Errorf("read session %q: %w", session, err)
		}
	}
	return nil
}

// StoredAt reports whether the events at sequences first, first+1, ...
// are the session's events with ids, in order.
func (l *Log) StoredAt(ctx context.Context, session string, first uint64, ids []string) (bool, error) {
	if err := check(ctx, "read session", session); err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		seq := first + uint64(i)
		if seq == 0 || seq > uint64(len(l.recs)) {
			return false, fmt.Errorf("read event %s at sequence %d: no such sequence (the log ends at %d)", id, seq, len(l.recs))
		}
		if r := l.recs[seq-1]; r.Session != session || r.MsgID != id {
			return false, nil
		}
	}
	return true, nil
}
