package service_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// retentionIdle is the limit of the retention tests; idleAgo is older.
const (
	retentionIdle = 90 * 24 * time.Hour
	idleAgo       = 100 * 24 * time.Hour
)

// appendAged stores on session the events of cmds as a writer whose clock
// said at: each envelope's time_ms is at (the documented wire field
// retention reads), appended straight to the log.
func appendAged(t testing.TB, log *jetstream.Log, session string, at time.Time, cmds ...events.Payload) {
	t.Helper()
	var envs []events.Envelope
	for _, c := range cmds {
		env := events.New(session, "web", "alice", c)
		env.TimeMs = at.UnixMilli()
		envs = append(envs, env)
	}
	last, err := log.LastSeq(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(context.Background(), session, last, envs...); err != nil {
		t.Fatalf("append to %s: %v", session, err)
	}
}

// rawEvents is the session's stored events as bytes with their sequences.
func rawEvents(t *testing.T, log *jetstream.Log, session string) []string {
	t.Helper()
	recs, err := log.ReadSession(context.Background(), session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d:%x", r.Seq, r.Data))
	}
	return out
}

// waitListed waits until e lists n sessions (the projection folded them).
func waitListed(t testing.TB, e *service.Engine, n int) {
	t.Helper()
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		got, err := e.Sessions(context.Background())
		if err != nil {
			return err
		}
		if len(got) != n {
			return fmt.Errorf("%d sessions listed, want %d", len(got), n)
		}
		return nil
	})
}

// lastDeleted returns the SessionDeleted that ends session's log, or fails.
func lastDeleted(t *testing.T, log *jetstream.Log, session string) events.Envelope {
	t.Helper()
	recs, err := log.ReadSession(context.Background(), session, 0, 0)
	if err != nil || len(recs) == 0 {
		t.Fatalf("read %s: %d events, %v", session, len(recs), err)
	}
	last := recs[len(recs)-1].Envelope
	if _, ok := last.Payload.(events.SessionDeleted); !ok {
		t.Fatalf("%s ends with %s, want a SessionDeleted", session, last.Type)
	}
	return last
}

// A tick deletes the sessions whose last event is older than the
// limit, as engine:retention on channel engine with the reason "retention:
// idle since <time>", and keeps the fresh ones byte for byte; a session
// with an old event and a fresh one is fresh.
func TestRetentionDeletesIdleKeepsFresh(t *testing.T) {
	t.Parallel()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	now := time.Now()
	old := now.Add(-idleAgo)
	for i := range 4 {
		appendAged(t, log, fmt.Sprintf("old%d", i), old, events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"})
	}
	appendAged(t, log, "revived", old, events.ToolsToggled{Enabled: on(true)})
	appendAged(t, log, "revived", now.Add(-time.Hour), events.WebSearchSet{Enabled: on(true)})
	for i := range 3 {
		if _, err := e.Apply(ctx, fmt.Sprintf("fresh%d", i), web, nil, events.ToolsToggled{Enabled: on(false)}); err != nil {
			t.Fatal(err)
		}
	}
	waitListed(t, e, 8)
	keep := map[string][]string{}
	for _, s := range []string{"revived", "fresh0", "fresh1", "fresh2"} {
		keep[s] = rawEvents(t, log, s)
	}
	var observed []service.RetentionTick
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Now: func() time.Time { return now },
		Observe: func(tk service.RetentionTick) { observed = append(observed, tk) }})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := r.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Examined != 8 || tk.Deleted != 4 || tk.Erased != 0 || tk.Conflicts != 0 || tk.Errors != 0 || tk.Remaining != 0 {
		t.Fatalf("tick %+v; want 8 examined, 4 deleted", tk)
	}
	if len(observed) != 1 || observed[0].Deleted != 4 {
		t.Errorf("Observe got %+v", observed)
	}
	wantReason := "retention: idle since " + time.UnixMilli(old.UnixMilli()).UTC().Format(time.RFC3339)
	for i := range 4 {
		s := fmt.Sprintf("old%d", i)
		env := lastDeleted(t, log, s)
		if env.Channel != "engine" || env.Actor != "engine:retention" || env.Payload.(events.SessionDeleted).Reason != wantReason {
			t.Errorf("%s: SessionDeleted by %s/%s reason %q; want engine/engine:retention %q", s, env.Channel, env.Actor, env.Payload.(events.SessionDeleted).Reason, wantReason)
		}
		if _, err := e.Session(ctx, s, 0); !errors.Is(err, service.ErrDeleted) {
			t.Errorf("%s after retention: %v, want deleted", s, err)
		}
	}
	for s, was := range keep {
		if got := rawEvents(t, log, s); strings.Join(got, ",") != strings.Join(was, ",") {
			t.Errorf("%s changed:\n%v\nwas\n%v", s, got, was)
		}
	}
	// The next pass finds nothing more to delete.
	waitListed(t, e, 4)
	if tk, err := r.Tick(ctx); err != nil || tk.Examined != 4 || tk.Deleted != 0 {
		t.Errorf("second pass: %+v %v; want 4 examined, none deleted", tk, err)
	}
}

