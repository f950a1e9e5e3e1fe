package api

import (
	"context"
	"encoding/json"
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
)

// Error codes: the stable "code" of an error reply. Clients switch on the
// code, never on the message.
const (
	// CodeConflict (409): the session moved past the expected sequence;
	// the reply carries "expected" and "actual".
	CodeConflict = "conflict"
	// CodeInvalid (400): the request is wrong; the message names the bad
	// value (session id, preset, command type, field, ...).
	CodeInvalid = "invalid"
	// CodeNoTurn (409): turn-discover, turn-checkpoint or turn-end on a
	// session with no open turn (turn-dispatch answers outside a turn).
	CodeNoTurn = "no_turn"
	// CodeNotFound (404): no such route, or nothing recorded to show.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed (405): the route exists for other methods
	// (HTTP only; the reply has an Allow header).
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeTooLarge (413): the request body exceeds the configured bound.
	CodeTooLarge = "too_large"
	// CodeUnavailable (503): JetStream (or the NATS connection) cannot
	// serve the request now; retry later.
	CodeUnavailable = "unavailable"
	// CodeOutcomeUnknown (503): the write was sent but its
	// acknowledgement never came (a timeout, a lost connection): it may or
	// may not be stored. Not a refusal: read the session after the
	// sequence the message names before writing again.
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeStorageFull (507): the engine's store has less free space than
	// it needs (--min-free); nothing was written. Retry when space is back.
	CodeStorageFull = "storage_full"
	// CodeInternal (500): a bug or an unexpected failure.
	CodeInternal = "internal"
	// CodeBusy (429): the channel (or the engine) has as many requests
	// in flight as it allows; retry later.
	CodeBusy = "busy"
	// CodeUnauthorized (401): HTTP without a valid bearer token when the
	// gateway has a tokens file.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden (403): the caller may not do this: a cross-origin
	// browser request, a Host that is not the engine's, a write with a
	// read-only token, or a channel its token does not name.
	CodeForbidden = "forbidden"
	// CodeKeyInUse (422): the idempotency key (Idempotency-Key or
	// event_id) was already used on another session or by another
	// channel; nothing was written. Generate a new key.
	CodeKeyInUse = "idempotency_key_in_use"
	// CodeUnsupportedMedia (415): a request body that is neither
	// application/json nor application/msgpack.
	CodeUnsupportedMedia = "unsupported_media_type"
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

// APIError is an error reply, on the wire
//
//	{"error":{"code":"conflict","message":"...","expected":3,"actual":5}}
//
// over both transports. Status is the HTTP status (also the NATS micro
// error code, as a decimal string). Expected and Actual are set for
// CodeConflict only.
type APIError struct {
	Status   int    `json:"-"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Expected uint64 `json:"expected,omitempty"`
	Actual   uint64 `json:"actual,omitempty"`
}

// MarshalJSON writes expected and actual for conflicts (even when 0) and
// for no other code.
func (e *APIError) MarshalJSON() ([]byte, error) {
	type wire struct {
		Code     string  `json:"code"`
		Message  string  `json:"message"`
		Expected *uint64 `json:"expected,omitempty"`
		Actual   *uint64 `json:"actual,omitempty"`
	}
	w := wire{Code: e.Code, Message: e.Message}
	if e.Code == CodeConflict {
		w.Expected, w.Actual = &e.Expected, &e.Actual
	}
	return json.Marshal(w)
}

// Error implements error.
func (e *APIError) Error() string {
	if e.Code == CodeConflict {
		return fmt.Sprintf("%d %s: %s (expected %d, actual %d)", e.Status, e.Code, e.Message, e.Expected, e.Actual)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Is makes errors.Is(err, service.ErrConflict), service.ErrNoTurn and
// ErrBadRequest work on errors returned by a Client.
func (e *APIError) Is(target error) bool {
	switch target {
	case service.ErrConflict:
		return e.Code == CodeConflict
	case service.ErrNoTurn:
		return e.Code == CodeNoTurn
	case jetstream.ErrOutcomeUnknown:
		return e.Code == CodeOutcomeUnknown
	case jetstream.ErrStorageFull:
		return e.Code == CodeStorageFull
	case jetstream.ErrKeyInUse:
		return e.Code == CodeKeyInUse
	case ErrBadRequest, service.ErrInvalid:
		return e.Code == CodeInvalid
	}
	return false
}

// errorEnvelope is the body of every error reply.
type errorEnvelope struct {
	Error *APIError `json:"error"`
}

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

// codeForStatus is the code a client assumes for a reply that is not an
// error envelope (a proxy in between, say).
func codeForStatus(status int) string {
	switch {
	case status == http.StatusConflict:
		return CodeConflict
	case status == http.StatusNotFound:
		return CodeNotFound
	case status == http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case status == http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case status == http.StatusTooManyRequests:
		return CodeBusy
	case status == http.StatusUnauthorized:
		return CodeUnauthorized
	case status == http.StatusForbidden:
		return CodeForbidden
	case status == http.StatusUnsupportedMediaType:
		return CodeUnsupportedMedia
	case status == http.StatusUnprocessableEntity:
		return CodeKeyInUse
	case status == http.StatusInsufficientStorage:
		return CodeStorageFull
	case status == http.StatusServiceUnavailable, status == http.StatusBadGateway, status == http.StatusGatewayTimeout:
		return CodeUnavailable
	case status >= 400 && status < 500:
		return CodeInvalid
	}
	return CodeInternal
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
