package server

import (
	"context"
	"time"
)

// every calls fn each interval, in its own goroutine, until ctx ends: the
// loop of serve's background checks (log integrity, the acknowledged
// watermark).
func every(ctx context.Context, interval time.Duration, fn func()) {
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
}
