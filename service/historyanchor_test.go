package service_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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

// countingLog counts the events a scan of the log hands on.
type countingLog struct {
	service.Log
	scanned atomic.Int64
}

func (c *countingLog) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error {
	return c.Log.ScanSession(ctx, session, from, upTo, func(r logport.Record) error {
		c.scanned.Add(1)
		return fn(r)
	})
}

// A page deep in a long session's history starts from the projection's
// nearest history anchor: it folds a bounded number of events before the
// page (about AnchorEvery), wherever the page starts, on an engine that
// never read the session (no page of it ended there), and its entries are
// those of the whole history, turns included. The projection folds on
// another engine than the writer's, from its deliveries alone: a writer's
// handoff folds ahead of the deliveries, and an anchor is taken only where
// a delivery meets the state, so under load a hot session's anchors can
// come later than each multiple.
func TestDeepHistoryPageFoldsFromAnAnchor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, _ := anchoredEngine(t)
	const n = 12 * projection.AnchorEvery
	for i := 0; i < n; i++ {
		var p events.Payload = events.ToolDisabled{Name: "bash"}
		if i%2 == 1 {
			p = events.ToolEnabled{Name: "bash"}
		}
		if i%100 == 50 {
			if _, err := e.BeginTurn(ctx, "long", web, service.ResolveRequest{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.EndTurn(ctx, "long", web); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Apply(ctx, "long", web, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	whole, st, err := e.History(ctx, "long", service.Until{}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the projection has folded the session (its anchors are
	// written with the views).
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		last := st.LastSeq
		if _, ok, err := proj.HistoryAnchor(ctx, "long", last); err != nil || !ok {
			return fmt.Errorf("no anchor yet (%v)", err)
		}
		a, _, _ := proj.HistoryAnchor(ctx, "long", last)
		if a.Seq < last-2*projection.AnchorEvery-100 {
			return fmt.Errorf("last anchor at %d, log at %d", a.Seq, last)
		}
		return nil
	})
	cl := &countingLog{Log: log}
	fresh := service.NewFromPorts(service.Ports{Log: cl, Views: proj}, e.Registry(), service.Config{})
	hist, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fresh.SetRegistryHistory(hist)
	for _, at := range []int{0, n / 3, n / 2, len(whole) - 30} {
		after := uint64(0)
		if at > 0 {
			after = whole[at-1].Seq
		}
		cl.scanned.Store(0)
		var page []service.HistoryEntry
		if _, _, err := fresh.HistoryPage(ctx, "long", service.Until{}, service.ResolveRequest{}, after, func(h service.HistoryEntry) bool {
			page = append(page, h)
			return len(page) < 20
		}); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(page)
		want, _ := json.Marshal(whole[at:min(at+20, len(whole))])
		if string(got) != string(want) {
			t.Fatalf("page after %d differs from the whole history:\n%s\nwant\n%s", after, got, want)
		}
		scanned := cl.scanned.Load()
		// The anchor before the page is at most AnchorEvery events before
		// it, or the one before that where a turn was open at a multiple.
		if bound := int64(2 * projection.AnchorEvery); at > projection.AnchorEvery && scanned > bound {
			t.Errorf("page after %d (entry %d of %d) scanned %d events, want at most %d", after, at, len(whole), scanned, bound)
		}
		t.Logf("page after entry %d of %d: %d events scanned", at, len(whole), scanned)
	}
}

// deepSession appends a session "deep" of 100,000 events (100 per append)
// on a fresh server with a running projection, and waits until the
// projection has written its history anchors.
func deepSession(b *testing.B) (*service.Engine, *jetstream.Log, *projection.Projection) {
	ctx := context.Background()
	url := natstest.Server(b).ClientURL()
	e, log := stackOn(b, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	const total = 100_000
	var last uint64
	for i := 0; i < total; i += 100 {
		envs := make([]events.Envelope, 100)
		for j := range envs {
			var p events.Payload = events.ToolDisabled{Name: "bash"}
			if (i+j)%2 == 1 {
				p = events.ToolEnabled{Name: "bash"}
			}
			envs[j] = events.New("deep", "web", "alice", p)
		}
		r, err := log.Append(ctx, "deep", last, envs...)
		if err != nil {
			b.Fatal(err)
		}
		last = r.Last
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		b.Fatal(err)
	}
	natstest.CheckFor(b, 5*time.Minute, 100*time.Millisecond, func() error {
		if a, ok, err := proj.HistoryAnchor(ctx, "deep", last); err != nil || !ok || a.Seq < last-projection.AnchorEvery {
			return fmt.Errorf("anchors not written up to %d yet (%v)", last, err)
		}
		return nil
	})
	return e, log, proj
}

// BenchmarkHistoryPageAtDepth reads one page of 100 entries of a session
// of 100,000 events after 0, 10,000 and 99,000 of them, on an engine that
// never read the session (each page starts from the nearest history anchor
// the projection wrote, or from the first event).
func BenchmarkHistoryPageAtDepth(b *testing.B) {
	ctx := context.Background()
	_, log, proj := deepSession(b)
	for _, depth := range []uint64{0, 10_000, 99_000, 99_000 + projection.AnchorEvery - 1} {
		b.Run(fmt.Sprintf("after=%d", depth), func(b *testing.B) {
			for b.Loop() {
				fresh := service.NewFromPorts(service.Ports{Log: log, Views: proj}, resolver.Default(), service.Config{})
				n := 0
				if _, _, err := fresh.HistoryPage(ctx, "deep", service.Until{}, service.ResolveRequest{}, depth, func(service.HistoryEntry) bool {
					n++
					return n < 100
				}); err != nil || n != 100 {
					b.Fatalf("page after %d: %d entries, %v", depth, n, err)
				}
			}
		})
	}
}

// BenchmarkAppendBesideDeepHistoryReaders times appends (a toggle of
// another session, one at a time) while 0 or 16 readers loop over pages
// of 100 entries at depth 99,000 of a 100,000-event session on the same
// engine, and reports their p50 and p99. The engine reads pages on a
// connection of their own, as engine serve does.
func BenchmarkAppendBesideDeepHistoryReaders(b *testing.B) {
	ctx := context.Background()
	_, log, proj := deepSession(b)
	pages, err := log.OnConn(natstest.Connect(b, log.Conn().ConnectedUrl()))
	if err != nil {
		b.Fatal(err)
	}
	e := service.NewFromPorts(service.Ports{Log: log, Views: proj, Pages: pages}, resolver.Default(), service.Config{})
	for _, readers := range []int{0, 16} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			// Each run appends to sessions of its own: a toggle repeated on
			// a session of an earlier run (-count) writes nothing.
			run := time.Now().UnixNano()
			rctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			var pagesRead atomic.Int64
			began := time.Now()
			for range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for rctx.Err() == nil {
						n := 0
						_, _, err := e.HistoryPage(rctx, "deep", service.Until{}, service.ResolveRequest{}, 99_000, func(service.HistoryEntry) bool {
							n++
							return n < 100
						})
						if err == nil && n == 100 {
							pagesRead.Add(1)
						}
					}
				}()
			}
			var took []time.Duration
			i := 0
			for b.Loop() {
				i++
				p := events.ToolDisabled{Name: "bash"}
				start := time.Now()
				if _, err := e.Apply(ctx, fmt.Sprintf("w-%d-%d-%d", readers, run, i), web, nil, p); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			cancel()
			wg.Wait()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
			// The readers' progress: pages of 100 entries completed per
			// second, all readers together.
			b.ReportMetric(float64(pagesRead.Load())/time.Since(began).Seconds(), "pages/s")
		})
	}
}

// After a compaction forgets a session's anchors, the anchors taken after
// it are found: they start at a high index (the session's event count runs
// on), and a lookup that took the forgotten indices below them for later
// ones would fold a deep page from the compaction on.
func TestHistoryAnchorsAfterCompactionAreFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _, runner := anchoredEngine(t)
	appendToggles(t, e, "compacted", 20)
	if _, err := e.Compact(ctx, "compacted", compactor, "test"); err != nil {
		t.Fatal(err)
	}
	last := appendToggles(t, e, "compacted", 20)
	if err := runner.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	a, ok, err := runner.HistoryAnchor(ctx, "compacted", last)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || a.Seq+2*projection.AnchorEvery < last {
		t.Fatalf("anchor before %d: found %v at %d, want one within %d events", last, ok, a.Seq, 2*projection.AnchorEvery)
	}
	mid := last - 10*projection.AnchorEvery
	if a, ok, err := runner.HistoryAnchor(ctx, "compacted", mid); err != nil || !ok || a.Seq > mid || a.Seq+2*projection.AnchorEvery < mid {
		t.Fatalf("anchor before %d: found %v at %d (%v), want one within %d events", mid, ok, a.Seq, err, 2*projection.AnchorEvery)
	}
}

