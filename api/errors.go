package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Error codes: wire's, the stable "code" of an error reply.
const (
	CodeConflict         = wire.CodeConflict
	CodeInvalid          = wire.CodeInvalid
	CodeNoTurn           = wire.CodeNoTurn
	CodeNotFound         = wire.CodeNotFound
	CodeMethodNotAllowed = wire.CodeMethodNotAllowed
	CodeTooLarge         = wire.CodeTooLarge
	CodeUnavailable      = wire.CodeUnavailable
	CodeOutcomeUnknown   = wire.CodeOutcomeUnknown
	CodeStorageFull      = wire.CodeStorageFull
	CodeInternal         = wire.CodeInternal
	CodeBusy             = wire.CodeBusy
	CodeUnauthorized     = wire.CodeUnauthorized
	CodeForbidden        = wire.CodeForbidden
	CodeKeyInUse         = wire.CodeKeyInUse
	CodeUnsupportedMedia = wire.CodeUnsupportedMedia
)

// ErrBadRequest is matched (errors.Is) by every error the api package returns for a
// request it cannot accept (malformed JSON, unknown field or command type,
// wrong field type, bad query parameter). It maps to CodeInvalid.
var ErrBadRequest = errors.New("bad request")

// badRequestError is a request error whose message is only the problem;
// it matches ErrBadRequest.
type badRequestError struct{ msg string }

func (e *badRequestError) Error() string        { return e.msg }
func (e *badRequestError) Is(target error) bool { return target == ErrBadRequest }

func badRequest(format string, args ...any) error {
	return &badRequestError{msg: fmt.Sprintf(format, args...)}
}

// APIError is an error reply: wire.Error, whose JSON is the envelope's
// "error" object. Status is the HTTP status (also the NATS micro error
// code, as a decimal string).
type APIError = wire.Error

// errorOf maps an error of the service layer (or of this package) to its
// reply: the code, the HTTP status and the message.
func errorOf(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	msg := err.Error()
	var ce *jetstream.ConflictError
	switch {
	case errors.As(err, &ce):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: msg, Expected: ce.Expected, Actual: ce.Actual}
	case errors.Is(err, service.ErrConflict):
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Message: msg}
	case errors.Is(err, service.ErrNoTurn):
		return &APIError{Status: http.StatusConflict, Code: CodeNoTurn, Message: msg}
	case errors.Is(err, jetstream.ErrOutcomeUnknown):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeOutcomeUnknown, Message: msg}
	case errors.Is(err, jetstream.ErrStorageFull):
		return &APIError{Status: http.StatusInsufficientStorage, Code: CodeStorageFull, Message: msg}
	case errors.Is(err, jetstream.ErrKeyInUse):
		var ke *jetstream.KeyInUseError
		if errors.As(err, &ke) {
			msg = ke.Error() // the reason only: nothing of the session that holds the key
		}
		return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeKeyInUse, Message: msg}
	case invalid(err):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalid, Message: msg}
	case unavailable(err):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: msg}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: msg}
}

// invalid reports errors caused by the request itself.
func invalid(err error) bool {
	for _, target := range []error{
		ErrBadRequest, service.ErrInvalid,
		events.ErrInvalidSession, events.ErrInvalidName, events.ErrInvalidEvent, events.ErrTooLarge,
		aggregate.ErrInvalidCommand, aggregate.ErrMaterialized, aggregate.ErrUnknownTool,
		resolver.ErrUnknownPreset, resolver.ErrUnknownProfile, resolver.ErrInvalidRequest,
		checkpoint.ErrNotInContract, jetstream.ErrInvalidSession,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// unavailable reports errors that mean JetStream or the connection to it
// cannot serve now: worth a retry later, not a bug.
func unavailable(err error) bool {
	for _, target := range []error{
		nats.ErrNoResponders, nats.ErrTimeout, nats.ErrConnectionClosed, nats.ErrConnectionDraining,
		nats.ErrConnectionReconnecting, nats.ErrDisconnected, nats.ErrNoServers, jetstream.ErrNotSent,
		natsjs.ErrNoStreamResponse, natsjs.ErrJetStreamNotEnabled, natsjs.ErrJetStreamNotEnabledForAccount,
		natsjs.ErrServerShutdown, projection.ErrNotCaughtUp,
		context.DeadlineExceeded, context.Canceled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	// A JetStream API error that says 503 (no leader, no quorum, ...);
	// *natsjs.APIError implements JetStreamError too.
	var jsErr natsjs.JetStreamError
	if errors.As(err, &jsErr) {
		ae := jsErr.APIError()
		return ae != nil && ae.Code == http.StatusServiceUnavailable
	}
	return false
}

// oneLine makes a message safe for a NATS header.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
