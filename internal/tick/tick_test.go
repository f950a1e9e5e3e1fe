package tick_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/tick"
)

// threeCalls runs loop with an fn that returns false at its third call,
// and returns when loop began and the times of the calls.
func threeCalls(t *testing.T, loop func(fn func() bool)) (time.Time, []time.Time) {
	t.Helper()
	start := time.Now()
	var calls []time.Time
	loop(func() bool {
		calls = append(calls, time.Now())
		return len(calls) < 3
	})
	if len(calls) != 3 {
		t.Fatalf("fn called %d times, want 3 (it returned false at the third)", len(calls))
	}
	return start, calls
}

func TestEveryCallsEachIntervalUntilFnReturnsFalse(t *testing.T) {
	start, calls := threeCalls(t, func(fn func() bool) { tick.Every(context.Background(), 20*time.Millisecond, fn) })
	if d := calls[0].Sub(start); d < 20*time.Millisecond {
		t.Fatalf("first call after %s, want at least one interval, 20ms", d)
	}
}

func TestEveryNowCallsAtOnceThenEachInterval(t *testing.T) {
	start, calls := threeCalls(t, func(fn func() bool) { tick.EveryNow(context.Background(), 20*time.Millisecond, fn) })
	if d := calls[1].Sub(start); d < 20*time.Millisecond {
		t.Fatalf("second call after %s, want at least one interval, 20ms", d)
	}
}

// The first call does not wait for a tick: with an hour's interval and
// fn returning false, EveryNow returns at once.
func TestEveryNowCallsOnceWhenFnReturnsFalse(t *testing.T) {
	calls := 0
	tick.EveryNow(context.Background(), time.Hour, func() bool { calls++; return false })
	if calls != 1 {
		t.Fatalf("fn called %d times, want 1", calls)
	}
}

func TestEveryReturnsWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick.Every(ctx, time.Millisecond, func() bool {
			select {
			case called <- struct{}{}:
			default:
			}
			return true
		})
	}()
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("fn not called within 10s of 1ms ticks")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return when ctx ended")
	}
}

func TestPacedWaitsWhatFnReturnsAndStopsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan time.Time, 10)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick.Paced(ctx, 30*time.Millisecond, func() time.Duration {
			calls <- time.Now()
			return 50 * time.Millisecond
		})
	}()
	first, second := <-calls, <-calls
	if d := first.Sub(start); d < 30*time.Millisecond {
		t.Fatalf("first call after %s, want at least the first wait, 30ms", d)
	}
	if d := second.Sub(first); d < 50*time.Millisecond {
		t.Fatalf("second call %s after the first, want at least the returned 50ms", d)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Paced did not return when ctx ended")
	}
}
