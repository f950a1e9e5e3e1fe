package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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

// transientNATS reports whether err is a transient absence of the NATS
// cluster that start-up waits out: no node listening, a connection that
// dropped, no JetStream meta or stream leader yet, a look-up that timed
// out. Anything else (bad credentials, a stream configured otherwise, bad
// flags) is returned at once.
func transientNATS(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrNkeysNotSupported) {
		return false
	}
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) {
		// 503: JetStream temporarily unavailable (no meta leader, 10008);
		// 10023: insufficient resources, and 10005: no suitable peers for
		// placement, as when the meta leader knows fewer peers than the
		// replicas yet (a cluster still forming: the stream create of
		// TestServeWaitsForCluster met it 1 run in 5). A cluster that
		// never gets enough peers keeps start-up waiting, named in /readyz.
		return apiErr.Code == 503 || apiErr.Code == 408 || apiErr.ErrorCode == 10008 || apiErr.ErrorCode == 10023 || apiErr.ErrorCode == 10005
	}
	var netErr net.Error
	var opErr *net.OpError
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, natsjs.ErrNoStreamResponse) || errors.Is(err, natsjs.ErrJetStreamNotEnabled) ||
		errors.Is(err, natsjs.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &opErr) || (errors.As(err, &netErr) && netErr.Timeout())
}

// waitForNATS calls attempt until it succeeds, returns an error that is
// not transient, or ctx ends. Between attempts it waits a jittered,
// doubling back-off capped at natsWaitCap, logs why, and keeps the reason
// in engineStartup. Each attempt gets its own timeout.
func waitForNATS(ctx context.Context, log zerolog.Logger, what string, attempt func(ctx context.Context) error) error {
	wait := natsWaitFirst
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
		if !transientNATS(err) {
			engineStartup.done()
			return err
		}
		reason := err.Error()
		if !strings.HasPrefix(reason, what+": ") { // "connect to X: connect to X: ..." reads once
			reason = what + ": " + reason
		}
		engineStartup.set(reason)
		d := wait/2 + rand.N(wait) // [wait/2, 1.5·wait)
		log.Warn().Err(err).Int("attempt", n).Dur("retry_in", d).Msgf("waiting for NATS: %s", what)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		wait = min(wait*2, natsWaitCap)
	}
}
