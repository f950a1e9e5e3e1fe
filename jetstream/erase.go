package jetstream

// Erasing a session: its events before the SessionDeleted that closed it
// are purged from the event stream by a privileged connection (the
// embedded server's admin, or a user the deployment allows to purge the
// event stream; never a channel's), and audit records naming the
// session, the time and the purged range, and nothing else, are appended
// to a separate stream that no channel may write. The SessionDeleted
// stays as the id's tombstone, so that every reader of the log, a rebuild
// included, folds the id as deleted for good.
//
// An erase is a resumable operation recorded in the audit stream, one
// record per step on the session's audit subject: "begun" (the intent,
// before the delete), the range (before the purge), "done" (after it),
// or "cancelled" (a conditional erase whose session was written in
// between). A session whose last record is neither done nor cancelled is
// an erase a crash interrupted: Unfinished lists them and any engine
// finishes them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/events"
)

// ErrPurgeDenied is matched by an erase on an event stream created with
// deny_purge: JetStream cannot lift that setting on a live
// stream, so no session of it can be erased.
var ErrPurgeDenied = errors.New("the event stream denies purge")

// AuditStreamName is the audit stream of a prefix: <PREFIX>_AUDIT.
func AuditStreamName(prefix string) string { return strings.ToUpper(prefix) + "_AUDIT" }

