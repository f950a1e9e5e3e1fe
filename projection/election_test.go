package projection_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// elected runs an electing projection on its own connection; kill closes
// the connection first (a dead process: the lease is not released) and
// then ends Run.
func elected(t *testing.T, url, owner string) (p *projection.Projection, kill func()) {
	t.Helper()
	e := open(t, url)
	p, err := projection.Open(context.Background(), e.log, projection.Config{
		Elect: true, Owner: owner, LeaseTTL: time.Second, RenewEvery: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			e.nc.Close()
			cancel()
			<-done
		})
	}
	t.Cleanup(kill)
	return p, kill
}

// Two engines on one stream elect one projection runner; the
// other takes over within seconds when the runner dies without releasing
// its lease, never both fold at once, and every view in KV then equals a
// serial fold of the log.
func TestRunnerElectionTakeover(t *testing.T) {
	srv := natstest.Server(t)
	w := open(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pa, killA := elected(t, srv.ClientURL(), "engine-a")
	pb, killB := elected(t, srv.ClientURL(), "engine-b")
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if pa.Runner() == pb.Runner() {
			return errors.New("not exactly one runner")
		}
		return nil
	})
	var both atomic.Int64
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Millisecond):
			}
			if pa.Runner() && pb.Runner() {
				both.Add(1)
			}
		}
	}()
	r := rand.New(rand.NewPCG(7, 12))
	first := appendRandom(t, w.log, r, 30, 300)
	runner, standby, kill := pa, pb, killA
	if pb.Runner() {
		runner, standby, kill = pb, pa, killB
	}
	if err := runner.WaitApplied(ctx, first); err != nil {
		t.Fatal(err)
	}
	// Appends go on while the runner dies.
	var wg sync.WaitGroup
	var mid uint64
	wg.Go(func() {
		r := rand.New(rand.NewPCG(7, 13))
		for range 300 {
			s := fmt.Sprintf("s%03d", r.IntN(30))
			seq, err := w.log.LastSeq(ctx, s)
			if err == nil {
				var res logport.AppendResult
				res, err = w.log.Append(ctx, s, seq, events.New(s, "web", "u", randomPayload(r)))
				mid = max(mid, res.Last)
			}
			if err != nil {
				t.Errorf("append during the takeover: %v", err)
				return
			}
		}
	})
	killed := time.Now()
	kill()
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !standby.Runner() {
			return errors.New("the standby has not taken over")
		}
		return nil
	})
	t.Logf("%s took over %v after %s died without releasing its lease", standby.Owner(), time.Since(killed).Round(time.Millisecond), runner.Owner())
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	last := appendRandom(t, w.log, r, 30, 100)
	if err := standby.WaitApplied(ctx, max(mid, last)); err != nil {
		t.Fatal(err)
	}
	close(stopWatch)
	<-watched
	if n := both.Load(); n > 0 {
		t.Fatalf("both projections were runners at once (%d samples)", n)
	}
	want := natstest.FoldLog(t, w.log)
	views, err := w.log.OpenViews(ctx, "VIEWS")
	if err != nil {
		t.Fatal(err)
	}
	for s, fold := range want {
		data, err := views.Get(ctx, s)
		if err != nil || data == nil {
			t.Fatalf("view of %s: %v (missing: %v)", s, err, data == nil)
		}
		v, err := aggregate.UnmarshalState(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v, fold) {
			t.Fatalf("view of %s in KV after takeover:\nview %+v\nfold %+v", s, v, fold)
		}
	}
}

// A view write conditional on a revision that moved (another
// runner wrote the view) is refused, so a runner that lost its lease
// cannot overwrite the new runner's views.
func TestConditionalViewWrite(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	views, err := e.log.OpenViews(ctx, "VIEWS")
	if err != nil {
		t.Fatal(err)
	}
	revs, err := views.PutAllSeq(ctx, []jetstream.Put{{Key: "s1", Value: []byte("a"), Cond: true, Rev: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := views.PutAllSeq(ctx, []jetstream.Put{{Key: "s1", Value: []byte("b"), Cond: true, Rev: revs[0]}}); err != nil {
		t.Fatalf("write at the current revision: %v", err)
	}
	_, err = views.PutAllSeq(ctx, []jetstream.Put{{Key: "s1", Value: []byte("stale"), Cond: true, Rev: revs[0]}})
	if !errors.Is(err, jetstream.ErrViewChanged) {
		t.Fatalf("write at a stale revision: %v, want ErrViewChanged", err)
	}
	if data, _ := views.Get(ctx, "s1"); string(data) != "b" {
		t.Fatalf("view is %q after the refused stale write, want b", data)
	}
}

// A runner that stops folding says so through OnStandby, so that the lag
// it last reported is not kept as its engine's.
func TestRunnerThatStopsFoldingCallsOnStandby(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	var standbys atomic.Int64
	p, err := projection.Open(context.Background(), e.log, projection.Config{
		Elect: true, Owner: "engine-a", LeaseTTL: time.Second, RenewEvery: 300 * time.Millisecond,
		OnStandby: func() { standbys.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !p.Runner() {
			return errors.New("not the runner yet")
		}
		return nil
	})
	if n := standbys.Load(); n != 0 {
		t.Fatalf("OnStandby called %d times while folding", n)
	}
	cancel()
	<-done
	if n := standbys.Load(); n != 1 || p.Runner() {
		t.Fatalf("after Run returned: OnStandby called %d times (want 1), runner %v", n, p.Runner())
	}
}

// stopsLeavingTheLeaseHeld runs rounds projections on l, each owned by
// engine-a with a 10 s lease renewed every renew, stops each when
// beforeStop returns, and counts the stops after which another owner finds the
// lease still held (freeing it for the next round); runner counts the
// stops that came after the projection was the runner.
func stopsLeavingTheLeaseHeld(t *testing.T, l *jetstream.Log, rounds int, renew time.Duration, beforeStop func(*projection.Projection)) (held, runner int) {
	t.Helper()
	ctx := context.Background()
	m, err := l.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rounds; i++ {
		p, err := projection.Open(ctx, l, projection.Config{Elect: true, Owner: "engine-a", LeaseTTL: 10 * time.Second, RenewEvery: renew})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = p.Run(rctx); close(done) }()
		beforeStop(p)
		if p.Runner() {
			runner++
		}
		cancel()
		<-done
		if err := natstest.LeaseLeftHeld(t, m, "engine-a"); err != nil {
			held++
			if held <= 3 {
				t.Logf("round %d: after engine-a stopped: %v", i, err)
			}
		}
	}
	return held, runner
}

// A runner stopped at any moment, a renewal on its way included (renewals
// every 2 ms make the stop meet one often), or while it stands by after a
// renewal that timed out here but reached the server (each renewal has
// 2 ms), leaves the lease free: another owner takes it at once rather than
// after the lease's 10 s.
func TestRunnerStoppedMidRenewalLeavesTheLeaseFree(t *testing.T) {
	e := open(t, natstest.Server(t).ClientURL())
	const rounds = 40
	held, _ := stopsLeavingTheLeaseHeld(t, e.log, rounds, 2*time.Millisecond, func(p *projection.Projection) {
		natstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
			if !p.Runner() {
				return errors.New("not runner yet")
			}
			return nil
		})
		time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond)
	})
	if held > 0 {
		t.Errorf("a stopped runner's lease stayed held (10 s) in %d of %d stops", held, rounds)
	}
}

