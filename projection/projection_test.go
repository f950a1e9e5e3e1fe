package projection_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

type env struct {
	log *jetstream.Log
	nc  *nats.Conn
}

func open(t *testing.T, url string) env {
	t.Helper()
	nc := natstest.Connect(t, url)
	l, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return env{log: l, nc: nc}
}

// start runs a projection until the returned stop is called.
func start(t *testing.T, l *jetstream.Log) (*projection.Projection, func()) {
	t.Helper()
	p, err := projection.Open(context.Background(), l, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projection run: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return p, stop
}

func ptr(b bool) *bool { return &b }

// randomPayload draws one intent change.
func randomPayload(r *rand.Rand) events.Payload {
	names := []string{"bash", "grep", "read_file", "web_fetch", "playwright_browser"}
	tri := []*bool{nil, ptr(true), ptr(false)}
	switch r.IntN(7) {
	case 0:
		return events.ToolsToggled{Enabled: tri[r.IntN(3)]}
	case 1:
		return events.WebSearchSet{Enabled: tri[r.IntN(3)]}
	case 2:
		return events.PresetChosen{Preset: []string{"", "research", "coding"}[r.IntN(3)]}
	case 3:
		return events.ToolDisabled{Name: names[r.IntN(len(names))]}
	case 4:
		return events.ToolEnabled{Name: names[r.IntN(len(names))]}
	case 5:
		return events.DeferredLoaded{Names: []string{"playwright_browser"}, Turn: uint64(r.IntN(5))}
	default:
		return events.ToolsPicked{Names: []string{names[r.IntN(len(names))]}}
	}
}

// appendRandom appends n random events over sessions and returns the last
// stream sequence.
func appendRandom(t *testing.T, l *jetstream.Log, r *rand.Rand, sessions, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	var last uint64
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("s%03d", r.IntN(sessions))
		seq, err := l.LastSeq(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(ctx, s, seq, events.New(s, "web", "u", randomPayload(r)))
		if err != nil {
			t.Fatal(err)
		}
		last = res.Last
	}
	return last
}

func assertViewsEqualFold(t *testing.T, p *projection.Projection, l *jetstream.Log) {
	t.Helper()
	want := natstest.FoldLog(t, l)
	got, err := p.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("projection has %d sessions, fold has %d", len(got), len(want))
	}
	for s, w := range want {
		v, err := p.Read(context.Background(), s, projection.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("session %s:\nview %+v\nfold %+v", s, v, w)
		}
	}
}

// The projection equals a fresh fold of the log for random event
// sequences over many sessions.
func TestProjectionEqualsFold(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	r := rand.New(rand.NewPCG(1, 2))
	p, _ := start(t, e.log)
	last := appendRandom(t, e.log, r, 40, 800)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualFold(t, p, e.log)
}

