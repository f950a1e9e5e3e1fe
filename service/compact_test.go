package service_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

var compactor = service.Origin{Channel: "engine", Actor: "engine:compact"}

// storedOf turns log records into what the fold takes.
func storedOf(recs []logport.Record) []aggregate.Stored {
	out := make([]aggregate.Stored, len(recs))
	for i, r := range recs {
		out[i] = aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}
	}
	return out
}

// longSession writes a session with intent changes, two turns with a
// loaded deferred tool and a checkpoint, and a permission answer.
func longSession(ctx context.Context, t *testing.T, e *service.Engine, log *jetstream.Log, s string) {
	t.Helper()
	if _, err := e.Apply(ctx, s, web, nil, events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"}, events.WebSearchSet{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	turnEndSession(ctx, t, e, log, s)
	if _, err := e.Apply(ctx, s, web, nil, events.PermissionGranted{By: "alice", Scope: events.ScopeSession, Tool: "send_message"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EndTurn(ctx, s, web); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, s, web, nil, events.ToolEnabled{Name: "bash"}, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
}

// compactStack is an engine with a running projection and an eraser on a
// fresh server.
func compactStack(t *testing.T) (*service.Engine, *jetstream.Log, string) {
	t.Helper()
	url := natstest.Server(t).ClientURL()
	e, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	x, err := log.NewEraser(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	return e, log, url
}

// Compacting a long session leaves its subject one message (a raw
// JetStream read of the subject), a cold load reads that message and the
// tail written after it (counted by the log's read counter) and folds to
// the state the whole history folds to; the projection's view, resume of
// the checkpoint and the permission answer work on as before; compacting
// again is a no-op.
func TestCompactColdLoadReadsSnapshotAndTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, url := compactStack(t)
	longSession(ctx, t, e, log, "long")
	orig, err := log.ReadSession(ctx, "long", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := aggregate.Fold("long", storedOf(orig))
	res, err := e.Compact(ctx, "long", compactor, "test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Already || res.Count != uint64(len(orig)) || res.FirstSeq != orig[0].Seq || res.LastSeq != orig[len(orig)-1].Seq || res.Purged != uint64(len(orig)) {
		t.Fatalf("compact result %+v; want %d events %d..%d purged", res, len(orig), orig[0].Seq, orig[len(orig)-1].Seq)
	}
	if got := rawEvents(t, log, "long"); len(got) != 1 {
		t.Fatalf("the subject holds %d messages after compaction, want 1", len(got))
	}
	if _, err := e.Apply(ctx, "long", web, nil, events.PresetChosen{Preset: ""}, events.ToolDisabled{Name: "read_file"}); err != nil {
		t.Fatal(err)
	}
	// A cold load on a new connection: one message and the tail.
	cold, err := jetstream.OpenLog(ctx, natstest.Connect(t, url), jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := cold.ReadSession(ctx, "long", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || cold.MessagesRead() != 2 || recs[0].Envelope.Type != events.TypeSessionCompacted {
		t.Fatalf("cold load read %d messages (%d records, first %s), want the snapshot and 1 tail event", cold.MessagesRead(), len(recs), recs[0].Envelope.Type)
	}
	got := aggregate.Fold("long", storedOf(recs))
	whole := aggregate.Fold("long", storedOf(append(append([]logport.Record(nil), orig...), recs...)))
	if !reflect.DeepEqual(got, whole) {
		t.Fatalf("cold fold differs from the whole history's:\n got %+v\nwant %+v", got, whole)
	}
	if !reflect.DeepEqual(got.Intent, whole.Intent) || got.Checkpoint == nil || !slices.Equal(got.Loaded, want.Loaded) {
		t.Fatalf("cold state %+v", got)
	}
	v, err := e.Session(ctx, "long", recs[1].Seq)
	if err != nil || !reflect.DeepEqual(v.Intent, whole.Intent) || v.LastSeq != recs[1].Seq {
		t.Fatalf("view after compaction: %+v %v", v, err)
	}
	// The session's permission answer survives compaction.
	g, err := e.Grants(ctx, "long", 0)
	if err != nil || len(g.Session) != 1 || g.Session[0].Tool != "send_message" {
		t.Fatalf("grants after compaction: %+v %v", g, err)
	}
	// Resume validates the checkpoint the snapshot carries.
	r, err := e.Resume(ctx, "long", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Outcome.OK || !slices.Equal(r.Outcome.Restored, []string{"send_message"}) || r.Checkpoint == nil || r.Checkpoint.ContractHash != want.Checkpoint.ContractHash {
		t.Fatalf("resume after compaction = %+v (checkpoint %+v); want send_message restored", r.Outcome, r.Checkpoint)
	}
	// Idempotent: compact a compact session writes nothing.
	if _, err := e.Compact(ctx, "long", compactor, ""); err != nil {
		t.Fatal(err)
	}
	again, err := e.Compact(ctx, "long", compactor, "")
	if err != nil || !again.Already || again.Purged != 0 {
		t.Fatalf("compact of a compact session: %+v %v; want Already, nothing purged", again, err)
	}
	if n := len(rawEvents(t, log, "long")); n != 1 {
		t.Fatalf("after compacting twice the subject holds %d messages, want 1", n)
	}
}

// scanThenWrite is a Log whose first full scan of a session (what Compact
// folds) is followed by another writer's event on that session, before
// the snapshot is appended.
type scanThenWrite struct {
	*jetstream.Log
	session string
	once    sync.Once
	t       *testing.T
}

func (w *scanThenWrite) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error {
	err := w.Log.ScanSession(ctx, session, from, upTo, fn)
	if session == w.session && from <= 1 {
		w.once.Do(func() { appendAged(w.t, w.Log, session, timeNow(), events.ToolDisabled{Name: "web_search"}) })
	}
	return err
}

// A write that lands while a compaction folds the session makes the
// compaction fail with a conflict (the snapshot is appended on the
// condition that the session is still at the folded sequence): nothing is
// purged and the write is kept; compacting again folds it into the
// snapshot.
func TestCompactConcurrentWriteConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	e2, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	longSession(ctx, t, e2, log, "busy")
	before := rawEvents(t, log, "busy")
	w := &scanThenWrite{Log: log, session: "busy", t: t}
	e := service.NewFromPorts(service.Ports{Log: w, Views: e2.Projection()}, resolver.Default(), service.Config{})
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	_, err = e.Compact(ctx, "busy", compactor, "")
	if !errors.Is(err, logport.ErrConflict) || service.KindOf(err) != service.KindConflict {
		t.Fatalf("compaction during a write: %v (kind %v), want a conflict", err, service.KindOf(err))
	}
	after := rawEvents(t, log, "busy")
	if len(after) != len(before)+1 || !slices.Equal(after[:len(before)], before) {
		t.Fatalf("after the refused compaction the subject holds %d messages, want the %d before and the write", len(after), len(before))
	}
	res, err := e.Compact(ctx, "busy", compactor, "")
	if err != nil || res.Count != uint64(len(after)) {
		t.Fatalf("compact again: %+v %v; want the %d events compacted", res, err, len(after))
	}
	recs, err := log.ReadSession(ctx, "busy", 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("after compaction: %d events %v", len(recs), err)
	}
	st := aggregate.Fold("busy", storedOf(recs))
	if !slices.Contains(st.Intent.Disabled, "web_search") {
		t.Fatalf("the concurrent write is lost: intent %+v", st.Intent)
	}
}

// With two engines, one compacts and the other's projection folds
// the snapshot message through its feed: both serve the same view, and a
// write through the other engine after the compaction lands after the
// snapshot; a deleted session is refused (ErrDeleted), a session in an
// open turn is a conflict, a session without events is not found.
func TestCompactTwoEnginesAndRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	b, _ := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.SetEraser(x)
	longSession(ctx, t, a, log, "s")
	va, err := a.Session(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Compact(ctx, "s", compactor, "")
	if err != nil {
		t.Fatal(err)
	}
	// a's projection folds the snapshot from its feed.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		v, err := a.Session(ctx, "s", res.Seq)
		if err != nil {
			return err
		}
		if v.LastSeq != res.Seq {
			return errors.New("not folded yet")
		}
		return nil
	})
	v, _ := a.Session(ctx, "s", res.Seq)
	if !reflect.DeepEqual(v.Intent, va.Intent) || !reflect.DeepEqual(v.Checkpoint, va.Checkpoint) || v.Events != va.Events+1 {
		t.Fatalf("a's view after b's compaction:\n got %+v\nwant %+v", v, va)
	}
	w, err := a.Apply(ctx, "s", web, nil, events.ToolDisabled{Name: "read_file"})
	if err != nil || w.First <= res.Seq {
		t.Fatalf("write after compaction: %+v %v", w, err)
	}
	vb, err := b.Session(ctx, "s", w.Last)
	if err != nil || !slices.Contains(vb.Intent.Disabled, "read_file") || !slices.Contains(vb.Intent.Disabled, "grep") {
		t.Fatalf("b's view after a's write: %+v %v", vb, err)
	}

	// Refusals.
	if _, err := a.Apply(ctx, "gone", web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete(ctx, "gone", web, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Compact(ctx, "gone", compactor, ""); !errors.Is(err, service.ErrDeleted) || service.KindOf(err) != service.KindDeleted {
		t.Errorf("compact a deleted session: %v (kind %v), want deleted", err, service.KindOf(err))
	}
	if _, err := a.BeginTurn(ctx, "open", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	n := len(rawEvents(t, log, "open"))
	if _, err := b.Compact(ctx, "open", compactor, ""); !errors.Is(err, service.ErrTurnOpen) || service.KindOf(err) != service.KindConflict {
		t.Errorf("compact in an open turn: %v (kind %v), want a conflict naming the open turn", err, service.KindOf(err))
	}
	if got := len(rawEvents(t, log, "open")); got != n {
		t.Errorf("a refused compaction changed the open session: %d events, was %d", got, n)
	}
	if _, err := b.Compact(ctx, "nobody", compactor, ""); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("compact a session without events: %v, want not found", err)
	}
	if _, err := a.Compact(ctx, "s", compactor, ""); !errors.Is(err, service.ErrEraseUnavailable) {
		t.Errorf("compact without an eraser: %v, want ErrEraseUnavailable", err)
	}
}

func timeNow() time.Time { return time.Now() }

// After a compaction the history starts with the snapshot's entry,
// which names the replaced range, count, times and who compacted; a
// history or explain of a point before it answers ErrCompacted (kind not
// found) with that range in the message, not an empty timeline; explain
// of a tool whose rule a compacted event set names the snapshot and what
// it replaced.
func TestCompactHistoryAndExplain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, _ := compactStack(t)
	longSession(ctx, t, e, log, "h")
	orig, err := log.ReadSession(ctx, "h", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Compact(ctx, "h", compactor, "idle")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "h", web, nil, events.ToolDisabled{Name: "read_file"}); err != nil {
		t.Fatal(err)
	}
	h, st, err := e.History(ctx, "h", service.Until{}, service.ResolveRequest{})
	if err != nil || len(h) != 2 {
		t.Fatalf("history after compaction: %d entries, %v; want the snapshot and the tail", len(h), err)
	}
	c := h[0].Compacted
	if c == nil || h[0].Seq != res.Seq || c.Seq != res.Seq || c.FirstSeq != orig[0].Seq || c.LastSeq != orig[len(orig)-1].Seq || c.Count != uint64(len(orig)) ||
		c.Actor != compactor.Actor || c.Channel != compactor.Channel || c.Reason != "idle" || c.Time.IsZero() || c.FirstTime.IsZero() || c.LastTime.Before(c.FirstTime) {
		t.Fatalf("compaction entry %+v: %+v", h[0].EventRef, c)
	}
	if h[0].Error != "" || !slices.Contains(h[0].Intent.Disabled, "grep") || h[0].Cause != "compaction" || h[1].Compacted != nil || !slices.Contains(st.Intent.Disabled, "read_file") {
		t.Fatalf("history entries %+v / %+v", h[0], h[1])
	}
	for name, until := range map[string]service.Until{"seq": {Seq: orig[2].Seq}, "time": {Time: orig[0].Time}} {
		_, _, err := e.History(ctx, "h", until, service.ResolveRequest{})
		var ce *service.CompactedError
		if !errors.As(err, &ce) || !errors.Is(err, service.ErrCompacted) || service.KindOf(err) != service.KindNotFound || ce.Count != uint64(len(orig)) || ce.Seq != res.Seq {
			t.Fatalf("history before the compaction (by %s): %v (kind %v)", name, err, service.KindOf(err))
		}
		if _, err := e.Explain(ctx, "h", "bash", until, service.ResolveRequest{}); !errors.Is(err, service.ErrCompacted) {
			t.Fatalf("explain before the compaction (by %s): %v", name, err)
		}
	}
	x, err := e.Explain(ctx, "h", "grep", service.Until{}, service.ResolveRequest{})
	if err != nil || x.Included || x.Event == nil || x.Event.Seq != res.Seq || x.Event.Type != string(events.TypeSessionCompacted) {
		t.Fatalf("explain grep after compaction: %+v (event %+v) %v", x, x.Event, err)
	}
}

// A projection that had not read a session's events when they were
// compacted and purged reads the gap as compacted (the audit record's
// range), not as lost data: it folds the snapshot, is not damaged, and
// serves the compacted state and a bystander's.
func TestCompactBeforeProjectionReadsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	w, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.SetEraser(x)
	if _, err := w.Apply(ctx, "by", web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	longSession(ctx, t, w, log, "late")
	if _, err := w.Apply(ctx, "by", web, nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	orig, err := log.ReadSession(ctx, "late", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := aggregate.Fold("late", storedOf(orig))
	res, err := w.Compact(ctx, "late", compactor, "")
	if err != nil {
		t.Fatal(err)
	}
	last, err := log.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	p := r.Projection()
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if err := p.Damaged(ctx); err != nil {
			t.Fatalf("the projection took the compacted gap for damage: %v", err)
		}
		if p.Applied() < last {
			return errors.New("not caught up")
		}
		return nil
	})
	v, err := r.Session(ctx, "late", res.Seq)
	if err != nil || !reflect.DeepEqual(v.Intent, want.Intent) || !reflect.DeepEqual(v.Checkpoint, want.Checkpoint) || v.LastSeq != res.Seq {
		t.Fatalf("view of the compacted session: %+v %v; want intent %+v", v, err, want.Intent)
	}
	b, err := r.Session(ctx, "by", 0)
	if err != nil || len(b.Intent.Disabled) != 2 {
		t.Fatalf("bystander view %+v %v", b, err)
	}
}

// On an event stream created with deny_purge (which
// JetStream cannot lift), compaction is refused before it writes anything
// (KindForbidden, naming deny_purge): the session keeps its events and no
// snapshot is appended.
func TestCompactLegacyDenyPurgeStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := natstest.Server(t)
	js, err := njs.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "TOOLS_EVENTS", Subjects: []string{"tools.events.*"}, Storage: njs.FileStorage,
		Duplicates: 2 * time.Minute, MaxMsgSize: int32(events.MaxEventBytes + 4096), DenyDelete: true, DenyPurge: true,
		AllowDirect: true, AllowAtomicPublish: true}); err != nil {
		t.Fatal(err)
	}
	e, log := stackOn(t, srv.ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	if _, err := e.Apply(ctx, "old", web, nil, events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	before := rawEvents(t, log, "old")
	_, err = e.Compact(ctx, "old", compactor, "")
	if !errors.Is(err, jetstream.ErrPurgeDenied) || service.KindOf(err) != service.KindForbidden || !strings.Contains(err.Error(), "deny_purge") {
		t.Fatalf("compact on a deny_purge stream: %v (kind %v)", err, service.KindOf(err))
	}
	if got := rawEvents(t, log, "old"); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Fatalf("a refused compaction changed the session: %d events, was %d", len(got), len(before))
	}
}

// A keyed write retried after a compaction replaced its events is a
// duplicate (the snapshot folds them), not a damaged log, and nothing is
// applied twice.
func TestCompactKeyedRetryIsDuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, _ := compactStack(t)
	key := events.NewID()
	first, err := e.ApplyKeyed(ctx, "keyed", web, nil, key, events.ToolDisabled{Name: "bash"})
	if err != nil || first.Duplicate {
		t.Fatal(first, err)
	}
	if _, err := e.Apply(ctx, "keyed", web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	snap, err := e.Compact(ctx, "keyed", compactor, "test")
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.ApplyKeyed(ctx, "keyed", web, nil, key, events.ToolDisabled{Name: "bash"})
	if err != nil || !again.Duplicate || again.First != first.First {
		t.Fatalf("keyed retry after compaction: %+v %v, want a duplicate at %d", again, err, first.First)
	}
	st, err := e.Session(ctx, "keyed", 0)
	if err != nil || st.LastSeq != snap.Seq || !slices.Equal(st.Intent.Disabled, []string{"bash", "grep"}) {
		t.Fatalf("after the retry: last seq %d, disabled %v, %v; want the snapshot's seq %d and [bash grep] (nothing appended)", st.LastSeq, st.Intent.Disabled, err, snap.Seq)
	}
}

// After a compaction, a permission answer recorded on a
// channel whose policy denies the tool still does not allow it (the
// snapshot's answers are judged on their own channel, as the events
// were), while an answer from an allowed channel still does.
func TestCompactKeepsGrantChannelRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, policyRegistry(t), service.Config{}, true)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	tui := service.Origin{Channel: "tui", Actor: "alice"}
	if _, err := e.Apply(ctx, "g", tui, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "g", public, nil, events.PermissionGranted{Tool: "bash", Scope: events.ScopeSession, By: "mallory"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, "g", tui, nil, events.PermissionGranted{Tool: "mcp__github__create_issue", Scope: events.ScopeSession, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Compact(ctx, "g", compactor, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, "g", tui, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	bash, err := e.CallCheck(ctx, "g", "bash")
	if err != nil || bash.Callable || bash.Reason != wire.CallAsk {
		t.Errorf("bash after compaction: callable %v reason %s rule %s %v; want ask (public's answer does not count)", bash.Callable, bash.Reason, bash.Rule, err)
	}
	issue, err := e.CallCheck(ctx, "g", "mcp__github__create_issue")
	if err != nil || !issue.Callable || issue.Grant == nil || issue.Grant.By != "alice" {
		t.Errorf("create_issue after compaction: callable %v reason %s note %s grant %+v %v; want allowed by alice's answer", issue.Callable, issue.Reason, issue.Note, issue.Grant, err)
	}
}

// countingEraser counts the purge calls a compaction makes.
type countingEraser struct {
	*jetstream.Eraser
	compacts int
}

func (c *countingEraser) Compact(ctx context.Context, session string, snapshot uint64) (jetstream.CompactReport, error) {
	c.compacts++
	return c.Eraser.Compact(ctx, session, snapshot)
}

// Compacting a session whose subject holds only its snapshot (what
// retention does on every pass over a compacted idle session) answers
// Already without a purge call: there is nothing below the snapshot, and
// the call costs three JetStream round trips.
func TestCompactAlreadyMakesNoPurgeCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	e, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &countingEraser{Eraser: x}
	e.SetEraser(c)
	if _, err := e.Apply(ctx, "quiet", web, nil, events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Compact(ctx, "quiet", compactor, "test"); err != nil || res.Already || res.Purged != 2 {
		t.Fatalf("first compaction: %+v %v", res, err)
	}
	before := c.compacts
	res, err := e.Compact(ctx, "quiet", compactor, "test")
	if err != nil || !res.Already || res.Purged != 0 || res.Count != 2 {
		t.Fatalf("compact again: %+v %v, want already, nothing purged, 2 events replaced", res, err)
	}
	if n := c.compacts - before; n != 0 {
		t.Errorf("compacting a compact session made %d purge calls, want 0", n)
	}
}

// A compaction through an engine that did not write the
// session folds, and purges below, the session as the stream's leader
// holds it, not as a replica behind the leader answers (a shorter log, or
// "no events": ErrNotFound); and the log's compaction reads the snapshot
// it was just given from the leader (a lagging replica answered "not
// found"). Engine B writes, engine A compacts (laggingPair).
func TestCompactPastLaggingReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, logA := laggingPair(t, true)
	for i := 0; i < 8; i++ {
		s := fmt.Sprintf("roll-%d", i)
		for _, p := range []events.Payload{events.ToolDisabled{Name: "bash"}, events.ToolEnabled{Name: "bash"}, events.ToolDisabled{Name: "grep"}} {
			if _, err := b.Apply(ctx, s, web, nil, p); err != nil {
				t.Fatal(err)
			}
		}
		res, err := a.Compact(ctx, s, compactor, "test")
		if err != nil {
			t.Fatalf("%s: compact: %v", s, err)
		}
		if res.Count != 3 || res.Purged != 3 {
			t.Fatalf("%s: compact result %+v; want the 3 events replaced and purged", s, res)
		}
		if n, err := logA.LeaderLastSeq(ctx, s); err != nil || n != res.Seq {
			t.Fatalf("%s: the leader's last event is at %d (%v), want the snapshot at %d", s, n, err, res.Seq)
		}
	}
}
