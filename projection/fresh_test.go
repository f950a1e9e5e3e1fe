package projection_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// countingViews counts the view reads of the projection.
type countingViews struct {
	projection.ViewStore
	gets atomic.Int64
}

func (c *countingViews) GetRev(ctx context.Context, key string) ([]byte, uint64, error) {
	c.gets.Add(1)
	return c.ViewStore.GetRev(ctx, key)
}

// runFor runs p until the returned stop is called.
func runFor(t *testing.T, p *projection.Projection) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projection run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func toggled(s string, on bool) events.Envelope {
	return events.New(s, "web", "alice", events.ToolsToggled{Enabled: &on})
}

// A running projection with more sessions
// than its cache issues no view read for a new session's first event (the
// log stored it on the condition that the session was empty), and the
// sessions it evicted still read back whole, their next events folded
// over the stored view (one view per session, never a replay).
func TestNewSessionsNeedNoViewRead(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// A first run acknowledges something, so the second one is not a
	// rebuild from the first event (no trusted cache).
	r, err := log.Append(ctx, "warm", 0, toggled("warm", true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := projection.Open(ctx, log, projection.Config{CacheSize: 10, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	stop := runFor(t, p)
	if err := p.WaitApplied(ctx, r.Last); err != nil {
		t.Fatal(err)
	}
	stop()

	p, err = projection.Open(ctx, log, projection.Config{CacheSize: 10, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	cv := &countingViews{}
	projection.WrapViews(p, func(v projection.ViewStore) projection.ViewStore { cv.ViewStore = v; return cv })
	runFor(t, p)
	// Events the first run's feed was handed but never acknowledged (its
	// pull request outlives it) are read conservatively by the second:
	// wait until that one folds an event of its own.
	r, err = log.Append(ctx, "probe", 0, toggled("probe", true))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitApplied(ctx, r.Last); err != nil {
		t.Fatal(err)
	}
	cv.gets.Store(0)
	var last uint64
	for i := range 60 {
		s := fmt.Sprintf("s%d", i)
		r, err := log.Append(ctx, s, 0, toggled(s, i%2 == 0))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Interruptions(); n > 0 {
		t.Logf("interrupted %d: %v", n, err)
	}
	if n := cv.gets.Load(); n != 0 {
		t.Fatalf("%d view reads for 60 first events of new sessions, want 0", n)
	}
	// s0 was evicted: its second event is folded over its stored view.
	st, err := p.Read(ctx, "s0", projection.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err = log.Append(ctx, "s0", st.LastSeq, toggled("s0", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitApplied(ctx, r.Last); err != nil {
		t.Fatal(err)
	}
	st, err = p.Read(ctx, "s0", projection.ReadOptions{})
	if err != nil || st.LastSeq != r.Last || st.Intent.Enabled == nil || *st.Intent.Enabled {
		t.Fatalf("s0 after its second event: seq %d (want %d) intent %+v, %v", st.LastSeq, r.Last, st.Intent, err)
	}
}

// A projection rebuilding from the first event reads no view
// for a session it never held, even past its cache size, and reads back
// the view of a session it evicted when that session comes again.
func TestRebuildReadsOnlyEvictedViews(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 60 {
		s := fmt.Sprintf("s%d", i)
		r, err := log.Append(ctx, s, 0, toggled(s, true))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	// The second round: every session again, after the first 60 were
	// folded and most of them evicted.
	p, err := projection.Open(ctx, log, projection.Config{CacheSize: 10, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	cv := &countingViews{}
	projection.WrapViews(p, func(v projection.ViewStore) projection.ViewStore { cv.ViewStore = v; return cv })
	runFor(t, p)
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n := cv.gets.Load(); n != 0 {
		t.Fatalf("%d view reads while rebuilding 60 new sessions, want 0", n)
	}
	for i := range 60 {
		s := fmt.Sprintf("s%d", i)
		r, err := log.Append(ctx, s, uint64(i+1), toggled(s, false))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n := cv.gets.Load(); n < 40 || n > 60 {
		t.Fatalf("%d view reads for 60 sessions coming again (about 50 evicted), want 40..60", n)
	}
	for i := range 60 {
		s := fmt.Sprintf("s%d", i)
		st, err := p.Read(ctx, s, projection.ReadOptions{})
		if err != nil || st.Intent.Enabled == nil || *st.Intent.Enabled || st.LastSeq <= 60 {
			t.Fatalf("%s after its second event: seq %d intent %+v, %v", s, st.LastSeq, st.Intent, err)
		}
	}
}
