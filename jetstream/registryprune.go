package jetstream

// Pruning the registry history: the contents of old registry
// versions are removed, each version's subject purged through a
// privileged connection (the engine user may not purge), after a
// tombstone was appended to it that keeps the version's place in the
// timeline (the sequences and times its contents were recorded at). The
// caller decides what is kept: the newest versions and every version
// still referenced (RegistryPruner.Prune's keep).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// headerRegistryPruned marks a tombstone: its value lists the marks of
// the pruned contents, "seq:unixnano" separated by commas, oldest first.
const headerRegistryPruned = "Engine-Registry-Pruned"

// maxTombstoneMarks bounds the marks one tombstone keeps (a version
// pruned, recorded again and pruned again many times keeps its newest).
const maxTombstoneMarks = 64

// ErrRegistryPruneDenied is matched by a prune of a registry history
// stream created with deny_purge: JetStream cannot lift that
// setting on a live stream, so its versions are kept for ever.
var ErrRegistryPruneDenied = errors.New("the registry history stream denies purge")

// isTombstone reports whether a history message is a pruned version's
// tombstone.
func isTombstone(h nats.Header) bool { return h != nil && h.Get(headerRegistryPruned) != "" }

// tombstoneMarks are the marks a tombstone's header lists (malformed
// entries are skipped).
func tombstoneMarks(h nats.Header) []RegistryMark {
	var out []RegistryMark
	for _, f := range strings.Split(h.Get(headerRegistryPruned), ",") {
		seq, ns, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		s, err1 := strconv.ParseUint(seq, 10, 64)
		n, err2 := strconv.ParseInt(ns, 10, 64)
		if err1 != nil || err2 != nil || s == 0 {
			continue
		}
		out = append(out, RegistryMark{Seq: s, Time: time.Unix(0, n).UTC(), Pruned: true})
	}
	return out
}

// encodeMarks is the header value of a tombstone keeping marks.
func encodeMarks(marks []RegistryMark) string {
	if len(marks) > maxTombstoneMarks {
		marks = marks[len(marks)-maxTombstoneMarks:]
	}
	parts := make([]string, len(marks))
	for i, m := range marks {
		parts[i] = strconv.FormatUint(m.Seq, 10) + ":" + strconv.FormatInt(m.Time.UnixNano(), 10)
	}
	return strings.Join(parts, ",")
}

// RegistryVersionState is one version of the registry history as a prune
// pass sees it.
type RegistryVersionState struct {
	Version string
	// Marks are the version's recorded contents (and, from a tombstone,
	// the pruned ones), oldest first.
	Marks []RegistryMark
	// LastSeq is the sequence of the version subject's newest message.
	LastSeq uint64
	// Stored reports whether the subject's newest message is a content
	// (the version is not pruned, or was recorded again since).
	Stored bool
	// Leftover reports that contents are stored below the subject's
	// newest message, a tombstone: a prune whose purge failed (the next
	// prune purges them).
	Leftover bool
}

// RegistryPruneReport is what one prune pass did.
type RegistryPruneReport struct {
	// Kept counts the versions whose content is stored after the pass.
	Kept int
	// Pruned lists the versions pruned by this pass, oldest first.
	Pruned []string
	// Remaining counts the versions that should be pruned and were left
	// for the next pass (the pass's bound).
	Remaining int
	// Conflicts counts versions recorded again while the pass pruned
	// them: they are kept.
	Conflicts int
}

// RegistryPruner prunes a registry history through a privileged
// connection. It is safe for concurrent use; two passes at once (two
// engines) are harmless: a tombstone is appended on the condition that
// the version's subject is unchanged, and purges are idempotent.
type RegistryPruner struct {
	h     *RegistryHistory
	admin jetstream.Stream // the history stream on the privileged connection
}

// NewPruner returns a pruner of h that purges through admin, a connection
// allowed to purge the history stream (nil: the log's own connection,
// for a deployment whose engine user may purge it). It answers
// ErrRegistryPruneDenied when the stream was created with deny_purge.
func (h *RegistryHistory) NewPruner(ctx context.Context, admin *nats.Conn) (*RegistryPruner, error) {
	if h.purgeDenied {
		return nil, fmt.Errorf("registry history %s was created with deny_purge (by an older engine) and JetStream cannot lift it: registry versions are kept for ever; to prune them, create the stream anew without deny_purge (back it up, then restore it with deny_purge false): %w", h.name, ErrRegistryPruneDenied)
	}
	js := h.log.js
	if admin != nil {
		var err error
		if js, err = newJetStream(admin, h.log.cfg); err != nil {
			return nil, fmt.Errorf("registry pruner: open jetstream: %w", err)
		}
	}
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	st, err := js.Stream(ctx, h.name)
	if err != nil {
		return nil, fmt.Errorf("registry pruner: look up %s: %w", h.name, err)
	}
	return &RegistryPruner{h: h, admin: st}, nil
}