// An erase leaves none of the session's history anchors, nor its base,
// in the anchors' bucket.
func TestEraseForgetsHistoryAnchors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log, runner := anchoredEngine(t)
	last := appendToggles(t, e, "erased", 4)
	if err := runner.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	idx, err := log.OpenHistoryIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, ok, err := idx.Get(ctx, "erased", 4); err != nil || !ok {
			return fmt.Errorf("anchor 4 not written yet (%v)", err)
		}
		return nil
	})
	if _, err := e.Erase(ctx, "erased", web, ""); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, _, ok, err := idx.Base(ctx, "erased"); err != nil || ok {
			return fmt.Errorf("the base is still there (%v)", err)
		}
		for i := uint64(1); i <= 5; i++ {
			if _, ok, err := idx.Get(ctx, "erased", i); err != nil || ok {
				return fmt.Errorf("anchor %d is still there (%v)", i, err)
			}
		}
		return nil
	})
}

// anchoredEngine is an engine without a projection of its own, with an
// eraser, beside a projection runner fed by the stream's deliveries alone
// (no writer's handoff: its anchors fall exactly at their multiples).
func anchoredEngine(t *testing.T) (*service.Engine, *jetstream.Log, *projection.Projection) {
	t.Helper()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	e, log := engineAt(t, url, resolver.Default(), false)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	runner, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = runner.Run(rctx) }()
	t.Cleanup(func() { stop(); <-ran })
	return e, log, runner
}

