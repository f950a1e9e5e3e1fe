// Package partition spreads an engine's sessions over the event streams of
// a partitioned layout. It routes every session-keyed call of the
// engine's ports (service.Log, service.Views, service.Eraser and their
// optional capabilities) to the partition events.Partition names for the
// session, so one service.Engine serves K streams, each with its own
// leader, views and projection runner, as it serves one.
//
// A session lives in one partition, so everything the engine does for one
// session (compare-and-set appends, dedupe, atomic batches, reads, erase,
// compaction) happens on one stream as before, and the sequences in its
// replies are that stream's. What is stream-wide has no single answer
// over K streams: following every session at once (Watch with no session)
// is refused, and the projection's watermark is asked per session
// (FoldedFor).
package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/service"
)

// ErrAllSessions is returned by a call that asks every session of a
// partitioned log at once where sequences are per partition (a Watch with
// no session); it also matches service.ErrInvalid (a request to fix:
// name a session).
var ErrAllSessions = errors.New("a partitioned log answers for one session at a time")

// Kept answers whether a session is one a migration from one stream kept
// on that stream (*jetstream.SessionSet).
type Kept interface {
	Has(session string) bool
}

// route picks the part of session among parts: its partition's, or, on a
// migrated layout (kept set), the one stream's (the last part) for the
// sessions the migration kept there.
func route[T any](parts []T, kept Kept, session string) T {
	if kept == nil {
		return parts[events.Partition(session, len(parts))]
	}
	if kept.Has(session) {
		return parts[len(parts)-1]
	}
	return parts[events.Partition(session, len(parts)-1)]
}

// checkParts refuses a layout of no parts or more than events.MaxPartitions.
func checkParts(what string, n int) error {
	if n < 1 || n > events.MaxPartitions {
		return fmt.Errorf("partition: %d %s, want 1 to %d, one per partition in partition order", n, what, events.MaxPartitions)
	}
	return nil
}

// Log is the event log of a partitioned layout: part p holds the sessions
// of partition p of len(parts).
type Log struct {
	parts []service.Log
	kept  Kept
}

var (
	_ service.Log            = (*Log)(nil)
	_ service.LiveLog        = (*Log)(nil)
	_ service.SessionScanner = (*Scanner)(nil)
)

// NewLog returns the log over parts, one per partition, in partition
// order (parts[p] holds partition p).
func NewLog(parts ...service.Log) (*Log, error) {
	if err := checkParts("logs", len(parts)); err != nil {
		return nil, err
	}
	return &Log{parts: slices.Clone(parts)}, nil
}

// Append stores evs on the session's partition (service.Log).
func (l *Log) Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (logport.AppendResult, error) {
	return route(l.parts, l.kept, session).Append(ctx, session, expected, evs...)
}

// LastSeq is the session's last sequence in its partition.
func (l *Log) LastSeq(ctx context.Context, session string) (uint64, error) {
	return route(l.parts, l.kept, session).LastSeq(ctx, session)
}

// LeaderLastSeq is LastSeq as the session's partition leader holds it.
func (l *Log) LeaderLastSeq(ctx context.Context, session string) (uint64, error) {
	return route(l.parts, l.kept, session).LeaderLastSeq(ctx, session)
}

// ReadSession reads the session's events from its partition.
func (l *Log) ReadSession(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	return route(l.parts, l.kept, session).ReadSession(ctx, session, from, upTo)
}

// ReadSessionThrough is ReadSession through upTo, on the session's
// partition.
func (l *Log) ReadSessionThrough(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	return route(l.parts, l.kept, session).ReadSessionThrough(ctx, session, from, upTo)
}

// ScanSession scans the session's events on its partition.
func (l *Log) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error {
	return route(l.parts, l.kept, session).ScanSession(ctx, session, from, upTo, fn)
}

// StoredAt reports whether the session's partition holds ids from first.
func (l *Log) StoredAt(ctx context.Context, session string, first uint64, ids []string) (bool, error) {
	return route(l.parts, l.kept, session).StoredAt(ctx, session, first, ids)
}

