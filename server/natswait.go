package server

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// startupState says what `engine serve` is doing before it serves: the
// serve loop (and readiness) can report "waiting for NATS: <reason>".
type startupState struct {
	mu      sync.Mutex
	waiting bool
	reason  string
	since   time.Time
}

// engineStartup is the serve command's start-up state.
var engineStartup startupState

// Waiting reports whether serve is waiting for NATS and why.
func (s *startupState) Waiting() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting, s.reason
}

// String is "waiting for NATS: <reason>" while waiting, "" after.
func (s *startupState) String() string {
	if w, r := s.Waiting(); w {
		return "waiting for NATS: " + r
	}
	return ""
}

func (s *startupState) set(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting {
		s.since = time.Now()
	}
	s.waiting, s.reason = true, reason
}

func (s *startupState) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting, s.reason = false, ""
}

// Back-off of the start-up wait: jittered, doubling, capped.
const (
	natsWaitFirst = 200 * time.Millisecond
	natsWaitCap   = 5 * time.Second
	// natsAttemptTimeout bounds each attempt (connect, stream look-up) so
	// that a cluster without a JetStream meta leader is asked again.
	natsAttemptTimeout = 5 * time.Second
)

// waitForNATSOn is waitForNATS for a step that sends requests on nc: a
// request the server's permissions refuse is never answered, so it would
// time out on every attempt, for ever; the step ends at once instead,
// with an error matching jetstream.ErrPublishRefused (not transient).
func waitForNATSOn(ctx context.Context, log zerolog.Logger, nc *nats.Conn, what string, attempt func(ctx context.Context) error) error {
	return waitForNATS(ctx, log, what, func(actx context.Context) error {
		return jetstream.WatchRefusal(actx, nc, "", attempt)
	})
}

// waitForNATS calls attempt until it succeeds, returns an error that is
// not transient (jetstream.Transient), or ctx ends. Between attempts it waits a jittered,
// doubling back-off capped at natsWaitCap, logs why, and keeps the reason
// in engineStartup. Each attempt gets its own timeout.
func waitForNATS(ctx context.Context, log zerolog.Logger, what string, attempt func(ctx context.Context) error) error {
	backoff := logport.Backoff{First: natsWaitFirst, Max: natsWaitCap, Jitter: true}
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, natsAttemptTimeout)
		err := attempt(actx)
		cancel()
		if err == nil {
			engineStartup.done()
			if n > 1 {
				log.Warn().Int("attempts", n).Msgf("NATS is there: %s done", what)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !jetstream.Transient(err) {
			engineStartup.done()
			return err
		}
		reason := err.Error()
		if !strings.HasPrefix(reason, what+": ") { // "connect to X: connect to X: ..." reads once
			reason = what + ": " + reason
		}
		engineStartup.set(reason)
		d := backoff.Next() // [wait/2, 1.5·wait), wait doubling up to natsWaitCap
		log.Warn().Err(err).Int("attempt", n).Dur("retry_in", d).Msgf("waiting for NATS: %s", what)
		if err := logport.Sleep(ctx, d); err != nil {
			return err
		}
	}
}