// Versions returns every version the history holds a message of, the
// version recorded last first (by its newest content's sequence; pruned
// versions after the stored ones), in one headers-only read.
func (h *RegistryHistory) Versions(ctx context.Context) ([]RegistryVersionState, error) {
	byVer := map[string]*RegistryVersionState{}
	var order []string
	err := h.eachHeader(ctx, "registry versions", func(v string, hdr nats.Header, md *jetstream.MsgMetadata) {
		vs := byVer[v]
		if vs == nil {
			vs = &RegistryVersionState{Version: v}
			byVer[v] = vs
			order = append(order, v)
		}
		vs.LastSeq = md.Sequence.Stream
		if isTombstone(hdr) {
			vs.Marks = append(vs.Marks, tombstoneMarks(hdr)...)
			vs.Leftover = vs.Leftover || vs.Stored
			vs.Stored = false
		} else {
			vs.Stored = true
			vs.Marks = append(vs.Marks, RegistryMark{Version: v, Time: md.Timestamp, Seq: md.Sequence.Stream})
		}
	})
	if err != nil || len(order) == 0 {
		return nil, err // an empty history: no versions
	}
	out := make([]RegistryVersionState, 0, len(order))
	for _, v := range order {
		vs := byVer[v]
		slices.SortStableFunc(vs.Marks, func(a, b RegistryMark) int { return cmp.Compare(a.Seq, b.Seq) })
		vs.Marks = slices.CompactFunc(vs.Marks, func(a, b RegistryMark) bool { return a.Seq == b.Seq })
		for i := range vs.Marks {
			vs.Marks[i].Version = v
		}
		out = append(out, *vs)
	}
	newest := func(vs RegistryVersionState) uint64 {
		var n uint64
		for _, m := range vs.Marks {
			if !m.Pruned {
				n = max(n, m.Seq)
			}
		}
		return n
	}
	slices.SortStableFunc(out, func(a, b RegistryVersionState) int {
		na, nb := newest(a), newest(b)
		switch {
		case na > nb:
			return -1
		case na < nb:
			return 1
		}
		return 0
	})
	return out, nil
}

// Prune removes the content of every stored version but the newest
// keepNewest (by the sequence their newest content was recorded at) and
// those keep reports true for, at most max versions a pass (0: no
// bound), oldest first. Each pruned version's subject gets a tombstone
// (appended on the log's connection, on the condition that the subject
// is unchanged since it was read) and is then purged below it through
// the privileged connection. keepNewest 0 keeps every version.
func (p *RegistryPruner) Prune(ctx context.Context, keepNewest int, keep func(version string) bool, maxPass int) (RegistryPruneReport, error) {
	var rep RegistryPruneReport
	vs, err := p.h.Versions(ctx)
	if err != nil {
		return rep, err
	}
	var stored, doomed []RegistryVersionState
	for _, v := range vs {
		if v.Stored {
			stored = append(stored, v)
		}
	}
	rep.Kept = len(stored)
	for i, v := range stored {
		if keepNewest <= 0 || i < keepNewest || (keep != nil && keep(v.Version)) {
			continue
		}
		doomed = append(doomed, v)
	}
	slices.Reverse(doomed) // oldest first
	if maxPass > 0 && len(doomed) > maxPass {
		rep.Remaining = len(doomed) - maxPass
		doomed = doomed[:maxPass]
	}
	for _, v := range doomed {
		switch err := p.prune(ctx, v); {
		case err == nil:
			rep.Pruned = append(rep.Pruned, v.Version)
			rep.Kept--
		case errors.Is(err, errRecordedAgain):
			rep.Conflicts++
		default:
			return rep, err
		}
	}
	// Contents left below a tombstone by a purge that failed.
	for _, v := range vs {
		if v.Leftover && !v.Stored {
			if err := p.purgeBelow(ctx, v.Version, v.LastSeq); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// errRecordedAgain: the version's subject changed since the pass read it.
var errRecordedAgain = errors.New("registry version recorded again")

// prune appends v's tombstone and purges its subject below it.
func (p *RegistryPruner) prune(ctx context.Context, v RegistryVersionState) error {
	ctx, cancel := p.h.log.withTimeout(ctx)
	defer cancel()
	subj := p.h.subject(v.Version)
	msg := nats.NewMsg(subj)
	msg.Header.Set(headerRegistryVersion, v.Version)
	msg.Header.Set(headerRegistryPruned, encodeMarks(v.Marks))
	msg.Header.Set(headerMsgID, fmt.Sprintf("registry-pruned-%s-%d", subj[len(p.h.subjBase):], v.LastSeq))
	ack, err := p.h.log.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(p.h.name), jetstream.WithExpectLastSequencePerSubject(v.LastSeq))
	if err != nil {
		if IsCASConflict(err) {
			return fmt.Errorf("prune registry %q: %w", v.Version, errRecordedAgain)
		}
		return fmt.Errorf("prune registry %q: append the tombstone: %w", v.Version, err)
	}
	return p.purgeBelow(ctx, v.Version, ack.Sequence)
}

// purgeBelow purges version's subject below sequence below (its
// tombstone's) through the privileged connection.
func (p *RegistryPruner) purgeBelow(ctx context.Context, version string, below uint64) error {
	ctx, cancel := p.h.log.withTimeout(ctx)
	defer cancel()
	subj := p.h.subject(version)
	if err := p.admin.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(below)); err != nil {
		if isPurgeDenied(err) {
			return fmt.Errorf("prune registry %q: the prune connection may not purge stream %s: give engine serve a user allowed $JS.API.STREAM.PURGE.%s (--nats-erase-user; deploy/accounts.conf: eraser): %w: %w", version, p.h.name, p.h.name, ErrRegistryPruneDenied, err)
		}
		return fmt.Errorf("prune registry %q: purge %s: %w (the tombstone is written; the next pass purges again)", version, subj, err)
	}
	return nil
}

// LastSeq is the history stream's last sequence: it grows with every
// version recorded (and every tombstone), so a caller polling it learns
// that the history changed.
func (h *RegistryHistory) LastSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	info, err := h.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("registry history %s: %w", h.name, err)
	}
	return info.State.LastSeq, nil
}
