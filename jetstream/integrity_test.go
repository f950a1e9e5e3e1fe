package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/jetstream"
)

// A stream or feed consumer that someone changed
// or deleted is reported, naming what changed.
func TestCheckStreamAndFeedDrift(t *testing.T) {
	l, nc := openLog(t)
	ctx := context.Background()
	if err := l.CheckStream(ctx); err != nil {
		t.Fatalf("fresh stream: %v", err)
	}
	feed, err := l.Feed(ctx, jetstream.FeedConfig{Durable: "views"})
	if err != nil {
		t.Fatal(err)
	}
	feed.Stop()
	if err := l.CheckFeed(ctx, "views"); err != nil {
		t.Fatalf("fresh feed: %v", err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The consumer made headers-only with another filter.
	cc := natsjs.ConsumerConfig{Durable: "views", DeliverPolicy: natsjs.DeliverAllPolicy, AckPolicy: natsjs.AckAllPolicy,
		FilterSubject: "tools.events.nobody", HeadersOnly: true, MaxAckPending: 100000}
	if _, err := js.UpdateConsumer(ctx, l.StreamName(), cc); err != nil {
		t.Fatal(err)
	}
	err = l.CheckFeed(ctx, "views")
	if !errors.Is(err, jetstream.ErrDrift) || !strings.Contains(err.Error(), "headers_only") || !strings.Contains(err.Error(), "tools.events.nobody") {
		t.Fatalf("CheckFeed after reconfiguring: %v", err)
	}
	if err := js.DeleteConsumer(ctx, l.StreamName(), "views"); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckFeed(ctx, "views"); !errors.Is(err, jetstream.ErrDrift) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("CheckFeed after delete: %v", err)
	}
	// The stream limited to one message per subject, then deleted.
	s, err := js.Stream(ctx, l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.MaxMsgsPerSubject = 1
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckStream(ctx); !errors.Is(err, jetstream.ErrDrift) || !strings.Contains(err.Error(), "max_msgs_per_subject is 1") {
		t.Fatalf("CheckStream after max_msgs_per_subject=1: %v", err)
	}
	if err := js.DeleteStream(ctx, l.StreamName()); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckStream(ctx); !errors.Is(err, jetstream.ErrDrift) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("CheckStream after delete: %v", err)
	}
}
