package jetstream

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/logport"
)

// defaultPrefix is the subject prefix of a LogConfig that names none.
const defaultPrefix = "tools"

// EventStreamName is the name of the event stream of subject prefix
// prefix: <PREFIX>_EVENTS (tools → TOOLS_EVENTS). An empty prefix is the
// log's default, tools.
func EventStreamName(prefix string) string {
	if prefix == "" {
		prefix = defaultPrefix
	}
	return strings.ToUpper(prefix) + "_EVENTS"
}

// JetStream error codes that mean "not now" rather than "no": the
// cluster is still forming or electing.
const (
	codeJetStreamUnavailable = jetstream.ErrorCode(nats.JSErrCodeJetStreamNotAvailable)    // 10008: no meta leader yet
	codeInsufficientResource = jetstream.ErrorCode(nats.JSErrCodeInsufficientResourcesErr) // 10023: resources not there yet
	// 10005: no suitable peers for placement (the meta leader knows fewer
	// peers than the replicas yet); nats.go declares no constant for it.
	codeNoSuitablePeers jetstream.ErrorCode = 10005
)

// Transient reports whether err is a transient absence of NATS or
// JetStream, worth asking again later: no node listening, a connection
// that dropped or is reconnecting, a publish that never left (ErrNotSent),
// no JetStream meta or stream leader yet (503, 408, 10008), a cluster
// still forming (10023 insufficient resources, 10005 no suitable peers:
// the meta leader knows fewer peers than the replicas yet), a server
// shutting down, a request that timed out. Anything else (bad credentials,
// a stream configured otherwise, a conflict, bad input) is not: retrying
// it gives the same answer. A cluster that never gets enough peers stays
// transient: callers bound their retries by a context.
//
// It does not decide whether an append's outcome is known: a timed-out
// append is transient and its outcome unknown (ErrOutcomeUnknown).
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrNkeysNotSupported) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || apiErr.Code == 408 || apiErr.ErrorCode == codeJetStreamUnavailable ||
			apiErr.ErrorCode == codeInsufficientResource || apiErr.ErrorCode == codeNoSuitablePeers
	}
	var netErr net.Error
	var opErr *net.OpError
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrServerShutdown) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, logport.ErrNotSent) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &opErr) || (errors.As(err, &netErr) && netErr.Timeout())
}

// Retry calls attempt until it succeeds, returns an error retry rejects,
// or ctx ends, waiting b's back-off between attempts. A nil retry retries
// every error that Transient accepts. Each attempt runs with ctx; bound an
// attempt by its own timeout inside attempt when one may hang. It returns
// attempt's last error, or ctx's error joined with it when ctx ended
// first.
func Retry(ctx context.Context, b logport.Backoff, retry func(error) bool, attempt func(context.Context) error) error {
	if retry == nil {
		retry = Transient
	}
	for {
		err := attempt(ctx)
		if err == nil || !retry(err) {
			return err
		}
		if serr := logport.Sleep(ctx, b.Next()); serr != nil {
			return errors.Join(err, serr)
		}
	}
}