// One tick's work is bounded: with a batch of 10 and 35 idle
// sessions, four ticks examine 10, 10, 10 and 5, each resuming where the
// previous stopped, and delete them all.
func TestRetentionBoundedTicks(t *testing.T) {
	t.Parallel()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	old := time.Now().Add(-idleAgo)
	for i := range 35 {
		appendAged(t, log, fmt.Sprintf("s%02d", i), old, events.ToolsToggled{Enabled: on(true)})
	}
	waitListed(t, e, 35)
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ examined, remaining int }{{10, 25}, {10, 15}, {10, 5}, {5, 0}}
	total := 0
	for i, w := range want {
		tk, err := r.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Examined != w.examined || tk.Deleted != w.examined || tk.Remaining != w.remaining {
			t.Fatalf("tick %d: %+v; want %d examined and deleted, %d remaining", i+1, tk, w.examined, w.remaining)
		}
		total += tk.Deleted
	}
	if total != 35 {
		t.Fatalf("%d deleted in 4 ticks, want 35", total)
	}
	for i := range 35 {
		lastDeleted(t, log, fmt.Sprintf("s%02d", i))
	}
}

// writeBetween is a Log whose read of a session's last event (what
// retention examines) first appends a fresh event to that session: a
// write that lands between the examination and the delete.
type writeBetween struct {
	*jetstream.Log
	session string
	once    sync.Once
	t       *testing.T
}

func (w *writeBetween) ReadSession(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	recs, err := w.Log.ReadSession(ctx, session, from, upTo)
	if session == w.session && from == upTo && from != 0 {
		w.once.Do(func() { appendAged(w.t, w.Log, session, time.Now(), events.WebSearchSet{Enabled: on(true)}) })
	}
	return recs, err
}

// A session written during the tick (after retention found it idle,
// before its delete) survives: the delete is conditional on the examined
// sequence, the newer write wins and the tick counts a conflict.
func TestRetentionWriteDuringTickSurvives(t *testing.T) {
	t.Parallel()
	url := natstest.Server(t).ClientURL()
	_, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	old := time.Now().Add(-idleAgo)
	appendAged(t, log, "busy", old, events.ToolsToggled{Enabled: on(true)})
	appendAged(t, log, "idle", old, events.ToolsToggled{Enabled: on(true)})
	w := &writeBetween{Log: log, session: "busy", t: t}
	e2, _ := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	e := service.NewFromPorts(service.Ports{Log: w, Views: e2.Projection()}, resolver.Default(), service.Config{})
	waitListed(t, e, 2)
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := r.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Examined != 2 || tk.Deleted != 1 || tk.Conflicts != 1 {
		t.Fatalf("tick %+v; want 2 examined, 1 deleted, 1 conflict", tk)
	}
	recs, err := log.ReadSession(ctx, "busy", 0, 0)
	if err != nil || len(recs) != 2 || recs[1].Envelope.Type != events.TypeWebSearchSet {
		t.Fatalf("busy: %d events %v; want its 2 events and no delete", len(recs), err)
	}
	lastDeleted(t, log, "idle")
}

