package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/jetstream"
)

// A feed whose consumer is gone (deleted, or without a leader for good)
// fails with ErrFeedDown instead of waiting for ever, paced (its pulls
// are answered "no responders") or as a standing pull (the server says
// the consumer was deleted), so that its owner opens it again.
func TestFeedFailsWhenItsConsumerIsGone(t *testing.T) {
	for _, pace := range []time.Duration{2 * time.Millisecond, 0} {
		l, _ := openLog(t)
		ctx := context.Background()
		f, err := l.Feed(ctx, jetstream.FeedConfig{Durable: "views", Pace: pace, DownAfter: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.JetStream().DeleteConsumer(ctx, l.StreamName(), "views"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for {
			_, err = f.NextWithin(ctx, 10, 200*time.Millisecond)
			if err != nil || time.Since(start) > 30*time.Second {
				break
			}
		}
		f.Stop()
		if !errors.Is(err, jetstream.ErrFeedDown) {
			t.Fatalf("pace %v: the feed of a deleted consumer: %v after %v, want ErrFeedDown", pace, err, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("pace %v: %v after %v", pace, err, time.Since(start).Round(time.Millisecond))
	}
}
