package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// stalledEngines returns n engines on one log whose projection never runs:
// the views bucket stays empty, so any read served from a view without
// folding the log is visibly stale (deterministically, not by timing).
func stalledEngines(t *testing.T, n int, cfg service.Config) []*service.Engine {
	t.Helper()
	ctx := context.Background()
	srv := natstest.Server(t)
	var out []*service.Engine
	for range n {
		nc := natstest.Connect(t, srv.ClientURL())
		log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		proj, err := projection.Open(ctx, log, projection.Config{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, service.New(log, proj, resolver.Default(), cfg))
	}
	return out
}

// A write acknowledged by an engine is in every read through that
// engine without min_seq, even when the projection has not folded it at
// all: the session view, the resolution, a frozen turn's dispatch (intent
// at the sequence of its tools), history and explain.
func TestReadYourWritesWithoutMinSeq(t *testing.T) {
	t.Parallel()
	e := stalledEngines(t, 1, service.Config{})[0]
	ctx := context.Background()
	w, err := e.Apply(ctx, "s", web, nil, events.PresetChosen{Preset: "research"}, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if applied := e.Projection().Applied(); applied != 0 {
		t.Fatalf("projection applied %d: the test needs a projection that folded nothing", applied)
	}
	st, err := e.Session(ctx, "s", 0)
	if err != nil || st.LastSeq != w.Last || st.Intent.Preset != "research" {
		t.Fatalf("session after write at %d: seq %d intent %+v err %v", w.Last, st.LastSeq, st.Intent, err)
	}
	v, err := e.Resolve(ctx, "s", service.ResolveRequest{})
	if err != nil || v.Seq != w.Last || v.Source != "session-intent" || slices.Contains(v.Tools, "bash") {
		t.Fatalf("resolve after write at %d: seq %d source %s tools %v err %v", w.Last, v.Seq, v.Source, v.Tools, err)
	}
	bt, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Dispatch(ctx, "s", "")
	if err != nil || d.Seq < bt.Seq || d.Intent.Preset != "research" || !slices.Equal(d.Tools, bt.Tools) {
		t.Fatalf("dispatch of the turn frozen at %d: seq %d intent %+v tools %v err %v", bt.Seq, d.Seq, d.Intent, d.Tools, err)
	}
	h, hst, err := e.History(ctx, "s", service.Until{}, service.ResolveRequest{})
	if err != nil || hst.LastSeq != bt.Seq || len(h) != int(bt.Seq) {
		t.Fatalf("history: %d entries, at %d, err %v; want %d", len(h), hst.LastSeq, err, bt.Seq)
	}
	x, err := e.Explain(ctx, "s", "bash", service.Until{}, service.ResolveRequest{})
	if err != nil || x.Seq != bt.Seq || x.Event == nil {
		t.Fatalf("explain bash: %+v err %v, want an event blamed, at %d", x, err, bt.Seq)
	}
}

// Monotonic reads. Engine b wrote; engine a read it with min_seq;
// a's later reads without min_seq never go back to the (empty) view.
func TestMonotonicReadsWithinOneEngine(t *testing.T) {
	t.Parallel()
	es := stalledEngines(t, 2, service.Config{})
	a, b := es[0], es[1]
	ctx := context.Background()
	w, err := b.Apply(ctx, "s", web, nil, events.PresetChosen{Preset: "research"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := a.Session(ctx, "s", w.Last); err != nil || st.LastSeq != w.Last {
		t.Fatalf("read with min_seq %d: at %d, err %v", w.Last, st.LastSeq, err)
	}
	for i := range 3 {
		st, err := a.Session(ctx, "s", 0)
		if err != nil || st.LastSeq < w.Last || st.Intent.Preset != "research" {
			t.Fatalf("read %d without min_seq after serving %d: at %d intent %+v err %v", i, w.Last, st.LastSeq, st.Intent, err)
		}
		v, err := a.Resolve(ctx, "s", service.ResolveRequest{})
		if err != nil || v.Seq < w.Last {
			t.Fatalf("resolve %d after serving %d: at %d err %v", i, w.Last, v.Seq, err)
		}
	}
	// Across engines the contract is min_seq: b's write is not a's mark.
	// A sequence no replica has within the bound is an error (503 over the
	// API), not a stale read: the wait ends at the bound (ErrNotCaughtUp)
	// or at the caller's deadline, whichever comes first; under load the
	// deadline can end a log read inside the wait.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if st, err := a.Session(sctx, "s", w.Last+100); !errors.Is(err, projection.ErrNotCaughtUp) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read at a sequence the log lacks: at %d, err %v; want ErrNotCaughtUp or the deadline", st.LastSeq, err)
	}
}

// The per-session marks are bounded by Config.CacheSize.
func TestConsistencyMarksBounded(t *testing.T) {
	t.Parallel()
	e := stalledEngines(t, 1, service.Config{CacheSize: 10})[0]
	ctx := context.Background()
	for i := range 40 {
		if _, err := e.Apply(ctx, fmt.Sprintf("s%d", i), web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := service.MarksLen(e); n > 10 || n < 5 {
		t.Fatalf("%d marks held for 40 sessions with CacheSize 10, want 5..10", n)
	}
	// The most recent session keeps its mark: read-your-writes holds.
	if st, err := e.Session(ctx, "s39", 0); err != nil || st.LastSeq == 0 {
		t.Fatalf("latest session read at %d, err %v", st.LastSeq, err)
	}
}