// appendToggles appends n batches of AnchorEvery toggles of bash to
// session, one append each, and returns the last sequence.
func appendToggles(t *testing.T, e *service.Engine, session string, n int) uint64 {
	t.Helper()
	var last uint64
	for b := range n {
		ps := make([]events.Payload, projection.AnchorEvery)
		for i := range ps {
			ps[i] = events.ToolDisabled{Name: "bash"}
			if (b*len(ps)+i)%2 == 1 {
				ps[i] = events.ToolEnabled{Name: "bash"}
			}
		}
		r, err := e.Apply(context.Background(), session, web, nil, ps...)
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	return last
}

// A projection that starts after a session's compaction (a catch-up of
// the log as it is: the compacted events are purged) takes anchors only
// after the compaction, none below the base it records.
func TestProjectionAfterACompactionAnchorsFromItsBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	e, log := engineAt(t, url, resolver.Default(), false)
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	appendToggles(t, e, "caught", 3)
	res, err := e.Compact(ctx, "caught", compactor, "test")
	if err != nil {
		t.Fatal(err)
	}
	last := appendToggles(t, e, "caught", 3)
	runner, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = runner.Run(rctx) }()
	t.Cleanup(func() { stop(); <-ran })
	if err := runner.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	idx, err := log.OpenHistoryIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		base, _, ok, err := idx.Base(ctx, "caught")
		if err != nil || !ok {
			return fmt.Errorf("no base yet (%v)", err)
		}
		for i := uint64(1); i <= 7; i++ {
			b, ok, err := idx.Get(ctx, "caught", i)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if seq := binary.BigEndian.Uint64(b); seq < res.Seq {
				return fmt.Errorf("anchor %d at sequence %d, before the compaction at %d", i, seq, res.Seq)
			}
			if i < base {
				return fmt.Errorf("anchor %d below the base %d", i, base)
			}
		}
		return nil
	})
}
