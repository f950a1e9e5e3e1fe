package projection_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// orderedCatchUp runs fn with every rebuild folding through the ordered
// consumer, however short the backlog.
func orderedCatchUp(t *testing.T) {
	t.Helper()
	old := projection.SetOrderedCatchUpMin(1)
	t.Cleanup(func() { projection.SetOrderedCatchUpMin(old) })
}

// A new projection rebuilds its views through an ordered
// consumer while writers go on appending; the views equal the fold, every
// event is folded once, the durable feed starts after the rebuilt backlog
// (acknowledged up to it, not from the first event), and the rebuilt
// sessions stay cached: neither the rebuild nor the events after it nor
// the reads read a view back.
func TestOrderedCatchUpEqualsFold(t *testing.T) {
	orderedCatchUp(t)
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	r := rand.New(rand.NewPCG(7, 8))
	appendRandom(t, e.log, r, 40, 1500)
	p, err := projection.Open(context.Background(), e.log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cv := &countingViews{}
	projection.WrapViews(p, func(v projection.ViewStore) projection.ViewStore { cv.ViewStore = v; return cv })
	runFor(t, p)
	var wg sync.WaitGroup
	var last uint64
	wg.Go(func() { last = appendRandom(t, e.log, rand.New(rand.NewPCG(9, 10)), 40, 300) })
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualFold(t, p, e.log)
	if f := p.Folded(); f != last {
		t.Fatalf("folded %d events, want each of the %d once", f, last)
	}
	if n := cv.gets.Load(); n != 0 {
		t.Fatalf("%d view reads after rebuilding 40 sessions that stay cached, want 0", n)
	}
	pos, found, err := e.log.FeedPosition(ctx, projection.DefaultDurable)
	if err != nil || !found || pos.AckedNone || pos.AckFloor < 1500 {
		t.Fatalf("feed after the rebuild: %+v found %v %v; want acknowledged past the 1,500 events rebuilt", pos, found, err)
	}
}

// A rebuild stopped as soon as its views are written, before or while
// its durable feed is created past them (a crash or shutdown there): the
// next start rebuilds again or goes on after the acknowledged backlog,
// and the views equal the fold either way.
func TestOrderedCatchUpStoppedMidway(t *testing.T) {
	orderedCatchUp(t)
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	r := rand.New(rand.NewPCG(11, 12))
	last := appendRandom(t, e.log, r, 30, 1200)
	ctx := context.Background()
	p, err := projection.Open(ctx, e.log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	natstest.CheckFor(t, 20*time.Second, time.Millisecond, func() error {
		if p.Applied() == 0 {
			return fmt.Errorf("no views written yet")
		}
		return nil
	})
	cancel()
	<-done
	p2, _ := start(t, e.log)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := p2.WaitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualFold(t, p2, e.log)
}

// The rebuild tests of the durable feed hold through the ordered consumer
// too: erased sequences, a restart after the rebuild. (No view read
// during a rebuild: TestOrderedCatchUpEqualsFold. How many views a rebuild
// with a small cache reads back later depends on its flush windows, which
// the ordered catch-up sizes as catch-up windows: not the durable feed's
// TestRebuildReadsOnlyEvictedViews figures.)
func TestOrderedCatchUpRebuilds(t *testing.T) {
	orderedCatchUp(t)
	t.Run("after erase", TestRebuildAfterErase)
	t.Run("restart catches up", TestProjectionCatchUp)
}

// A user not allowed to reset consumers (the server drops the
// request): the feed starts where it was after the rebuild, without
// waiting the log's timeout for an answer, and folds the rebuilt events
// again as repeats; the views equal the fold.
func TestOrderedCatchUpWithoutReset(t *testing.T) {
	orderedCatchUp(t)
	perms := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.CONSUMER.RESET.>"}}}
	srv := natstest.ServerWith(t, server.Options{Users: []*server.User{{Username: "eng", Password: "pw", Permissions: perms}}})
	nc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("eng", "pw"))
	ctx := context.Background()
	// A log timeout far above the test's bound: a feed start that waited
	// it out for the refused reset's answer fails the bound below.
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	last := appendRandom(t, l, rand.New(rand.NewPCG(13, 14)), 20, 400)
	began := time.Now()
	p, _ := start(t, l)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.WaitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
		if !p.CaughtUp() {
			return fmt.Errorf("not caught up")
		}
		return nil
	})
	if d := time.Since(began); d > time.Minute {
		t.Fatalf("rebuild and feed start took %v without consumer resets: waited out the log's timeout (2m)", d)
	}
	assertViewsEqualFold(t, p, l)
}