// Two engines running retention at once on the same stream are
// harmless: every idle session gets exactly one SessionDeleted (the
// second engine's conditional delete is a conflict, or it sees the
// session deleted), and together they delete each once.
func TestRetentionTwoEngines(t *testing.T) {
	t.Parallel()
	url := natstest.Server(t).ClientURL()
	a, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	b, _ := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	ctx := context.Background()
	old := time.Now().Add(-idleAgo)
	const n = 30
	for i := range n {
		appendAged(t, log, fmt.Sprintf("s%02d", i), old, events.ToolsToggled{Enabled: on(true)})
	}
	waitListed(t, a, n)
	waitListed(t, b, n)
	var ticks [2]service.RetentionTick
	var wg sync.WaitGroup
	for i, e := range []*service.Engine{a, b} {
		r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := r.Tick(ctx)
			if err != nil {
				t.Error(err)
			}
			ticks[i] = tk
		}()
	}
	wg.Wait()
	if got := ticks[0].Deleted + ticks[1].Deleted; got != n || ticks[0].Errors+ticks[1].Errors != 0 {
		t.Fatalf("two engines deleted %d (%+v, %+v); want %d, no errors", got, ticks[0], ticks[1], n)
	}
	for i := range n {
		s := fmt.Sprintf("s%02d", i)
		recs, err := log.ReadSession(ctx, s, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		deletes := 0
		for _, r := range recs {
			if r.Envelope.Type == events.TypeSessionDeleted {
				deletes++
			}
		}
		if deletes != 1 || len(recs) != 2 {
			t.Errorf("%s: %d events, %d SessionDeleted; want 2 and 1", s, len(recs), deletes)
		}
	}
}

// The erase action deletes and purges an idle session through the
// engine's eraser: its events before its SessionDeleted are gone from the
// stream, its audit record stays, its id answers deleted; a fresh session
// is untouched.
func TestRetentionErase(t *testing.T) {
	t.Parallel()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	appendAged(t, log, "gone", time.Now().Add(-idleAgo), events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"})
	if _, err := e.Apply(ctx, "kept", web, nil, events.ToolsToggled{Enabled: on(false)}); err != nil {
		t.Fatal(err)
	}
	waitListed(t, e, 2)
	kept := rawEvents(t, log, "kept")
	if _, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Action: service.RetainErase}); !errors.Is(err, service.ErrEraseUnavailable) || !strings.Contains(err.Error(), "--retain-action erase") {
		t.Fatalf("erase action without an eraser: %v; want ErrEraseUnavailable naming --retain-action", err)
	}
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Action: service.RetainErase})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := r.Tick(ctx)
	if err != nil || tk.Erased != 1 || tk.Deleted != 0 || tk.Errors != 0 {
		t.Fatalf("tick %+v %v; want 1 erased", tk, err)
	}
	if got := rawEvents(t, log, "gone"); len(got) != 1 {
		t.Errorf("erased session holds %d events, want its SessionDeleted only", len(got))
	}
	lastDeleted(t, log, "gone")
	if ok, err := x.Erased(ctx, "gone"); !ok || err != nil {
		t.Errorf("audit record of the erased session: %v %v", ok, err)
	}
	if _, err := e.Session(ctx, "gone", 0); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("erased id reads %v, want deleted", err)
	}
	if got := rawEvents(t, log, "kept"); !bytes.Equal([]byte(strings.Join(got, ",")), []byte(strings.Join(kept, ","))) {
		t.Errorf("kept changed:\n%v\nwas\n%v", got, kept)
	}
}

// A bad retention configuration is refused naming the serve flag.
func TestRetentionConfigRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  service.RetentionConfig
		flag string
	}{
		{service.RetentionConfig{}, "--retain-idle"},
		{service.RetentionConfig{Idle: -time.Hour}, "--retain-idle"},
		{service.RetentionConfig{Idle: time.Hour, Action: "archive"}, "--retain-action"},
		{service.RetentionConfig{Idle: time.Hour, Batch: -1}, "--retain-batch"},
	} {
		err := c.cfg.Validate()
		if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("Validate(%+v) = %v; want ErrInvalid naming %s", c.cfg, err, c.flag)
		}
	}
	if err := (service.RetentionConfig{Idle: time.Hour}).Validate(); err != nil {
		t.Errorf("a valid config: %v", err)
	}
}

// failOnce is an Eraser whose first Erase fails.
type failOnce struct {
	service.Eraser
	failed bool
}

func (f *failOnce) Erase(ctx context.Context, session string, deleted uint64) (jetstream.EraseReport, error) {
	if !f.failed {
		f.failed = true
		return jetstream.EraseReport{}, errors.New("audit stream unreachable")
	}
	return f.Eraser.Erase(ctx, session, deleted)
}

