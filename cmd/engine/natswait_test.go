package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// #20 item 1: start-up waits out a cluster that is not there yet and
// returns anything else at once.
func TestTransientNATS(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("connect to nats://x: %w", nats.ErrNoServers), true},
		{fmt.Errorf("look up stream TOOLS_EVENTS: %w", context.DeadlineExceeded), true},
		{&natsjs.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{fmt.Errorf("create stream: %w", &natsjs.APIError{Code: 500, ErrorCode: 10023, Description: "insufficient resources"}), true},
		{fmt.Errorf("create stream TOOLS_EVENTS: %w", &natsjs.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}), true},
		{fmt.Errorf("connect: %w", nats.ErrAuthorization), false},
		{errors.New("stream TOOLS_EVENTS exists with subjects [x], want [y]"), false},
		{&natsjs.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}, false},
	} {
		if got := transientNATS(tc.err); got != tc.want {
			t.Errorf("transientNATS(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// #20 item 1: while it waits, the start-up state says why; a permanent
// error ends the wait at once.
func TestWaitForNATSStatus(t *testing.T) {
	n := 0
	seen := ""
	err := waitForNATS(context.Background(), zerolog.Nop(), "connect", func(context.Context) error {
		n++
		if n == 1 {
			return nats.ErrNoServers
		}
		seen = engineStartup.String()
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("waitForNATS = %v after %d attempts, want nil after 2", err, n)
	}
	if want := "waiting for NATS: connect: " + nats.ErrNoServers.Error(); seen != want {
		t.Errorf("state while waiting = %q, want %q", seen, want)
	}
	if s := engineStartup.String(); s != "" {
		t.Errorf("state after = %q, want empty", s)
	}
	err = waitForNATS(context.Background(), zerolog.Nop(), "connect", func(context.Context) error { return nats.ErrAuthorization })
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("permanent error: got %v", err)
	}
}
