package service

// Compacting a session: its events are replaced by one
// SessionCompacted that carries the state they fold to (aggregate
// Compaction), appended on the condition that the session is still at the
// sequence it was folded to (a concurrent write conflicts, nothing is
// lost), then the replaced events are purged below the snapshot through
// the eraser's privileged connection. A cold load then reads one message
// and the tail after it. History and explain of the replaced sequences
// answer that they were compacted, with the range, count, time and actor.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/wire"
)

// ErrTurnOpen: a compaction was asked while a turn is open; the open turn
// is rebuilt from its TurnStarted, which compaction would remove. It
// matches logport.ErrConflict too (KindConflict): compact after the turn
// ends.
var ErrTurnOpen = aggregate.ErrTurnOpen

// Compactor purges the events a SessionCompacted replaces, through
// the privileged path of erases. *jetstream.Eraser implements it; an
// engine whose eraser does not cannot compact (ErrEraseUnavailable).
type Compactor interface {
	// Compact purges the session's events below snapshot, the sequence of
	// its SessionCompacted, and writes the audit record.
	Compact(ctx context.Context, session string, snapshot uint64) (jetstream.CompactReport, error)
}

var _ Compactor = (*jetstream.Eraser)(nil)

// CompactResult is the outcome of Compact: the SessionCompacted's
// sequence and id, whether the session was compact already, the replaced
// events and the messages this call purged (the API's reply).
type CompactResult = wire.CompactReply

// Compact rolls session's log up into one SessionCompacted: see the
// file comment. It refuses a deleted session (ErrDeleted), one with no
// events (ErrNotFound) and one in an open turn (ErrTurnOpen, a conflict);
// a session whose events were compacted and that has no event after its
// snapshot answers Already, writing nothing. A concurrent write makes it
// fail with a conflict (logport.ErrConflict) and nothing is purged;
// compacting again then folds the new event in. Without a compactor it is
// ErrEraseUnavailable.
func (e *Engine) Compact(ctx context.Context, session string, origin Origin, reason string) (CompactResult, error) {
	return e.compact(ctx, session, origin, reason, nil)
}