// Under the erase action, a session retention deleted whose purge failed
// (a deleted session is listed no more) is erased by the next tick, which
// finishes the erases begun and not ended first.
func TestRetentionEraseRetried(t *testing.T) {
	t.Parallel()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	appendAged(t, log, "gone", time.Now().Add(-idleAgo), events.ToolsToggled{Enabled: on(true)})
	waitListed(t, e, 1)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(&failOnce{Eraser: x})
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Action: service.RetainErase})
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := r.Tick(ctx); err != nil || tk.Errors != 1 || tk.Erased != 0 {
		t.Fatalf("first tick %+v %v; want its erase failed", tk, err)
	}
	lastDeleted(t, log, "gone")
	if tk, err := r.Tick(ctx); err != nil || tk.Erased != 1 || tk.Errors != 0 {
		t.Fatalf("second tick %+v %v; want the erase finished", tk, err)
	}
	if got := rawEvents(t, log, "gone"); len(got) != 1 {
		t.Errorf("erased session holds %d events, want its SessionDeleted only", len(got))
	}
	lastDeleted(t, log, "gone")
}

// benchStack is stackOn for benchmarks: a log, its running projection and
// an engine on a fresh in-process server.
func benchStack(b *testing.B) (*service.Engine, *jetstream.Log) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc := natstest.Connect(b, natstest.Server(b).ClientURL())
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = proj.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done; nc.Close() })
	return service.New(log, proj, resolver.Default(), service.Config{}), log
}

// The cost of a retention tick per session examined, on 1,000 fresh
// sessions (each: a view read and a direct get of the last event; none
// deleted).
func BenchmarkRetentionExamine(b *testing.B) {
	e, log := benchStack(b)
	const n = 1000
	for i := range n {
		appendAged(b, log, fmt.Sprintf("s%04d", i), time.Now(), events.ToolsToggled{Enabled: on(true)})
	}
	waitListed(b, e, n)
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Batch: n})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		tk, err := r.Tick(context.Background())
		if err != nil || tk.Examined != n || tk.Deleted != 0 {
			b.Fatalf("tick %+v %v", tk, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/session")
}

// The cost of a retention tick per idle session deleted (examine and
// a conditional SessionDeleted append), 200 sessions a tick.
func BenchmarkRetentionDelete(b *testing.B) {
	e, log := benchStack(b)
	const n = 200
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Batch: n})
	if err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-idleAgo)
	var took time.Duration
	round := 0
	for b.Loop() {
		b.StopTimer()
		for i := range n {
			appendAged(b, log, fmt.Sprintf("r%d-%04d", round, i), old, events.ToolsToggled{Enabled: on(true)})
		}
		waitListed(b, e, n)
		round++
		b.StartTimer()
		start := time.Now()
		tk, err := r.Tick(context.Background())
		took += time.Since(start)
		if err != nil || tk.Deleted != n {
			b.Fatalf("tick %+v %v", tk, err)
		}
	}
	b.ReportMetric(float64(took.Microseconds())/float64(round*n), "µs/session")
}

// The one unbounded step of retention: a pass begins by listing
// every session with a view (a key listing of the views bucket), here of
// 10,000 sessions; the ticks of the pass then examine at most their batch.
func BenchmarkRetentionListing(b *testing.B) {
	e, log := benchStack(b)
	const n = 10_000
	ctx := context.Background()
	for i := range n {
		env := events.New(fmt.Sprintf("s%05d", i), "web", "alice", events.ToolsToggled{Enabled: on(true)})
		if _, err := log.Append(ctx, env.Session, 0, env); err != nil {
			b.Fatal(err)
		}
	}
	waitListed(b, e, n)
	b.ResetTimer()
	for b.Loop() {
		got, err := e.Sessions(ctx)
		if err != nil || len(got) != n {
			b.Fatalf("%d sessions, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/session")
}

// An erase on a stream that never had a keyed append does not create the
// idempotency-key bucket (on a cluster with a peer down its creation
// would fail the erase): there are no keys to forget.
func TestEraseCreatesNoKeyBucket(t *testing.T) {
	t.Parallel()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	if _, err := e.Apply(ctx, "gone", web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	if _, err := e.Erase(ctx, "gone", web, ""); err != nil {
		t.Fatal(err)
	}
	if has, err := log.HasKeys(ctx); err != nil || has {
		t.Fatalf("the key bucket after an erase: exists %v (%v), want none", has, err)
	}
}
