package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/jetstream"
)

// Appends wait for their acknowledgement on the log's own reply
// subscription. With no stream listening on the session's subject (the
// stream deleted under the engine) the server answers "no responders":
// the append is sent again twice, 250 ms apart, as nats.go's PublishMsg
// did, then fails with ErrNoStreamResponse, an error the service
// re-sends (Transient); it neither hangs until its timeout nor stores
// anything.
func TestAppendWithoutStreamIsNoStreamResponse(t *testing.T) {
	l, nc := openLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, l.StreamName()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = l.Append(ctx, "s", 0, toggled("s"))
	elapsed := time.Since(start)
	if !errors.Is(err, njs.ErrNoStreamResponse) || !jetstream.Transient(err) {
		t.Fatalf("append with no stream: %v; want ErrNoStreamResponse, transient", err)
	}
	if elapsed < 2*njs.DefaultPubRetryWait {
		t.Fatalf("answered after %v: want the two re-sends %v apart first", elapsed, njs.DefaultPubRetryWait)
	}
	if ctx.Err() != nil {
		t.Fatalf("the append used up its context: %v", ctx.Err())
	}
	// The reply subscription still serves appends once the stream is back.
	l2, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "s", 0, toggled("s")); err != nil {
		t.Fatalf("append after the stream was made again: %v", err)
	}
	if n, err := l2.LastSeq(ctx, "s"); err != nil || n != 1 {
		t.Fatalf("session at %d (%v), want 1", n, err)
	}
}