// A runner stopped while its first acquire of a free lease is on its way
// (the stop comes 0-0.8 ms after Run starts, mostly before it is the
// runner) leaves the lease free too: the acquire's write, once sent, is
// waited for, so the runner knows it holds the lease and gives it up.
func TestRunnerStoppedMidAcquireLeavesTheLeaseFree(t *testing.T) {
	e := open(t, natstest.Server(t).ClientURL())
	const rounds = 400
	held, runner := stopsLeavingTheLeaseHeld(t, e.log, rounds, time.Second, func(*projection.Projection) {
		time.Sleep(time.Duration(rand.IntN(800)) * time.Microsecond)
	})
	t.Logf("%d of %d stops came after the runner was elected", runner, rounds)
	if held > 0 {
		t.Errorf("a runner stopped before or during its acquire left the lease held (10 s) in %d of %d stops", held, rounds)
	}
}

// A projection whose acquire reached the server but whose reply came after
// the log's Timeout (300 ms here, shorter than the 10 s lease), stopped
// while it stands by to try again, leaves the lease free.
func TestStandbyStoppedAfterAnAcquireWhoseReplyCameLateLeavesTheLeaseFree(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	m, err := e.log.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	px := natstest.NewHoldProxy(t, srv.ClientURL())
	late := px.OpenLog(t, 300*time.Millisecond)
	const rounds = 5
	held, runner := 0, 0
	for i := 0; i < rounds; i++ {
		var p *projection.Projection
		natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error { // the 300 ms Timeout applies to its opening too
			var err error
			p, err = projection.Open(ctx, late, projection.Config{Elect: true, Owner: "engine-a", LeaseTTL: 10 * time.Second, RenewEvery: 5 * time.Second})
			return err
		})
		px.Arm("PUB $KV."+m.Bucket()+".runner ", natstest.HoldReplies, 500*time.Millisecond)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = p.Run(rctx); close(done) }()
		time.Sleep(700 * time.Millisecond) // the acquire timed out; Run stands by for 5 s
		if p.Runner() {                    // a machine so busy that the reply beat the timeout
			runner++
		}
		cancel()
		<-done
		if err := natstest.LeaseLeftHeld(t, m, "engine-a"); err != nil {
			held++
			t.Logf("round %d: %v", i, err)
		}
	}
	if runner == rounds {
		t.Fatalf("every acquire's reply came in time (%d rounds): nothing tested", rounds)
	}
	if held > 0 {
		t.Errorf("a projection stopped after an acquire whose reply came late left the lease held (10 s) in %d of %d stops", held, rounds)
	}
}

// A standby that never held the lease, nor sent an acquire that went
// unanswered, has no lease to give up: stopped after the server went
// away, it neither waits for the server nor warns about the lease.
func TestStandbyThatNeverHeldTheLeaseStopsWithoutTouchingIt(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	m, err := e.log.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "engine-b", time.Minute); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var mu sync.Mutex
	logger := zerolog.New(zerolog.SyncWriter(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	})))
	p, err := projection.Open(ctx, e.log, projection.Config{Elect: true, Owner: "engine-a", LeaseTTL: time.Minute, RenewEvery: 50 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = p.Run(rctx); close(done) }()
	time.Sleep(200 * time.Millisecond) // a few refused acquires
	srv.Shutdown()
	time.Sleep(200 * time.Millisecond) // and some that fail to reach the server
	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not stop within 10 s of its context's end")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), "release the lease") {
		t.Errorf("a standby that never held the lease tried to release it at stop (stopped after %v):\n%s", time.Since(stopped), logs.String())
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
