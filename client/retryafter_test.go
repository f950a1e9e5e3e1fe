package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
)

// A 503 from a real engine (a min_seq the session
// never reaches) comes back as client.ErrUnavailable with the reply's
// Retry-After, over both transports.
func TestErrorCarriesRetryAfter(t *testing.T) {
	var wg sync.WaitGroup
	for name, c := range clients(t) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.Intent(ctx, client.IntentRequest{Session: "retry-" + name, MinSeq: 1 << 40})
			t.Logf("%s: 503 after %s", name, time.Since(start))
			var e *client.Error
			if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &e) {
				t.Errorf("%s: %v, want unavailable", name, err)
				return
			}
			if e.RetryAfter != time.Second {
				t.Errorf("%s: RetryAfter %s, want 1s", name, e.RetryAfter)
			}
		}()
	}
	wg.Wait()
}
