package jetstream

// Compacting a session: once the engine has appended a
// SessionCompacted (with the expected last subject sequence, so it covers
// exactly the events before it), the events it replaces are purged from
// the session's subject by the eraser's privileged connection, below the
// snapshot's sequence only: an event appended after the snapshot is never
// touched. An audit record of kind "compact" names the session, the time
// and the replaced range (no personal data), and is written first, so that
// a projection that had not read the purged events yet reads the gap as
// compacted, not lost (ErasedRanges).
//
// Why not a Nats-Rollup: sub publish: a rollup needs allow_rollup_hdrs on
// the event stream, and then every user that may publish an event subject
// (a channel) could wipe a session's history with one header, which the
// stream's permissions deny today (purge is for the admin path only).
// Appending the snapshot with a CAS and purging below it through the
// admin path keeps that, and is as safe: a crash between the two leaves
// the history and the snapshot, which fold to the same state, and
// compacting again purges.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/events"
)

// ErrNotSnapshot means the sequence given to Compact does not hold the
// session's SessionCompacted.
var ErrNotSnapshot = errors.New("not a snapshot of the session")

// AuditCompact is the Kind of the audit record of a compaction.
const AuditCompact = "compact"

// CompactReport is the outcome of Eraser.Compact.
type CompactReport struct {
	// FirstSeq and LastSeq bound the events the snapshot replaces, and
	// Count counts them, as the snapshot says.
	FirstSeq, LastSeq, Count uint64
	// Purged counts the messages purged now (0: they were purged before).
	Purged uint64
	// AuditSeq is the audit record's sequence (0 when nothing was left to
	// purge).
	AuditSeq uint64
}

// PurgeDenied reports an event stream created with deny_purge:
// nothing of it can be compacted (nor erased), so a compaction is
// refused before it appends its snapshot.
func (x *Eraser) PurgeDenied() bool { return x.log.purgeDenied }

// AuditCompactSubject is the subject of session's compaction records.
func (x *Eraser) AuditCompactSubject(session string) string {
	return x.log.cfg.Prefix + ".audit." + AuditCompact + "." + session
}

// Compact purges the events of session below snapshot, the stream
// sequence of the session's SessionCompacted that replaces them, after
// writing the audit record. Compacting again after a failed purge
// purges; after a done one it purges nothing (Purged 0).
func (x *Eraser) Compact(ctx context.Context, session string, snapshot uint64) (CompactReport, error) {
	var rep CompactReport
	l := x.log
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	stream, err := x.purgeStream(ctx, "compact", session, "(by an older engine) and JetStream cannot lift it")
	if err != nil {
		return rep, err
	}
	subj := l.Subject(session)
	// The snapshot and the session's first event from the stream's
	// leader: the snapshot was appended just before, and a replica behind
	// the leader answers a direct get for it with "not found".
	m, err := l.leaderMsg(ctx, l.name, leaderGetRequest{Seq: snapshot})
	if err != nil && !errors.Is(err, ErrNotStored) {
		return rep, fmt.Errorf("compact %q: read the snapshot at %d: %w", session, snapshot, err)
	}
	env, derr := events.Decode(m.data)
	snap, ok := env.Payload.(events.SessionCompacted)
	if err != nil || m.seq != snapshot || m.subject != subj || derr != nil || !ok || env.Session != session || snap.LastSeq >= snapshot {
		return rep, fmt.Errorf("compact %q: sequence %d holds no SessionCompacted of the session: %w", session, snapshot, ErrNotSnapshot)
	}
	rep.FirstSeq, rep.LastSeq, rep.Count = snap.FirstSeq, snap.LastSeq, snap.Count
	first, err := l.leaderMsg(ctx, l.name, leaderGetRequest{Seq: 1, NextBy: subj})
	if err != nil {
		return rep, fmt.Errorf("compact %q: first event: %w", session, err)
	}
	if first.seq >= snapshot {
		return rep, nil // purged before
	}
	rec := AuditRecord{Kind: AuditCompact, Session: session, Stream: l.name, FirstSeq: snap.FirstSeq, LastSeq: snap.LastSeq, Purged: snap.Count,
		Time: time.Now().UTC().Truncate(time.Millisecond)}
	data, _ := json.Marshal(rec)
	auditSeq, err := x.publishAudit(ctx, x.AuditCompactSubject(session), data, fmt.Sprintf("compact-%s-%d", session, snapshot))
	if err != nil {
		return rep, fmt.Errorf("compact %q: write the audit record: %w", session, err)
	}
	rep.AuditSeq = auditSeq
	er := EraseReport{FirstSeq: first.seq, LastSeq: snapshot - 1, Purged: snap.Count, AuditSeq: auditSeq}
	refused, err := x.hookedPurge(ctx, stream, subj, snapshot, er)
	if refused != nil {
		return rep, fmt.Errorf("compact %q: before the purge: %w (the snapshot and the audit record are written; compact again)", session, refused)
	}
	if err != nil {
		if isPurgeDenied(err) {
			return rep, fmt.Errorf("compact %q: the erase connection may not purge stream %s: %w: %w", session, l.name, ErrPurgeDenied, err)
		}
		return rep, fmt.Errorf("compact %q: purge %s below %d: %w (the snapshot is written; compact again)", session, subj, snapshot, err)
	}
	rep.Purged = snap.Count
	return rep, nil
}
