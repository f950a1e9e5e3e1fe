package projection_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// handAppend appends events to session as a writer of the projection's
// process does: in one append conditional on the session's last
// sequence, then handed over. It returns the append and whether the
// projection took it.
func handAppend(t *testing.T, l *jetstream.Log, p *projection.Projection, session string, pls ...events.Payload) (logport.AppendResult, bool) {
	t.Helper()
	ctx := context.Background()
	seq, err := l.LastSeq(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	envs := make([]events.Envelope, len(pls))
	for i, pl := range pls {
		envs[i] = events.New(session, "web", "u", pl)
	}
	ar, err := l.Append(ctx, session, seq, envs...)
	if err != nil {
		t.Fatal(err)
	}
	return ar, p.Handoff(projection.Acked{Session: session, Expected: seq, First: ar.First, Events: envs})
}

// unran opens a projection that does not run: its reads are KV gets of
// the views another projection wrote.
func unran(t *testing.T, l *jetstream.Log) *projection.Projection {
	t.Helper()
	p, err := projection.Open(context.Background(), l, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Events a writer hands over are delivered by the feed but neither
// decoded nor folded again (HandedOff counts exactly the ones taken);
// events of another writer, and handed events whose fold needs the
// registry in force (refused), are folded from the log; the views written
// to KV equal a fresh fold of the log.
func TestHandoffFeedSkipsHandedEvents(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	p, _ := start(t, e.log)
	r := rand.New(rand.NewPCG(28, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var taken, refused, last uint64
	for i := range 600 {
		s := fmt.Sprintf("h%02d", r.IntN(20))
		if i%5 == 4 {
			last = appendRandom(t, e.log, r, 20, 1) // another writer: nothing handed over
			continue
		}
		pl := randomPayload(r)
		ar, ok := handAppend(t, e.log, p, s, pl)
		last = ar.Last
		switch {
		case ok:
			taken++
			if aggregate.NeedsRegistry(events.New(s, "web", "u", pl)) {
				t.Fatalf("handoff of %T taken: its fold needs the registry in force", pl)
			}
			// Read-your-writes from the projection's memory at once.
			v, err := p.Read(ctx, s, projection.ReadOptions{MinSeq: ar.Last})
			if err != nil || v.LastSeq != ar.Last {
				t.Fatalf("read %s after handoff at %d: seq %d, %v", s, ar.Last, v.LastSeq, err)
			}
		default:
			refused++
		}
	}
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if taken == 0 || refused == 0 {
		t.Fatalf("taken %d, refused %d: want both", taken, refused)
	}
	if got := p.HandedOff(); got != taken {
		t.Fatalf("feed skipped %d handed events, want the %d taken", got, taken)
	}
	assertViewsEqualFold(t, unran(t, e.log), e.log)
}

// A crash after the writer's acknowledged events were handed over
// and delivered, before their views were written and acknowledged, loses
// nothing: a new projection on the same durable folds them from the log.
func TestHandoffCrashBeforeViewWrite(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := appendRandom(t, e.log, rand.New(rand.NewPCG(28, 2)), 3, 10)
	// The crashing projection has its own connection and never flushes on
	// its own (an hour's window).
	c := open(t, srv.ClientURL())
	p, err := projection.Open(ctx, c.log, projection.Config{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { rcancel(); <-done }()
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if p.Cached() == 0 {
			return errors.New("the projection has not folded the first events")
		}
		return nil
	})
	var want uint64
	for i := range 20 {
		_, ok := handAppend(t, e.log, p, "crash1", events.ToolDisabled{Name: fmt.Sprintf("t%02d", i)})
		if ok {
			want++
		}
	}
	if want == 0 {
		t.Fatal("no handoff taken")
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if p.HandedOff() < want {
			return fmt.Errorf("feed delivered %d of %d handed events", p.HandedOff(), want)
		}
		return nil
	})
	c.nc.Close() // the crash: nothing more reaches the server
	if data, _, err := unran(t, e.log).Views().GetRev(ctx, "crash1"); err != nil || data != nil {
		t.Fatalf("view of crash1 written before the crash (%d bytes, %v): the test does not crash where it should", len(data), err)
	}
	if p.Applied() > before {
		t.Fatalf("crashed projection acknowledged up to %d, want nothing of crash1 (after %d)", p.Applied(), before)
	}
	p2, _ := start(t, e.log)
	last, err := e.log.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	assertViewsEqualFold(t, unran(t, e.log), e.log)
}

// What "verify" means. The feed checks each handed event it delivers
// by session, stream sequence and Nats-Msg-Id; an event at a handed
// sequence that is not the one handed over stops the feed
// (ErrHandoffMismatch), which starts again from the views and folds the
// log's event: the view is the log's, not the writer's. (A paced feed
// delivers no handed event it can skip: it takes the log's
// acknowledgement, which the handoff carries, as the check. This feed is
// a standing pull, which delivers every event.)
func TestHandoffMismatchFoldsTheLog(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	p, err := projection.Open(context.Background(), e.log, projection.Config{Pace: -1})
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ar, _ := handAppend(t, e.log, p, "mm", events.ToolDisabled{Name: "bash"})
	if err := p.WaitApplied(ctx, ar.Last); err != nil {
		t.Fatal(err)
	}
	// A writer that hands over an event the log does not hold at that
	// sequence (the stream is quiet: the next append gets ar.Last+1).
	fake := events.New("mm", "web", "u", events.ToolDisabled{Name: "grep"})
	if !p.Handoff(projection.Acked{Session: "mm", Expected: ar.Last, First: ar.Last + 1, Events: []events.Envelope{fake}}) {
		t.Fatal("handoff not taken")
	}
	real, err := e.log.Append(ctx, "mm", ar.Last, events.New("mm", "web", "u", events.ToolDisabled{Name: "read_file"}))
	if err != nil || real.First != ar.Last+1 {
		t.Fatalf("append at %d: %+v, %v", ar.Last+1, real, err)
	}
	if err := p.WaitApplied(ctx, real.Last); err != nil {
		t.Fatal(err)
	}
	n, lastErr := p.Interruptions()
	if n == 0 || !errors.Is(lastErr, projection.ErrHandoffMismatch) {
		t.Fatalf("interruptions %d, last %v: want ErrHandoffMismatch", n, lastErr)
	}
	v, err := unran(t, e.log).Read(ctx, "mm", projection.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(v.Intent.Disabled); got != "[bash read_file]" {
		t.Fatalf("view disables %s, want the log's [bash read_file]", got)
	}
	assertViewsEqualFold(t, p, e.log)
}

// blockingViews holds every view write, once block is set, until its
// context ends: a projection whose flush never completes.
type blockingViews struct {
	projection.ViewStore
	block atomic.Bool
}

func (b *blockingViews) PutAllSeq(ctx context.Context, puts []jetstream.Put) ([]uint64, error) {
	if b.block.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.ViewStore.PutAllSeq(ctx, puts)
}

// The paced feed skips the events a writer handed over (no
// delivery) and moves the consumer past them, which acknowledges them
// before their views are written. A crash then (the consumer's
// acknowledged position past the events, the watermark and the views
// behind them) loses nothing: a new projection on the same durable starts
// from the watermark and folds them from the log.
func TestHandoffSkipCrashBeforeViewWrite(t *testing.T) {
	// The crash needs events the feed skipped. A feed that pulls between
	// an append's acknowledgement and its handoff (the writer descheduled
	// for a pace on a loaded machine) delivers them instead and the
	// handoff is refused, as it should be: the attempt starts over on a
	// fresh server.
	for attempt := 1; !skipCrashBeforeViewWrite(t); attempt++ {
		if attempt == 3 {
			t.Fatal("the handoff was refused in 3 attempts: the feed pulled the events before each")
		}
	}
}

// skipCrashBeforeViewWrite runs TestHandoffSkipCrashBeforeViewWrite once
// on a fresh server; false when the feed delivered the events before
// their handoff (nothing to skip).
func skipCrashBeforeViewWrite(t *testing.T) bool {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The crashing projection has its own connection. Its pace (the
	// pulls of an idle feed at most 8 paces apart) leaves the writer
	// room between the acknowledgement and the handoff.
	c := open(t, srv.ClientURL())
	p, err := projection.Open(ctx, c.log, projection.Config{Pace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	views := &blockingViews{}
	projection.WrapViews(p, func(v projection.ViewStore) projection.ViewStore { views.ViewStore = v; return views })
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { rcancel(); <-done }()
	// A first window written (views and watermark): the feed may skip.
	ar, _ := handAppend(t, e.log, p, "crash2", events.ToolDisabled{Name: "bash"})
	if err := p.WaitApplied(ctx, ar.Last); err != nil {
		t.Fatal(err)
	}
	views.block.Store(true)
	pls := make([]events.Payload, 20)
	for i := range pls {
		pls[i] = events.ToolDisabled{Name: fmt.Sprintf("t%02d", i)}
	}
	ar, ok := handAppend(t, e.log, p, "crash2", pls...)
	if !ok {
		t.Logf("the handoff of %d..%d was refused: the feed delivered them first", ar.First, ar.Last)
		return false
	}
	last := ar.Last
	cons, err := e.log.JetStream().Consumer(ctx, e.log.StreamName(), projection.DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream < last {
			return fmt.Errorf("consumer acknowledged up to %d, want the skipped events up to %d", info.AckFloor.Stream, last)
		}
		return nil
	})
	folded, _, err := p.Meta().Watermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if folded >= last {
		t.Fatalf("watermark at %d: the views of the events up to %d were written: the test does not crash where it should", folded, last)
	}
	c.nc.Close() // the crash: nothing more reaches the server
	p2, _ := start(t, e.log)
	if err := p2.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	v, err := unran(t, e.log).Read(ctx, "crash2", projection.ReadOptions{})
	if err != nil || v.LastSeq != last || len(v.Intent.Disabled) != 21 {
		t.Fatalf("view of crash2 after the restart: seq %d, %d disabled (%v): want seq %d, 21 disabled", v.LastSeq, len(v.Intent.Disabled), err, last)
	}
	assertViewsEqualFold(t, unran(t, e.log), e.log)
	return true
}
