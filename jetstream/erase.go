package jetstream

// Erasing a session (#30): its subject is purged from the event stream by
// a privileged connection (the embedded server's admin, or a user the
// deployment allows to purge the event stream; never a channel's), and an
// audit record naming the session, the time and the purged range, and
// nothing else, is appended to a separate stream.

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

	"github.com/toolintent/engine/events"
)

// ErrPurgeDenied is matched by an erase on an event stream created with
// deny_purge (before #30): JetStream cannot lift that setting on a live
// stream, so no session of it can be erased.
var ErrPurgeDenied = errors.New("the event stream denies purge")

// AuditStreamName is the audit stream of a prefix: <PREFIX>_AUDIT.
func AuditStreamName(prefix string) string { return strings.ToUpper(prefix) + "_AUDIT" }

// AuditRecord is one record of the audit stream: an erase of Session at
// Time, which purged Purged events between FirstSeq and LastSeq of Stream.
// It holds no actor, channel, reason or event content.
type AuditRecord struct {
	Kind     string    `json:"kind"` // "erase"
	Session  string    `json:"session"`
	Stream   string    `json:"stream"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Purged   uint64    `json:"purged"`
	Time     time.Time `json:"time"`
}

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

// Erased reports whether the audit stream records an erase of session.
// A positive answer is cached: an erase is for good.
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
		if info, err := x.audit.Info(ctx); err == nil {
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
	_, err := x.audit.GetLastMsgForSubject(ctx, x.AuditSubject(session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("erased %q: read audit stream: %w", session, err)
	}
	x.remember(session)
	return true, nil
}

func (x *Eraser) remember(session string) {
	x.mu.Lock()
	x.erased[session] = true
	x.emptyUntil, x.nonEmpty = time.Time{}, true
	x.mu.Unlock()
}

// Erase purges every event of session from the event stream and appends
// the audit record first (so no purge goes unaudited; a failed purge is
// retried by erasing again). A session whose subject holds nothing is
// already erased: its report has Purged 0 and no new record, unless none
// exists. The bytes stay on disk until JetStream compacts the blocks.
func (x *Eraser) Erase(ctx context.Context, session string) (EraseReport, error) {
	var rep EraseReport
	if err := events.ValidateSessionID(session); err != nil {
		return rep, fmt.Errorf("erase %q: %w", session, err)
	}
	l := x.log
	if l.purgeDenied {
		return rep, fmt.Errorf("erase %q: stream %s was created with deny_purge (by an older engine) and JetStream cannot lift it: create the stream anew without deny_purge (back it up, then restore it with deny_purge false, e.g. nats stream backup/restore with an edited config) to erase sessions: %w", session, l.name, ErrPurgeDenied)
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	subj := l.Subject(session)
	stream, err := x.js.Stream(ctx, l.name)
	if err != nil {
		return rep, fmt.Errorf("erase %q: look up stream %s: %w", session, l.name, err)
	}
	// The first and last events from the stream's leader: a replica
	// behind it answers "none" for a session written since, and the erase
	// would then purge nothing and report the session erased.
	first, err := l.leaderMsg(ctx, l.name, leaderGetRequest{Seq: 1, NextBy: subj})
	if errors.Is(err, ErrNotStored) {
		erased, err := x.Erased(ctx, session)
		if err != nil || erased {
			return rep, err
		}
	} else if err != nil {
		return rep, fmt.Errorf("erase %q: first event: %w", session, err)
	} else {
		rep.FirstSeq = first.seq
		last, err := l.leaderMsg(ctx, l.name, leaderGetRequest{LastBy: subj})
		if err != nil {
			return rep, fmt.Errorf("erase %q: last event: %w", session, err)
		}
		rep.LastSeq = last.seq
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			return rep, fmt.Errorf("erase %q: count events: %w", session, err)
		}
		rep.Purged = info.State.Subjects[subj]
	}
	rec := AuditRecord{Kind: "erase", Session: session, Stream: l.name, FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq, Purged: rep.Purged, Time: time.Now().UTC().Truncate(time.Millisecond)}
	data, _ := json.Marshal(rec)
	ack, err := x.js.Publish(ctx, x.AuditSubject(session), data,
		jetstream.WithMsgID(fmt.Sprintf("erase-%s-%d-%d", session, rep.FirstSeq, rep.LastSeq)), jetstream.WithExpectStream(x.AuditStream()))
	if err != nil {
		return rep, fmt.Errorf("erase %q: write the audit record: %w", session, err)
	}
	rep.AuditSeq = ack.Sequence
	x.remember(session)
	if rep.Purged == 0 && rep.LastSeq == 0 {
		return rep, nil
	}
	if x.BeforePurge != nil {
		if err := x.BeforePurge(rep); err != nil {
			return rep, fmt.Errorf("erase %q: before the purge: %w (the audit record is written; erase again)", session, err)
		}
	}
	err = stream.Purge(ctx, jetstream.WithPurgeSubject(subj))
	if x.AfterPurge != nil {
		x.AfterPurge(rep, err)
	}
	if err != nil {
		if isPurgeDenied(err) {
			return rep, fmt.Errorf("erase %q: the erase connection may not purge stream %s: give engine serve a user allowed $JS.API.STREAM.PURGE.%s (--nats-erase-user; deploy/accounts.conf: eraser): %w: %w", session, l.name, l.name, ErrPurgeDenied, err)
		}
		return rep, fmt.Errorf("erase %q: purge %s: %w (the audit record is written; erase again)", session, subj, err)
	}
	return rep, nil
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
// records (#30), in record order; none when the stream does not exist.
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
	subj := l.cfg.Prefix + ".audit.>" // erases and compactions (#30)
	for seq := uint64(1); ; {
		var data []byte
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
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
		if json.Unmarshal(data, &rec) == nil && rec.LastSeq >= rec.FirstSeq && rec.FirstSeq > 0 {
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
