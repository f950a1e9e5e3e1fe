package jetstream

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// simulateReconnect does what watchReconnects does at a reconnect: close
// l.rc and replace it under rcMu.
func simulateReconnect(l *Log) {
	l.rcMu.Lock()
	close(l.rc)
	l.rc = make(chan struct{})
	l.rcMu.Unlock()
}

// No goroutine is left behind after ask returns, whichever ask answered,
// and a reconnect storm does not leave asks open.
func TestAskLeavesNoGoroutineWhicheverAskAnswers(t *testing.T) {
	l := &Log{cfg: LogConfig{Timeout: time.Second}, rc: make(chan struct{})}
	base := runtime.NumGoroutine()
	for i := 0; i < 200; i++ {
		var n atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := make(chan struct{})
		go func() {
			defer close(done)
			v, err := ask(ctx, l, func(ctx context.Context) (int, error) {
				k := n.Add(1)
				if k == 6 { // the fifth re-ask answers
					return 42, nil
				}
				<-ctx.Done()
				return 0, ctx.Err()
			})
			if err != nil || v != 42 {
				t.Errorf("round %d: %d %v", i, v, err)
			}
		}()
		for n.Load() < 5+1 {
			if n.Load() >= 1 {
				simulateReconnect(l)
			}
			time.Sleep(50 * time.Microsecond)
		}
		<-done
		cancel()
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		t.Fatalf("%d goroutines left (base %d)", g, base)
	}
}

// A call that ends at its deadline returns the deadline's error, also
// when a given-up re-ask's context.Canceled reaches ask at that moment
// (its request returns a little late after its cancellation, as on a
// busy machine): callers retry a deadline, not a cancellation.
func TestAskReturnsTheDeadlineNotAGivenUpReasksCancel(t *testing.T) {
	l := &Log{cfg: LogConfig{Timeout: time.Second}, rc: make(chan struct{})}
	leaks := 0
	const rounds = 300
	for i := 0; i < rounds; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		dl, _ := ctx.Deadline()
		var n atomic.Int64
		errc := make(chan error, 1)
		go func() {
			_, err := ask(ctx, l, func(actx context.Context) (int, error) {
				k := n.Add(1)
				<-actx.Done()
				if k == 2 { // the first re-ask, given up for the second
					time.Sleep(time.Until(dl))
					return 0, actx.Err() // context.Canceled
				}
				return 0, actx.Err()
			})
			errc <- err
		}()
		// Reconnect until re-ask 1 and then re-ask 2 (which gives re-ask
		// 1 up) have started (ask reads l.rc after its first ask starts).
		for n.Load() < 3 && time.Now().Before(dl) {
			simulateReconnect(l)
			time.Sleep(200 * time.Microsecond)
		}
		err := <-errc
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			leaks++
			if leaks == 1 {
				t.Logf("round %d: ask returned %v, want deadline exceeded", i, err)
			}
		}
	}
	if leaks > 0 {
		t.Errorf("a given-up re-ask's error came out of ask in %d of %d calls that ended at their deadline", leaks, rounds)
	}
}

// againUnserved runs a read again while it is answered "no responders"
// (by a request or by a publish to a stream), returns its first other
// answer, and gives up with "no responders" after noResponderWait.
func TestAgainUnservedReadsAgainWhileNoOneServes(t *testing.T) {
	var n int
	err := againUnserved(context.Background(), func() error {
		n++
		switch n {
		case 1:
			return fmt.Errorf("registry timeline: %w", nats.ErrNoResponders)
		case 2:
			return jetstream.ErrNoStreamResponse
		}
		return errors.New("the stream's answer")
	})
	if err == nil || err.Error() != "the stream's answer" || n != 3 {
		t.Fatalf("after two unserved reads: %v after %d reads; want the third read's answer", err, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = againUnserved(ctx, func() error { return nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || ctx.Err() != nil {
		t.Fatalf("a read never served: %v (deadline passed: %v); want no responders before the deadline", err, ctx.Err() != nil)
	}
}