// compact is Compact; with expected set, the session must be at that
// sequence (else a conflict, nothing written): retention compacts the
// session it found idle, not one written since.
func (e *Engine) compact(ctx context.Context, session string, origin Origin, reason string, expected *uint64) (CompactResult, error) {
	var res CompactResult
	if err := events.ValidateSessionID(session); err != nil {
		return res, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	x, _ := e.getEraser().(Compactor)
	if x == nil {
		return res, fmt.Errorf("compact %q: this engine has no eraser (compaction purges through a connection allowed to purge the event stream): %w", session, ErrEraseUnavailable)
	}
	if pd, ok := x.(interface{ PurgeDenied() bool }); ok && pd.PurgeDenied() {
		return res, fmt.Errorf("compact %q: the event stream was created with deny_purge (by an older engine), so the events a snapshot replaces could not be purged; create the stream anew without it (see engine erase): %w", session, jetstream.ErrPurgeDenied)
	}
	if origin.Channel == "" {
		return res, fmt.Errorf("%w: compact %q: no channel: the snapshot records the channel that wrote it", ErrInvalid, session)
	}
	if origin.Actor == "" {
		origin.Actor = Anonymous
	}
	unlock, err := e.beginWrite(ctx, session, &origin, "compact") // the snapshot's actor is sealed like any event's
	if err != nil {
		return res, err
	}
	defer unlock()

	// Read up to where the stream's leader says the session is: a replica
	// behind it answers a shorter log, or none ("no events"). Without an
	// answer from the leader the scan goes on; the snapshot's CAS refuses
	// a fold that missed events.
	_, _ = e.raiseToLeader(ctx, session)
	f, err := e.compactionFold(ctx, session)
	if err != nil {
		return res, err
	}
	st, g, first, last, count, lastSnap, forged := f.st, f.g, f.first, f.last, f.count, f.lastSnap, f.forged
	if err := alive(session, st); err != nil {
		return res, err
	}
	if expected != nil && *expected != st.LastSeq {
		return res, &logport.ConflictError{Session: session, Expected: *expected, Actual: st.LastSeq}
	}
	if count == 0 {
		if err := e.erasedID(ctx, session, st); err != nil {
			return res, err
		}
		return res, fmt.Errorf("compact session %q: it has no events: %w", session, ErrNotFound)
	}
	if forged != nil {
		// A compaction purges only history whose fold it checked: a
		// snapshot that does not fold to the state of the events before
		// it (not written by a compaction: a direct publisher's) would
		// launder them away.
		return res, fmt.Errorf("compact %q: the SessionCompacted at sequence %d (by %s/%s) does not fold to the state of the events before it, so it was not written by a compaction of them: nothing is compacted or purged, the log keeps the evidence (see history): %w",
			session, forged.Seq, forged.Envelope.Channel, forged.Envelope.Actor, ErrSnapshotMismatch)
	}
	if lastSnap != nil && lastSnap.Seq == last.Seq {
		// The last event is an applied snapshot: compacted already (it is
		// the subject's only message: nothing to purge), or its purge did
		// not finish (compact again purges).
		var rep jetstream.CompactReport
		if count > 1 {
			rep, err = x.Compact(ctx, session, last.Seq)
		}
		snap := last.Envelope.Payload.(events.SessionCompacted)
		res = CompactResult{Session: session, Seq: last.Seq, EventID: last.Envelope.ID, Already: count == 1, FirstSeq: snap.FirstSeq, LastSeq: snap.LastSeq, Count: snap.Count,
			FirstTime: time.UnixMilli(snap.FirstMs).UTC(), LastTime: time.UnixMilli(snap.LastMs).UTC(), Purged: rep.Purged}
		return res, err
	}
	c := aggregate.Compacted{FirstSeq: first.Seq, LastSeq: last.Seq, Count: count, FirstMs: recordMs(first), LastMs: recordMs(last), Reason: reason}
	snap, err := aggregate.Compaction(st, g, c)
	if errors.Is(err, aggregate.ErrTurnOpen) {
		return res, fmt.Errorf("%w: %w", err, logport.ErrConflict)
	}
	if err != nil {
		return res, fmt.Errorf("compact %q: %w", session, err)
	}
	env := events.New(session, origin.Channel, origin.Actor, snap)
	ar, err := e.appendResend(ctx, session, st.LastSeq, []events.Envelope{env})
	if err != nil {
		e.forget(session)
		return res, fmt.Errorf("compact %q: append the snapshot after sequence %d: %w", session, st.LastSeq, err)
	}
	e.onAppended(1, ar.Duplicate)
	next := st.Clone()
	if err := next.Apply(ar.First, env); err != nil {
		// Not reachable: the snapshot was built from this very state.
		e.forget(session)
		return res, fmt.Errorf("compact %q: the snapshot at %d does not fold: %w", session, ar.First, err)
	}
	e.remember(next)
	e.marks.raise(session, ar.First)
	res = CompactResult{Session: session, Seq: ar.First, EventID: env.ID, FirstSeq: c.FirstSeq, LastSeq: c.LastSeq, Count: c.Count,
		FirstTime: time.UnixMilli(c.FirstMs).UTC(), LastTime: time.UnixMilli(c.LastMs).UTC()}
	rep, err := x.Compact(ctx, session, ar.First)
	res.Purged = rep.Purged
	if err != nil {
		return res, err
	}
	e.forgetAnchors(ctx, session) // they lead to events the purge removed
	return res, nil
}

// compactFold is a session's whole log folded for a compaction: the state
// and grants a snapshot keeps, the first and last records and their
// count, the last applied snapshot, and the first snapshot that does not
// fold to the events before it (a forgery), if any.
type compactFold struct {
	st               aggregate.State
	g                aggregate.Grants
	first, last      logport.Record
	count            uint64
	lastSnap, forged *logport.Record
}

// compactionFold folds session's whole log as the projection does (the
// registry in force at each event), with the grants the snapshot keeps.
func (e *Engine) compactionFold(ctx context.Context, session string) (compactFold, error) {
	f := compactFold{st: aggregate.State{Session: session}}
	st, g := &f.st, &f.g
	err := e.scanSession(ctx, session, 0, func(r logport.Record) error {
		ev, err := e.storedOf(ctx, r)
		if err != nil {
			return err
		}
		before := st.LastSeq
		var pre aggregate.State
		var preG aggregate.Grants
		_, isSnap := ev.Envelope.Payload.(events.SessionCompacted)
		if isSnap && f.count > 0 {
			pre, preG = st.Clone(), *g
		}
		applied := st.ApplyStored(ev) == nil && ev.Seq > before
		if applied {
			g.Observe(ev.Seq, ev.Envelope)
		}
		if isSnap && applied && f.count > 0 && f.forged == nil && !snapshotOf(session, pre, preG, ev, f.first.Seq, f.last.Seq, f.count) {
			rc := r
			f.forged = &rc
		}
		if f.count == 0 {
			f.first = r
		}
		f.last = r
		f.count++
		if _, ok := ev.Envelope.Payload.(events.SessionCompacted); ok && applied && ev.Err == nil {
			rc := r
			f.lastSnap = &rc
		}
		return nil
	})
	if err != nil {
		return f, fmt.Errorf("compact %q: read its events: %w", session, err)
	}
	return f, nil
}

// recordMs is the write time of r in unix milliseconds: the envelope's,
// else the stream's timestamp.
func recordMs(r logport.Record) int64 {
	if r.Err == nil && r.Envelope.TimeMs > 0 {
		return r.Envelope.TimeMs
	}
	return r.Time.UnixMilli()
}

// ErrSnapshotMismatch: a session's log holds a SessionCompacted, with
// events before it, whose state is not what those events fold to:
// compaction refuses to purge them.
var ErrSnapshotMismatch = errors.New("snapshot does not match the events it replaces")

// snapshotOf reports whether snap names the count events firstSeq..lastSeq
// before it and, folded alone, gives the state and grants pre (the fold of
// those events) leads to with snap applied: the check a compaction makes
// before purging the events a snapshot claims to replace.
func snapshotOf(session string, pre aggregate.State, preG aggregate.Grants, snap aggregate.Stored, firstSeq, lastSeq, count uint64) bool {
	if p, ok := snap.Envelope.Payload.(events.SessionCompacted); !ok || p.FirstSeq != firstSeq || p.LastSeq != lastSeq || p.Count != count {
		return false // it does not name the events before it
	}
	want := pre.Clone()
	want.LastSeq, want.Events = snap.Seq, pre.Events+1
	cold := aggregate.State{Session: session}
	var coldG aggregate.Grants
	if cold.ApplyStored(snap) != nil {
		return false
	}
	coldG.Observe(snap.Seq, snap.Envelope)
	return reflect.DeepEqual(cold, want) && reflect.DeepEqual(coldG, preG)
}