// AuditRecord is one record of the audit stream: a step of an erase (or a
// compaction) of Session at Time. The range record says it purges Purged
// events between FirstSeq and LastSeq of Stream. It holds no actor,
// channel, reason or event content.
type AuditRecord struct {
	Kind     string    `json:"kind"` // "erase" or "compact"
	Session  string    `json:"session"`
	Stream   string    `json:"stream"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Purged   uint64    `json:"purged"`
	Time     time.Time `json:"time"`
	// Phase is the erase's step: PhaseBegun, "" (the range, written
	// before the purge), PhaseDone or PhaseCancelled.
	Phase string `json:"phase,omitempty"`
	// ExpectedSeq, on a begun record, is the sequence the session must
	// still be at for the erase to go on (0: erase whatever it holds).
	ExpectedSeq uint64 `json:"expected_seq,omitempty"`
}

// The phases of an erase's audit records.
const (
	PhaseBegun     = "begun"
	PhaseDone      = "done"
	PhaseCancelled = "cancelled"
)

// EraseReport is the outcome of Eraser.Erase.
type EraseReport struct {
	// FirstSeq and LastSeq bound the purged events; Purged counts them
	// (0 when the subject held nothing: erased before).
	FirstSeq, LastSeq, Purged uint64
	// AuditSeq is the audit record's sequence in the audit stream (0 when
	// nothing was purged and an earlier record exists).
	AuditSeq uint64
}

// Eraser purges sessions of a log through a privileged connection and
// keeps their audit. It is safe for concurrent use.
type Eraser struct {
	// BeforePurge, when set, is called with the report (the range and
	// count about to be purged) after the audit record is written and
	// before the purge; its error stops the erase. serve lowers the data
	// directory's watermark and records the range as an accepted loss
	// there, so the purge never reads as data loss at restart.
	BeforePurge func(EraseReport) error
	// AfterPurge, when set, is called after the purge (err its outcome)
	// whenever BeforePurge was called and succeeded.
	AfterPurge func(rep EraseReport, err error)

	log   *Log
	js    jetstream.JetStream // on the privileged connection
	audit jetstream.Stream    // on the privileged connection
	subj  string              // "<prefix>.audit.erase."

	mu         sync.Mutex
	erased     map[string]bool // sessions known erased (an erase is for good)
	emptyUntil time.Time       // the audit stream held no record when last asked, until then
	nonEmpty   bool            // the audit stream holds a record (for good: it denies delete and purge)
}

// emptyFor is how long Erased trusts an empty audit stream before asking
// again: the engine's first write to a new session then costs no audit
// look-up while nothing was ever erased. An erase on another engine within
// that time is answered by the session's view, which the erase left
// deleted (it waits for the views to fold the delete).
const emptyFor = time.Second

// NewEraser opens (creating it on first use) the audit stream and returns
// an eraser of l's sessions that purges through admin, a connection
// allowed to purge l's event stream (nil: l's own connection, for a
// deployment whose engine user may purge it).
func (l *Log) NewEraser(ctx context.Context, admin *nats.Conn) (*Eraser, error) {
	js := l.js
	if admin != nil {
		var err error
		if js, err = newJetStream(admin, l.cfg); err != nil {
			return nil, fmt.Errorf("eraser: open jetstream: %w", err)
		}
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	name := AuditStreamName(l.cfg.Prefix)
	sc := jetstream.StreamConfig{
		Name:        name,
		Description: "audit of erased sessions: session, time and purged range, no personal data",
		Subjects:    []string{l.cfg.Prefix + ".audit.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    l.cfg.Replicas,
		Discard:     jetstream.DiscardOld,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
	}
	if l.cfg.MemoryStorage {
		sc.Storage = jetstream.MemoryStorage
	}
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another engine made it
			st, err = js.Stream(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("eraser: open audit stream %s: %w", name, err)
	}
	return &Eraser{log: l, js: js, audit: st, subj: l.cfg.Prefix + ".audit.erase.", erased: make(map[string]bool)}, nil
}

// AuditStream is the audit stream's name.
func (x *Eraser) AuditStream() string { return x.audit.CachedInfo().Config.Name }

// AuditSubject is the subject of session's audit records.
func (x *Eraser) AuditSubject(session string) string { return x.subj + session }

// Erased reports whether the audit stream records an erase of session
// that reached its purge (its range or its end; not one only begun, nor
// one cancelled). A positive answer is cached: an erase is for good.
func (x *Eraser) Erased(ctx context.Context, session string) (bool, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return false, fmt.Errorf("erased %q: %w", session, err)
	}
	x.mu.Lock()
	known := x.erased[session]
	x.mu.Unlock()
	if known {
		return true, nil
	}
	ctx, cancel := x.log.withTimeout(ctx)
	defer cancel()
	x.mu.Lock()
	empty, nonEmpty := time.Now().Before(x.emptyUntil), x.nonEmpty
	x.mu.Unlock()
	if empty {
		return false, nil
	}
	if !nonEmpty {
		info, err := ask(ctx, x.log, func(ctx context.Context) (*jetstream.StreamInfo, error) {
			return x.audit.Info(ctx)
		})
		if err == nil {
			x.mu.Lock()
			if info.State.Msgs == 0 {
				x.emptyUntil = time.Now().Add(emptyFor)
			} else {
				x.nonEmpty = true
			}
			x.mu.Unlock()
			if info.State.Msgs == 0 {
				return false, nil
			}
		}
	}
	rec, ok, err := x.lastRecord(ctx, session)
	if err != nil {
		return false, fmt.Errorf("erased %q: %w", session, err)
	}
	if !ok || rec.Phase == PhaseCancelled || rec.Phase == PhaseBegun {
		return false, nil
	}
	x.remember(session)
	return true, nil
}

// lastRecord reads the last audit record of session's erase, asking
// again after a reconnect or a second without an answer (a replica that
// died or went silent never answers).
func (x *Eraser) lastRecord(ctx context.Context, session string) (AuditRecord, bool, error) {
	var rec AuditRecord
	m, err := ask(ctx, x.log, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return x.audit.GetLastMsgForSubject(ctx, x.AuditSubject(session))
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("read the audit stream: %w", err)
	}
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		return rec, false, fmt.Errorf("read the audit stream: record %d of %s: %w", m.Sequence, session, err)
	}
	return rec, true, nil
}

func (x *Eraser) remember(session string) {
	x.mu.Lock()
	x.erased[session] = true
	x.emptyUntil, x.nonEmpty = time.Time{}, true
	x.mu.Unlock()
}

func (x *Eraser) forgetErased(session string) {
	x.mu.Lock()
	delete(x.erased, session)
	x.mu.Unlock()
}

// record appends rec (its kind, stream and time filled in) to session's
// audit subject, with msgID as its message id ("": one of its own).
func (x *Eraser) record(ctx context.Context, session string, rec AuditRecord, msgID string) (uint64, error) {
	rec.Kind, rec.Session, rec.Stream = "erase", session, x.log.name
	rec.Time = time.Now().UTC().Truncate(time.Millisecond)
	data, _ := json.Marshal(rec)
	if msgID == "" {
		msgID = "audit-" + ulid.Make().String()
	}
	return x.publishAudit(ctx, x.AuditSubject(session), data, msgID)
}

// publishAudit appends data to the audit stream on subj, sent again
// (deduplicated by msgID) after a reconnect or a second without an ack.
func (x *Eraser) publishAudit(ctx context.Context, subj string, data []byte, msgID string) (uint64, error) {
	ack, err := ask(ctx, x.log, func(ctx context.Context) (*jetstream.PubAck, error) {
		return x.js.Publish(ctx, subj, data, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(x.AuditStream()))
	})
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// purge purges subj below seq from stream, asked again after a reconnect
// or a second without an answer (a purge below a sequence is the same
// purge twice).
func (x *Eraser) purge(ctx context.Context, stream jetstream.Stream, subj string, seq uint64) error {
	_, err := ask(ctx, x.log, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(seq))
	})
	return err
}

// hookedPurge purges subj below seq between the BeforePurge and
// AfterPurge hooks, which see rep; refused is BeforePurge's error, when it
// refused and nothing was purged.
func (x *Eraser) hookedPurge(ctx context.Context, stream jetstream.Stream, subj string, seq uint64, rep EraseReport) (refused, err error) {
	if x.BeforePurge != nil {
		if err := x.BeforePurge(rep); err != nil {
			return err, nil
		}
	}
	err = x.purge(ctx, stream, subj, seq)
	if x.AfterPurge != nil {
		x.AfterPurge(rep, err)
	}
	return nil, err
}

// Begin records the intent to erase session, before anything of it is
// deleted or purged: from then on, until Erase or Cancel records its end,
// Unfinished lists it, and any engine may finish it. expected, when not
// 0, is the sequence the session must still be at when its delete is
// appended (a retention's examined sequence). A session whose last record
// is begun already is not recorded again.
func (x *Eraser) Begin(ctx context.Context, session string, expected uint64) error {
	if err := x.log.checkSession(session); err != nil {
		return fmt.Errorf("erase %q: %w", session, err)
	}
	ctx, cancel := x.log.withTimeout(ctx)
	defer cancel()
	if rec, ok, err := x.lastRecord(ctx, session); err != nil {
		return fmt.Errorf("erase %q: %w", session, err)
	} else if ok && rec.Phase == PhaseBegun && rec.ExpectedSeq == expected {
		return nil
	}
	if _, err := x.record(ctx, session, AuditRecord{Phase: PhaseBegun, ExpectedSeq: expected}, ""); err != nil {
		return fmt.Errorf("erase %q: record its start in the audit stream: %w", session, err)
	}
	return nil
}

// Cancel records that the erase of session begun with an expected
// sequence does not go on: the session moved past it.
func (x *Eraser) Cancel(ctx context.Context, session string) error {
	if err := x.log.checkSession(session); err != nil {
		return fmt.Errorf("cancel the erase of %q: %w", session, err)
	}
	ctx, cancel := x.log.withTimeout(ctx)
	defer cancel()
	if _, err := x.record(ctx, session, AuditRecord{Phase: PhaseCancelled}, ""); err != nil {
		return fmt.Errorf("erase %q: record its cancellation in the audit stream: %w", session, err)
	}
	x.forgetErased(session)
	return nil
}

// purgeStream looks up the event stream for op ("erase", "compact") on
// session, once the session's id is valid and the stream may be purged
// (denied says why it may not).
func (x *Eraser) purgeStream(ctx context.Context, op, session, denied string) (jetstream.Stream, error) {
	if err := x.log.checkSession(session); err != nil {
		return nil, fmt.Errorf("%s %q: %w", op, session, err)
	}
	l := x.log
	if l.purgeDenied {
		return nil, fmt.Errorf("%s %q: stream %s was created with deny_purge %s: %w", op, session, l.name, denied, ErrPurgeDenied)
	}
	stream, err := ask(ctx, l, func(ctx context.Context) (jetstream.Stream, error) {
		return x.js.Stream(ctx, l.name)
	})
	if err != nil {
		return nil, fmt.Errorf("%s %q: look up stream %s: %w", op, session, l.name, err)
	}
	return stream, nil
}

// Erase purges every event of session before deleted, the sequence of the
// SessionDeleted that closed it, which stays as the id's tombstone (0:
// the session holds no event to keep, nothing is purged), and records the
// erase's range before the purge and its end after it. The purged range
// is what the subject holds below deleted: nothing appended after the
// delete is touched. Erasing again after a failure finishes the erase; a
// finished one purges nothing (Purged 0). The bytes stay on disk until
// the server compacts the blocks.
func (x *Eraser) Erase(ctx context.Context, session string, deleted uint64) (EraseReport, error) {
	var rep EraseReport
	l := x.log
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	stream, err := x.purgeStream(ctx, "erase", session, "and JetStream cannot lift it: create the stream anew without deny_purge (back it up, then restore it with deny_purge false, e.g. nats stream backup/restore with an edited config) to erase sessions")
	if err != nil {
		return rep, err
	}
	subj := l.Subject(session)
	// The first event from the stream's leader: a replica behind it
	// answers "none" for a session written since, and the erase would
	// then purge nothing and report the session erased.
	first, err := l.leaderMsg(ctx, l.name, leaderGetRequest{Seq: 1, NextBy: subj})
	switch {
	case errors.Is(err, ErrNotStored):
	case err != nil:
		return rep, fmt.Errorf("erase %q: first event: %w", session, err)
	case deleted > 0 && first.seq < deleted:
		rep.FirstSeq, rep.LastSeq = first.seq, deleted-1
		n, err := x.countBelow(ctx, stream, session, deleted)
		if err != nil {
			return rep, err
		}
		rep.Purged = n
	}
	if rep.Purged > 0 {
		seq, err := x.record(ctx, session, AuditRecord{FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq, Purged: rep.Purged},
			fmt.Sprintf("erase-%s-%d-%d", session, rep.FirstSeq, rep.LastSeq))
		if err != nil {
			return rep, fmt.Errorf("erase %q: write the audit record: %w", session, err)
		}
		rep.AuditSeq = seq
		x.remember(session)
		refused, err := x.hookedPurge(ctx, stream, subj, deleted, rep)
		if refused != nil {
			return rep, fmt.Errorf("erase %q: before the purge: %w (the audit record is written; erase again)", session, refused)
		}
		if err != nil {
			if isPurgeDenied(err) {
				return rep, fmt.Errorf("erase %q: the erase connection may not purge stream %s: give engine serve a user allowed $JS.API.STREAM.PURGE.%s (--nats-erase-user; deploy/accounts.conf: eraser): %w: %w", session, l.name, l.name, ErrPurgeDenied, err)
			}
			return rep, fmt.Errorf("erase %q: purge %s below %d: %w (the audit record is written; erase again)", session, subj, deleted, err)
		}
	}
	if rec, ok, err := x.lastRecord(ctx, session); err != nil {
		return rep, fmt.Errorf("erase %q: %w", session, err)
	} else if ok && rec.Phase == PhaseDone {
		return rep, nil
	}
	seq, err := x.record(ctx, session, AuditRecord{Phase: PhaseDone, FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq, Purged: rep.Purged}, "")
	if err != nil {
		return rep, fmt.Errorf("erase %q: record its end in the audit stream: %w (the events are purged; erase again)", session, err)
	}
	if rep.AuditSeq == 0 {
		rep.AuditSeq = seq
	}
	x.remember(session)
	return rep, nil
}

// countBelow counts the messages of session's subject below seq: all of
// them but those at or after it (the SessionDeleted at seq, and what a
// direct publisher appended after it, which the fold refuses).
func (x *Eraser) countBelow(ctx context.Context, stream jetstream.Stream, session string, seq uint64) (uint64, error) {
	l := x.log
	subj := l.Subject(session)
	info, err := ask(ctx, l, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return stream.Info(ctx, jetstream.WithSubjectFilter(subj))
	})
	if err != nil {
		return 0, fmt.Errorf("erase %q: count events: %w", session, err)
	}
	n := info.State.Subjects[subj]
	for at := seq; n > 0; n-- {
		m, err := l.leaderMsg(ctx, l.name, leaderGetRequest{Seq: at, NextBy: subj})
		if errors.Is(err, ErrNotStored) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("erase %q: count events after %d: %w", session, at, err)
		}
		at = m.seq + 1
	}
	return n, nil
}

// UnfinishedErase is an erase whose audit records stop before its end.
type UnfinishedErase struct {
	Session string
	// ExpectedSeq is the begun record's condition (0: none).
	ExpectedSeq uint64
	// Since is the time of its last record.
	Since time.Time
}

// Unfinished reads the erase records of the audit stream after sequence
// after (0: from the start) and returns, per session, the last record of
// each session among them, and the stream sequence it read up to. A
// caller that keeps the records it was given and passes the returned
// sequence next time reads each record once.
func (x *Eraser) Unfinished(ctx context.Context, after uint64) (map[string]AuditRecord, uint64, error) {
	ctx, cancel := x.log.withTimeout(ctx)
	defer cancel()
	out := map[string]AuditRecord{}
	subj := x.subj + "*"
	for seq := after + 1; ; {
		m, err := ask(ctx, x.log, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return x.audit.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, seq - 1, nil
		}
		if err != nil {
			return nil, after, fmt.Errorf("unfinished erases: read the audit stream after %d: %w", seq, err)
		}
		var rec AuditRecord
		if json.Unmarshal(m.Data, &rec) == nil && rec.Session != "" {
			out[rec.Session] = rec
		}
		seq = m.Sequence + 1
	}
}

// jsErrPurgeFailed is JetStream's error code of a refused purge (10110:
// "stream purge not permitted" on a deny_purge stream).
const jsErrPurgeFailed jetstream.ErrorCode = 10110

// isPurgeDenied reports a purge refused by the stream's deny_purge, or by
// the connection's permissions.
func isPurgeDenied(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrPurgeFailed {
		return true
	}
	return strings.Contains(err.Error(), "Permissions Violation") || strings.Contains(err.Error(), "purge not permitted")
}

// SeqRange is a run of stream sequences, First to Last inclusive.
type SeqRange struct{ First, Last uint64 }

// ErasedRanges returns the sequence range of every erase or compaction the audit stream
// records, in record order; none when the stream does not exist.
// A sequence missing from the event stream inside one of them was purged
// by an erase, not lost.
func (l *Log) ErasedRanges(ctx context.Context) ([]SeqRange, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	st, err := l.js.Stream(ctx, AuditStreamName(l.cfg.Prefix))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("erased ranges: %w", err)
	}
	var out []SeqRange
	subj := l.cfg.Prefix + ".audit.>" // erases and compactions
	for seq := uint64(1); ; {
		var data []byte
		m, err := ask(ctx, l, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// A replica behind the audit stream's leader ends the list
			// early, and a reader would call the sequences of the records
			// it missed lost (a damaged log) rather than erased: the
			// leader says whether this is the end, and answers each
			// record the replica lacks (one JetStream API request a call
			// when the replica is current; the records are direct gets).
			lm, lerr := l.leaderMsg(ctx, st.CachedInfo().Config.Name, leaderGetRequest{Seq: seq, NextBy: subj})
			if errors.Is(lerr, ErrNotStored) {
				return out, nil
			}
			if lerr != nil {
				return nil, fmt.Errorf("erased ranges: read audit record after %d from the audit stream's leader: %w", seq, lerr)
			}
			data, seq = lm.data, lm.seq
		} else if err != nil {
			return nil, fmt.Errorf("erased ranges: read audit record after %d: %w", seq, err)
		} else {
			data, seq = m.Data, m.Sequence
		}
		var rec AuditRecord
		// The audit stream is shared by the partitions of a layout: only
		// this stream's records explain its missing sequences.
		if json.Unmarshal(data, &rec) == nil && (rec.Stream == l.name || (rec.Stream == "" && l.cfg.Partitions <= 1)) &&
			rec.Phase == "" && rec.LastSeq >= rec.FirstSeq && rec.FirstSeq > 0 {
			out = append(out, SeqRange{First: rec.FirstSeq, Last: rec.LastSeq})
		}
		seq++
	}
}

// Covered reports whether every sequence of [from, to] missing from have
// (sorted) lies in one of rs.
func Covered(rs []SeqRange, from, to uint64, have []uint64) bool {
	i := 0
	for seq := from; seq <= to && seq >= from; seq++ {
		for i < len(have) && have[i] < seq {
			i++
		}
		if i < len(have) && have[i] == seq {
			continue
		}
		in := false
		for _, r := range rs {
			if r.First <= seq && seq <= r.Last {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return true
}