// Watch follows one session's events on its partition (service.LiveLog).
// Following every session at once is refused (ErrAllSessions): each
// partition numbers its events on its own; watch each partition's log.
func (l *Log) Watch(ctx context.Context, session string, afterSeq uint64) (*jetstream.Watcher, error) {
	if session == "" {
		if len(l.parts) == 1 {
			return watch(ctx, l.parts[0], session, afterSeq)
		}
		return nil, fmt.Errorf("%w: watch every session of %d partitions: %w; name a session", service.ErrInvalid, len(l.parts), ErrAllSessions)
	}
	return watch(ctx, route(l.parts, l.kept, session), session, afterSeq)
}

func watch(ctx context.Context, part service.Log, session string, afterSeq uint64) (*jetstream.Watcher, error) {
	ll, ok := part.(service.LiveLog)
	if !ok {
		return nil, fmt.Errorf("watch %q: the partition's log cannot be followed: %w", session, errors.ErrUnsupported)
	}
	return ll.Watch(ctx, session, afterSeq)
}

// HasKeys reports whether the idempotency-key store exists: it is shared
// by every partition and asked of the first. A first log that cannot tell
// answers true (the engine then opens the store).
func (l *Log) HasKeys(ctx context.Context) (bool, error) {
	h, ok := l.parts[0].(interface {
		HasKeys(ctx context.Context) (bool, error)
	})
	if !ok {
		return true, nil
	}
	return h.HasKeys(ctx)
}

// Scanner routes the session scans of history pages (service.Ports.Pages)
// to the session's partition.
type Scanner struct {
	parts []service.SessionScanner
	kept  Kept
}

// NewScanner returns the scanner over parts, one per partition, in
// partition order.
func NewScanner(parts ...service.SessionScanner) (*Scanner, error) {
	if err := checkParts("scanners", len(parts)); err != nil {
		return nil, err
	}
	return &Scanner{parts: slices.Clone(parts)}, nil
}

// ScanSession scans the session's events on its partition.
func (s *Scanner) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error {
	return route(s.parts, s.kept, session).ScanSession(ctx, session, from, upTo, fn)
}

// Views are the session views of a partitioned layout: part p folds the
// stream of partition p.
type Views struct {
	parts []service.Views
	kept  Kept
}

var _ service.Views = (*Views)(nil)

// NewViews returns the views over parts, one per partition, in partition
// order.
func NewViews(parts ...service.Views) (*Views, error) {
	if err := checkParts("views", len(parts)); err != nil {
		return nil, err
	}
	return &Views{parts: slices.Clone(parts)}, nil
}

// Read returns the session's view from its partition's views.
func (v *Views) Read(ctx context.Context, session string, opts projection.ReadOptions) (aggregate.State, error) {
	return route(v.parts, v.kept, session).Read(ctx, session, opts)
}

// Stored is rec as the views of its session's partition fold it.
func (v *Views) Stored(ctx context.Context, rec logport.Record) (aggregate.Stored, error) {
	return route(v.parts, v.kept, rec.Session).Stored(ctx, rec)
}

// Sessions lists the sessions of every partition that have a view,
// sorted.
func (v *Views) Sessions(ctx context.Context) ([]string, error) {
	var all []string
	for p, part := range v.parts {
		s, err := part.Sessions(ctx)
		if err != nil {
			return nil, fmt.Errorf("sessions of partition %d: %w", p, err)
		}
		all = append(all, s...)
	}
	slices.Sort(all) // each session is in one partition: no duplicates
	return all, nil
}

// FoldedFor is the sequence up to which the views of the session's
// partition are written, when they can tell (*projection.Projection);
// views that cannot answer 0 with errors.ErrUnsupported.
func (v *Views) FoldedFor(ctx context.Context, session string) (uint64, error) {
	f, ok := route(v.parts, v.kept, session).(interface {
		FoldedFor(ctx context.Context, session string) (uint64, error)
	})
	if !ok {
		return 0, fmt.Errorf("folded position of %q: %w", session, errors.ErrUnsupported)
	}
	return f.FoldedFor(ctx, session)
}

