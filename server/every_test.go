package server

import (
	"context"
	"testing"
	"time"
)

// paced runs fn in its own goroutine (tick.Paced's loop) and closes its
// channel once ctx ends; with no fn nothing runs and the channel is
// closed at once.
func TestPacedRunsFnAndClosesItsChannelWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan struct{}, 1)
	done := paced(ctx, time.Millisecond, func() time.Duration {
		select {
		case called <- struct{}{}:
		default:
		}
		return time.Millisecond
	})
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("fn not called within 10s of a 1ms first wait")
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