// A projection stopped mid-stream and restarted catches up
// from where it stopped, and the result equals the fold.
func TestProjectionCatchUp(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	r := rand.New(rand.NewPCG(3, 4))
	p, stop := start(t, e.log)
	first := appendRandom(t, e.log, r, 20, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.WaitApplied(ctx, first); err != nil {
		t.Fatal(err)
	}
	stop()
	last := appendRandom(t, e.log, r, 20, 300) // written while no projection runs
	p2, _ := start(t, e.log)
	if err := p2.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if f := p2.Folded(); f != last-first {
		t.Fatalf("restarted projection folded %d events, want only the %d written while stopped", f, last-first)
	}
	assertViewsEqualFold(t, p2, e.log)
}

// The whole engine restarted on the same data directory loses
// nothing and its projection resumes.
func TestRestartSameDataDir(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	srv := natstest.ServerAt(t, dir)
	e := open(t, srv.ClientURL())
	p, stop := start(t, e.log)
	last := appendRandom(t, e.log, r, 10, 200)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	before := natstest.FoldLog(t, e.log)
	stop()
	e.nc.Close()
	srv.Shutdown()

	srv2 := natstest.ServerAt(t, dir)
	e2 := open(t, srv2.ClientURL())
	after := natstest.FoldLog(t, e2.log)
	if !reflect.DeepEqual(before, after) {
		t.Fatal("log after restart differs from before")
	}
	p2, _ := start(t, e2.log)
	more := appendRandom(t, e2.log, r, 10, 50)
	if err := p2.WaitApplied(ctx, more); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualFold(t, p2, e2.log)
}

// An undecodable or unknown event published straight to a session
// subject is reported and skipped; later events still apply.
func TestProjectionSkipsBadEvents(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	p, _ := start(t, e.log)
	ctx := context.Background()
	if _, err := e.log.Append(ctx, "s", 0, events.New("s", "web", "u", events.PresetChosen{Preset: "research"})); err != nil {
		t.Fatal(err)
	}
	js := e.log.JetStream()
	if _, err := js.Publish(ctx, e.log.Subject("s"), []byte{0xc1, 0x00}); err != nil {
		t.Fatal(err)
	}
	unknown := []byte("\x88\xa2id\xba01ARZ3NDEKTSV4RRFFQ69G5FAV\xa7session\xa1s\xa7channel\xa0\xa5actor\xa0\xa7time_ms\x00\xa1v\x02\xa4type\xa8Teleport\xa4data\x80")
	if _, err := js.Publish(ctx, e.log.Subject("s"), unknown); err != nil {
		t.Fatal(err)
	}
	res, err := e.log.Append(ctx, "s", 3, events.New("s", "web", "u", events.ToolDisabled{Name: "bash"}))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.WaitApplied(wctx, res.Last); err != nil {
		t.Fatal(err)
	}
	st, err := p.Read(ctx, "s", projection.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 2 || st.Intent.Preset != "research" || !reflect.DeepEqual(st.Intent.Disabled, []string{"bash"}) || st.LastSeq != 4 {
		t.Fatalf("state = %+v, want 2 skipped and both good events applied", st)
	}
	if p.Skipped() != 2 {
		t.Fatalf("projection reported %d skipped, want 2", p.Skipped())
	}
}

// Reads of a session with no events return the default intent;
// read-your-writes folds the tail the view lacks.
func TestReadDefaultsAndReadYourWrites(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	p, err := projection.Open(context.Background(), e.log, projection.Config{}) // not running
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := p.Read(ctx, "fresh", projection.ReadOptions{})
	if err != nil || st.Intent.Enabled != nil || st.LastSeq != 0 {
		t.Fatalf("empty session = %+v, %v; want follow-profile default", st, err)
	}
	res, err := e.log.Append(ctx, "fresh", 0, events.New("fresh", "tui", "bob", events.ToolsToggled{Enabled: ptr(false)}))
	if err != nil {
		t.Fatal(err)
	}
	st, err = p.Read(ctx, "fresh", projection.ReadOptions{MinSeq: res.Last})
	if err != nil {
		t.Fatal(err)
	}
	if st.Intent.Enabled == nil || *st.Intent.Enabled || st.LastSeq != res.Last {
		t.Fatalf("read-your-writes = %+v, want enabled=false at %d", st, res.Last)
	}
}

// Events delivered to a feed that stopped before acknowledging them are
// not lost when a later feed's acknowledgement (AckAll) covers them: the
// projection fills the gap from the log.
func TestProjectionFillsUnackedGap(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	r := rand.New(rand.NewPCG(7, 8))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, stop := start(t, e.log)
	first := appendRandom(t, e.log, r, 5, 20)
	if err := p.WaitApplied(ctx, first); err != nil {
		t.Fatal(err)
	}
	stop()
	// A feed on the projection's durable receives the next events and
	// stops without folding or acknowledging them, as a crashed
	// projection's buffer would.
	appendRandom(t, e.log, r, 5, 20)
	feed, err := e.log.Feed(ctx, jetstream.FeedConfig{Durable: "views"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := feed.Next(ctx, 100)
	if err != nil || len(b.Records) == 0 || b.Records[0].Seq != first+1 {
		t.Fatalf("feed got %d records from %v, %v; want them from %d", len(b.Records), b.Records, err, first+1)
	}
	feed.Stop()
	more := appendRandom(t, e.log, r, 5, 5)
	p2, _ := start(t, e.log)
	if err := p2.WaitApplied(ctx, more); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualFold(t, p2, e.log)
}

// Events that break a fold rule, published straight to the session
// subject, are kept in the log, not applied, reported to OnReject with the
// reason, counted, and listed in the view with their sequence; later
// events still apply, and the view equals a fresh fold of the log.
func TestProjectionRejectsBrokenRules(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	var mu sync.Mutex
	reported := map[uint64]string{}
	p, err := projection.Open(context.Background(), e.log, projection.Config{OnReject: func(rec logport.Record, reason error) {
		mu.Lock()
		reported[rec.Seq] = reason.Error()
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if _, err := e.log.Append(ctx, "s", 0, events.New("s", "web", "u", events.PresetChosen{Preset: "research"})); err != nil {
		t.Fatal(err)
	}
	js := e.log.JetStream()
	publish := func(env events.Envelope, msgID string) {
		t.Helper()
		b, err := events.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(e.log.Subject("s"))
		m.Data = b
		if msgID != "" {
			m.Header.Set("Nats-Msg-Id", msgID)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	wrap := events.New("s", "backend", "svc", events.TurnStarted{Turn: 1<<64 - 1})
	publish(wrap, wrap.ID)                                                                            // seq 2: turn out of order
	publish(events.New("s", "backend", "svc", events.PresetChosen{Preset: "coding"}), events.NewID()) // seq 3: another id
	res, err := e.log.Append(ctx, "s", 3, events.New("s", "web", "u", events.ToolDisabled{Name: "bash"}))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := p.WaitApplied(wctx, res.Last); err != nil {
		t.Fatal(err)
	}
	st, err := p.Read(ctx, "s", projection.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rejected != 2 || st.Turn != 0 || st.Intent.Preset != "research" || !reflect.DeepEqual(st.Intent.Disabled, []string{"bash"}) || st.LastSeq != 4 || st.Events != 2 {
		t.Fatalf("state = %+v, want 2 rejected and both good events applied", st)
	}
	if len(st.Rejections) != 2 || st.Rejections[0].Seq != 2 || st.Rejections[0].ID != wrap.ID || st.Rejections[1].Seq != 3 ||
		st.Rejections[0].Kind != aggregate.KindRejected || !strings.Contains(st.Rejections[0].Reason, "want the next turn 1") ||
		!strings.Contains(st.Rejections[1].Reason, "Nats-Msg-Id") {
		t.Fatalf("rejections = %+v", st.Rejections)
	}
	mu.Lock()
	if p.Rejected() != 2 || reported[2] != st.Rejections[0].Reason || reported[3] != st.Rejections[1].Reason {
		t.Fatalf("reported %d: %v, want the view's reasons at 2 and 3", p.Rejected(), reported)
	}
	mu.Unlock()
	assertViewsEqualFold(t, p, e.log)
}

// A view written before the fold rules (state version 1) is not
// trusted: it is rebuilt from the log, which may hold events it applied
// and a fold now rejects.
func TestOldViewRebuiltFromLog(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	p, err := projection.Open(ctx, e.log, projection.Config{}) // not running: reads only
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Append(ctx, "s", 0, events.New("s", "web", "u", events.PresetChosen{Preset: "research"})); err != nil {
		t.Fatal(err)
	}
	b, _ := events.Encode(events.New("s", "web", "u", events.ToolsPicked{Names: []string{"grep"}}))
	if _, err := e.log.JetStream().Publish(ctx, e.log.Subject("s"), b); err != nil { // no Nats-Msg-Id
		t.Fatal(err)
	}
	// A version-1 view that applied both events.
	v1 := []byte("\x84\xa1v\x01\xa7session\xa1s\xa6intent\x82\xa6preset\xa8research\xa6picked\x91\xa4grep\xa8last_seq\x02")
	if err := p.Views().PutAll(ctx, []jetstream.Put{{Key: "s", Value: v1}}); err != nil {
		t.Fatal(err)
	}
	st, err := p.Read(ctx, "s", projection.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Intent.Picked != nil || st.Intent.Preset != "research" || st.Rejected != 1 || st.LastSeq != 2 {
		t.Fatalf("state = %+v, want the old view rebuilt: picked unset, one rejection", st)
	}
}

// Run survives a failed feed (here a view write fails: the views
// bucket was deleted behind its back): it starts the feed again from the
// acknowledged position, Interruptions counts the failure with its error,
// and once the bucket is back the events after it are folded and
// acknowledged (the views the deleted bucket held are gone, as deleted).
func TestRunCountsInterruptions(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	r := rand.New(rand.NewPCG(9, 10))
	p, _ := start(t, e.log)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitApplied(ctx, appendRandom(t, e.log, r, 5, 20)); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Interruptions(); n != 0 || err != nil {
		t.Fatalf("before any failure: %d interruptions, last %v", n, err)
	}
	bucket := p.Views().Bucket()
	if err := e.log.JetStream().DeleteKeyValue(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	// A failed view write is reported at the next flush: keep writing.
	var last uint64
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		last = appendRandom(t, e.log, r, 5, 1)
		if n, _ := p.Interruptions(); n == 0 {
			return fmt.Errorf("no interruption counted after view writes into a deleted bucket")
		}
		return nil
	})
	if _, err := p.Interruptions(); err == nil {
		t.Fatal("interruption counted without its error")
	}
	if _, err := e.log.OpenViews(ctx, strings.TrimPrefix(bucket, strings.ToUpper(e.log.Prefix())+"_")); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatalf("after the interruption: %v", err)
	}
}

// Reconcile, run by engine rebuild, refolds only the views
// ahead of the log, and asks the stream's leader where each session is: a
// replica behind it answered "no events" for sessions written since, and
// Reconcile then replaced their views by a refold of what that replica
// held (the zero view), for events the feed had long acknowledged.
func TestReconcileKeepsViewsPastLaggingReplica(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	natstest.LaggingReplica(t, e.log)
	p, stop := start(t, e.log)
	// Appends that know where each session is (not asking the log).
	r := rand.New(rand.NewPCG(3, 4))
	at := map[string]uint64{}
	var last uint64
	for i := 0; i < 200; i++ {
		s := fmt.Sprintf("s%03d", r.IntN(20))
		res, err := e.log.Append(ctx, s, at[s], events.New(s, "web", "u", randomPayload(r)))
		if err != nil {
			t.Fatal(err)
		}
		at[s], last = res.Last, res.Last
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.WaitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	stop()
	for i := 0; i < 3; i++ {
		fixed, err := p.Reconcile(ctx)
		if err != nil || fixed != 0 {
			t.Fatalf("Reconcile %d of views in step with the log: fixed %d, %v; want 0, nil", i, fixed, err)
		}
	}
	assertViewsEqualFold(t, p, e.log)
}
