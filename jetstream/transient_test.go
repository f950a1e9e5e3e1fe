package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/logport"
)

// Start-up waits out a cluster that is not there
// yet and returns anything else at once; one classifier for every caller.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("connect to nats://x: %w", nats.ErrNoServers), true},
		{fmt.Errorf("look up stream TOOLS_EVENTS: %w", context.DeadlineExceeded), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{fmt.Errorf("create stream: %w", &jetstream.APIError{Code: 500, ErrorCode: 10023, Description: "insufficient resources"}), true},
		{fmt.Errorf("create stream TOOLS_EVENTS: %w", &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}), true},
		{fmt.Errorf("append to %q: %w", "s1", logport.ErrNotSent), true},
		{jetstream.ErrServerShutdown, true},
		{fmt.Errorf("append to %q: %w", "s1", &logport.ConflictError{Session: "s1"}), false},
		{fmt.Errorf("connect: %w", nats.ErrAuthorization), false},
		{errors.New("stream TOOLS_EVENTS exists with subjects [x], want [y]"), false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// The back-off doubles from First up to Max; with Jitter each
// wait lies in [d/2, 1.5·d).
func TestBackoff(t *testing.T) {
	b := logport.Backoff{First: 10 * time.Millisecond, Max: 35 * time.Millisecond}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{10, 20, 35, 35, 35}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits = %v, want %v ms", got, want)
		}
	}
	j := logport.Backoff{First: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	for _, d := range []time.Duration{100, 200, 400, 800, 1000} {
		d *= time.Millisecond
		if w := j.Next(); w < d/2 || w >= d+d/2 {
			t.Fatalf("jittered wait %v outside [%v, %v)", w, d/2, d+d/2)
		}
	}
}

// Retry asks again on a transient error, stops at once on a
// permanent one, and stops when ctx ends.
func TestRetry(t *testing.T) {
	n := 0
	err := Retry(context.Background(), logport.Backoff{First: time.Millisecond}, nil, func(context.Context) error {
		n++
		if n < 3 {
			return nats.ErrNoServers
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Retry = %v after %d attempts, want nil after 3", err, n)
	}
	n = 0
	err = Retry(context.Background(), logport.Backoff{First: time.Millisecond}, nil, func(context.Context) error { n++; return nats.ErrAuthorization })
	if !errors.Is(err, nats.ErrAuthorization) || n != 1 {
		t.Fatalf("permanent error: Retry = %v after %d attempts, want it after 1", err, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = Retry(ctx, logport.Backoff{First: time.Millisecond, Max: 2 * time.Millisecond}, nil, func(context.Context) error { return nats.ErrNoServers })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoServers) {
		t.Fatalf("ctx ended: Retry = %v, want the deadline and the last error", err)
	}
}

// One name of the event stream for every prefix.
func TestEventStreamName(t *testing.T) {
	for in, want := range map[string]string{"tools": "TOOLS_EVENTS", "": "TOOLS_EVENTS", "bench-x": "BENCH-X_EVENTS"} {
		if got := EventStreamName(in); got != want {
			t.Errorf("EventStreamName(%q) = %q, want %q", in, got, want)
		}
	}
}