// progress is what views offer that say how far they have folded their
// log (*projection.Projection).
type progress interface {
	LogEnds(ctx context.Context) ([]uint64, error)
	FoldedEach(ctx context.Context) ([]uint64, error)
}

// each gathers what ask returns of every partition's views, in partition
// order; views that cannot tell fail it (errors.ErrUnsupported).
func (v *Views) each(ctx context.Context, what string, ask func(progress, context.Context) ([]uint64, error)) ([]uint64, error) {
	var out []uint64
	for p, part := range v.parts {
		pr, ok := part.(progress)
		if !ok {
			return nil, fmt.Errorf("%s of partition %d: %w", what, p, errors.ErrUnsupported)
		}
		got, err := ask(pr, ctx)
		if err != nil {
			return nil, fmt.Errorf("%s of partition %d: %w", what, p, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// LogEnds is the last sequence of each partition's stream, in partition
// order.
func (v *Views) LogEnds(ctx context.Context) ([]uint64, error) {
	return v.each(ctx, "log end", progress.LogEnds)
}

// FoldedEach is how far each partition's views are written, in partition
// order.
func (v *Views) FoldedEach(ctx context.Context) ([]uint64, error) {
	return v.each(ctx, "folded position", progress.FoldedEach)
}

// Handoff gives the session's partition views a writer's acknowledged
// events; false when those views take none.
func (v *Views) Handoff(a projection.Acked) bool {
	h, ok := route(v.parts, v.kept, a.Session).(interface{ Handoff(projection.Acked) bool })
	return ok && h.Handoff(a)
}

// anchors is what views keeping history anchors offer
// (*projection.Projection).
type anchors interface {
	HistoryAnchor(ctx context.Context, session string, atMost uint64) (projection.Anchor, bool, error)
	ForgetAnchors(ctx context.Context, session string, events uint64) error
}

// HistoryAnchor returns the session's nearest history anchor at or before
// atMost from its partition's views; none when they keep no anchors.
func (v *Views) HistoryAnchor(ctx context.Context, session string, atMost uint64) (projection.Anchor, bool, error) {
	a, ok := route(v.parts, v.kept, session).(anchors)
	if !ok {
		return projection.Anchor{}, false, nil
	}
	return a.HistoryAnchor(ctx, session, atMost)
}

// ForgetAnchors drops the session's history anchors in its partition's
// views, when they keep any.
func (v *Views) ForgetAnchors(ctx context.Context, session string, events uint64) error {
	a, ok := route(v.parts, v.kept, session).(anchors)
	if !ok {
		return nil
	}
	return a.ForgetAnchors(ctx, session, events)
}

// Eraser erases and compacts sessions on their partition's stream; the
// audit stream is shared by every partition.
type Eraser struct {
	parts []service.Eraser
	kept  Kept
}

var (
	_ service.Eraser    = (*Eraser)(nil)
	_ service.Compactor = (*Eraser)(nil)
)

// NewEraser returns the eraser over parts, one per partition, in
// partition order, all writing the one audit stream.
func NewEraser(parts ...service.Eraser) (*Eraser, error) {
	if err := checkParts("erasers", len(parts)); err != nil {
		return nil, err
	}
	return &Eraser{parts: slices.Clone(parts)}, nil
}

// Begin records the intent to erase session.
func (x *Eraser) Begin(ctx context.Context, session string, expected uint64) error {
	return route(x.parts, x.kept, session).Begin(ctx, session, expected)
}

// Cancel records that a conditional erase of session does not go on.
func (x *Eraser) Cancel(ctx context.Context, session string) error {
	return route(x.parts, x.kept, session).Cancel(ctx, session)
}

// Erase purges the session's events before deleted on its partition.
func (x *Eraser) Erase(ctx context.Context, session string, deleted uint64) (jetstream.EraseReport, error) {
	return route(x.parts, x.kept, session).Erase(ctx, session, deleted)
}

// Erased reports whether the audit stream records an erase of session.
func (x *Eraser) Erased(ctx context.Context, session string) (bool, error) {
	return route(x.parts, x.kept, session).Erased(ctx, session)
}

// Unfinished reads the shared audit stream after a sequence, through the
// first partition's eraser.
func (x *Eraser) Unfinished(ctx context.Context, after uint64) (map[string]jetstream.AuditRecord, uint64, error) {
	return x.parts[0].Unfinished(ctx, after)
}

// PurgeDenied reports whether any partition's stream denies purges (one
// created with deny_purge): compaction is then refused before it writes.
func (x *Eraser) PurgeDenied() bool {
	for _, part := range x.parts {
		if pd, ok := part.(interface{ PurgeDenied() bool }); ok && pd.PurgeDenied() {
			return true
		}
	}
	return false
}

// Compact purges the session's events below snapshot on its partition
// (service.Compactor), when the partition's eraser compacts.
func (x *Eraser) Compact(ctx context.Context, session string, snapshot uint64) (jetstream.CompactReport, error) {
	c, ok := route(x.parts, x.kept, session).(service.Compactor)
	if !ok {
		return jetstream.CompactReport{}, fmt.Errorf("compact %q: %w", session, service.ErrEraseUnavailable)
	}
	return c.Compact(ctx, session, snapshot)
}

// NewMigratedEraser is NewEraser over a store migrated from one stream:
// parts are the erasers of each partition and then the one stream's,
// which erases the sessions kept says the migration kept there.
func NewMigratedEraser(kept Kept, parts ...service.Eraser) (*Eraser, error) {
	if err := checkMigrated(kept, len(parts)); err != nil {
		return nil, err
	}
	return &Eraser{parts: slices.Clone(parts), kept: kept}, nil
}

// checkMigrated refuses a migrated layout without its set, or without a
// partition beside the one stream.
func checkMigrated(kept Kept, n int) error {
	if kept == nil {
		return errors.New("partition: a migrated layout needs the set of sessions the migration kept on the one stream")
	}
	if n < 3 || n > events.MaxPartitions {
		return fmt.Errorf("partition: %d parts of a migrated layout, want the partitions (2 to %d) and then the one stream", n, events.MaxPartitions-1)
	}
	return nil
}

// NewMigratedPorts is NewPorts over a store migrated from one stream:
// parts are each partition's stores and then the one stream's, which
// serve the sessions kept says the migration kept there; every other
// session is its partition's.
func NewMigratedPorts(kept Kept, parts ...service.Ports) (service.Ports, error) {
	if err := checkMigrated(kept, len(parts)); err != nil {
		return service.Ports{}, err
	}
	out, err := newPorts(parts)
	if err != nil {
		return service.Ports{}, err
	}
	out.Log.(*Log).kept, out.Views.(*Views).kept = kept, kept
	if out.Pages != nil {
		out.Pages.(*Scanner).kept = kept
	}
	return out, nil
}

// NewPorts returns the ports of an engine over a partitioned layout:
// parts[p] are partition p's stores. Logs, views and history-page scans
// are routed by session; the idempotency-key store is shared and comes
// from the first part.
func NewPorts(parts ...service.Ports) (service.Ports, error) {
	if err := checkParts("ports", len(parts)); err != nil {
		return service.Ports{}, err
	}
	return newPorts(parts)
}

// newPorts is NewPorts' work, routing by partition alone.
func newPorts(parts []service.Ports) (service.Ports, error) {
	logs := make([]service.Log, len(parts))
	views := make([]service.Views, len(parts))
	pages := make([]service.SessionScanner, 0, len(parts))
	for p, pt := range parts {
		if pt.Log == nil || pt.Views == nil {
			return service.Ports{}, fmt.Errorf("partition: the ports of partition %d have no log or no views: both are required", p)
		}
		logs[p], views[p] = pt.Log, pt.Views
		if pt.Pages != nil {
			pages = append(pages, pt.Pages)
		}
	}
	log, _ := NewLog(logs...)
	vs, _ := NewViews(views...)
	out := service.Ports{Log: log, Views: vs, Keys: parts[0].Keys}
	switch len(pages) {
	case len(parts):
		out.Pages, _ = NewScanner(pages...)
	case 0:
	default:
		return service.Ports{}, fmt.Errorf("partition: %d of %d partitions have a history-page log: give one to every partition or to none", len(pages), len(parts))
	}
	return out, nil
}
