package server

import (
	"context"
	"time"

	"github.com/toolintent/engine/internal/tick"
)

// every calls fn each interval (the interval counted from the end of
// the call before), in its own goroutine, until ctx ends: the loop of
// serve's background checks (log integrity, the acknowledged watermark).
func every(ctx context.Context, interval time.Duration, fn func()) {
	paced(ctx, interval, func() time.Duration { fn(); return interval })
}

// paced calls fn after first, then each time after the wait fn returns,
// in its own goroutine, until ctx ends; the returned channel closes when
// the loop has stopped. A closed channel is returned, and nothing runs,
// when fn is nil.
func paced(ctx context.Context, first time.Duration, fn func() time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if fn == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		tick.Paced(ctx, first, fn)
	}()
	return done
}
