// Package tick runs a function on a clock until its context ends: the
// loop of the engine's background work (lease renewal, retention, probes,
// disk checks).
package tick

import (
	"context"
	"time"
)

// Every calls fn at each tick of a time.Ticker of period interval, the
// first one interval after the call, until ctx ends or fn returns false.
// Ticks that a slow fn overran are dropped, as the Ticker drops them. It
// blocks; interval must be positive.
func Every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for wait(ctx, t.C) && fn() {
	}
}

// EveryNow is Every with a first call at once. The ticker starts before
// that call, so a first call that overran an interval is followed by the
// next one at once.
func EveryNow(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for ok := fn(); ok && wait(ctx, t.C); ok = fn() {
	}
}

// Paced calls fn after first, then each time after the wait fn returns
// (counted from the end of the call), until ctx ends. It blocks.
func Paced(ctx context.Context, first time.Duration, fn func() time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for wait(ctx, t.C) {
		t.Reset(fn())
	}
}

// wait blocks until c delivers or ctx ends, and reports whether c
// delivered.
func wait(ctx context.Context, c <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c:
		return true
	}
}
