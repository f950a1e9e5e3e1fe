package server

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// While it waits, the start-up state says why; a permanent
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
