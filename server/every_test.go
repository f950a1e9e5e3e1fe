package server

import (
	"context"
	"testing"
	"time"
)

// paced runs fn first after its first wait, then after each wait fn
// returns, and its channel closes once ctx ends; with no fn nothing runs
// and the channel is closed at once.
func TestPacedWaitsWhatFnReturnsAndStopsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan time.Time, 10)
	start := time.Now()
	done := paced(ctx, 30*time.Millisecond, func() time.Duration {
		calls <- time.Now()
		return 50 * time.Millisecond
	})
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
		t.Fatal("the loop did not stop when ctx ended")
	}
	select {
	case <-paced(context.Background(), 0, nil):
	default:
		t.Fatal("paced with no fn: the channel is open")
	}
}
