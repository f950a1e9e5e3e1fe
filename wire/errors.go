package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error codes: the stable "code" of an error reply. Clients switch on the
// code, never on the message. docs/api.md lists each (a test checks it).
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
	// CodeKeyMismatch (422): the idempotency key was already used on this
	// session with other commands (the message names both); nothing was
	// written. A retry sends the same commands; new commands take a new
	// key.
	CodeKeyMismatch = "idempotency_key_mismatch"
	// CodeUnsupportedMedia (415): a request body that is neither
	// application/json nor application/msgpack.
	CodeUnsupportedMedia = "unsupported_media_type"
	// CodeDeleted (410): the session was deleted: it takes no write, its
	// id starts no new session, and every read answers this but, unless
	// it was erased, history (its timeline up to the deletion) and a live
	// stream from before the deletion.
	CodeDeleted = "deleted"
)

// Codes lists every error code, in the order of the constants above.
var Codes = []string{
	CodeConflict, CodeInvalid, CodeNoTurn, CodeNotFound, CodeMethodNotAllowed, CodeTooLarge,
	CodeUnavailable, CodeOutcomeUnknown, CodeStorageFull, CodeInternal, CodeBusy,
	CodeUnauthorized, CodeForbidden, CodeKeyInUse, CodeUnsupportedMedia, CodeKeyMismatch,
	CodeDeleted,
}

// Error is an error reply, on the wire
//
//	{"error":{"code":"conflict","message":"...","expected":3,"actual":5}}
//
// over both transports. Status is the HTTP status (also the NATS micro
// error code, as a decimal string). Expected and Actual are set for
// CodeConflict only. errors.Is matches two *Error by code.
type Error struct {
	Status   int    `json:"-"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Expected uint64 `json:"expected,omitempty"`
	Actual   uint64 `json:"actual,omitempty"`
	// RetryAfter is the reply's Retry-After (busy 429 and unavailable 503
	// replies carry it, over both transports): how long to wait before
	// retrying. 0 when the reply had none; never sent in the body.
	RetryAfter time.Duration `json:"-"`
}

// MarshalJSON writes expected and actual for conflicts (even when 0) and
// for no other code.
func (e *Error) MarshalJSON() ([]byte, error) {
	type body struct {
		Code     string  `json:"code"`
		Message  string  `json:"message"`
		Expected *uint64 `json:"expected,omitempty"`
		Actual   *uint64 `json:"actual,omitempty"`
	}
	w := body{Code: e.Code, Message: e.Message}
	if e.Code == CodeConflict {
		w.Expected, w.Actual = &e.Expected, &e.Actual
	}
	return json.Marshal(w)
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code == CodeConflict {
		return fmt.Sprintf("%d %s: %s (expected %d, actual %d)", e.Status, e.Code, e.Message, e.Expected, e.Actual)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches another *Error by code: errors.Is(err, &Error{Code: CodeConflict}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Envelope is the body of every error reply.
type Envelope struct {
	Error *Error `json:"error"`
}

// Invalid returns an *Error with CodeInvalid (400) and the formatted
// message: a request the engine cannot accept.
func Invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// statusCodes is the code of an error reply whose body is not the
// engine's envelope (a proxy in between), by HTTP status: the documented
// code of that status (the first, where two share one).
var statusCodes = map[int]string{
	http.StatusBadRequest:            CodeInvalid,
	http.StatusUnauthorized:          CodeUnauthorized,
	http.StatusForbidden:             CodeForbidden,
	http.StatusNotFound:              CodeNotFound,
	http.StatusMethodNotAllowed:      CodeMethodNotAllowed,
	http.StatusGone:                  CodeDeleted,
	http.StatusConflict:              CodeConflict,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
	http.StatusUnsupportedMediaType:  CodeUnsupportedMedia,
	http.StatusUnprocessableEntity:   CodeKeyInUse,
	http.StatusTooManyRequests:       CodeBusy,
	http.StatusInternalServerError:   CodeInternal,
	http.StatusBadGateway:            CodeUnavailable,
	http.StatusServiceUnavailable:    CodeUnavailable,
	http.StatusGatewayTimeout:        CodeUnavailable,
	http.StatusInsufficientStorage:   CodeStorageFull,
}

// CodeForStatus is the code a client assumes for a reply that is not an
// error envelope (a proxy in between, say): 409 is conflict, 507
// storage_full, other 4xx invalid, other 5xx internal.
func CodeForStatus(status int) string {
	if code, ok := statusCodes[status]; ok {
		return code
	}
	if status >= 400 && status < 500 {
		return CodeInvalid
	}
	return CodeInternal
}

// DecodeError decodes an error reply of the given status, or makes one
// from the status (CodeForStatus) when the body is not the engine's
// envelope; retryAfter is the reply's Retry-After header ("" none).
func DecodeError(status int, data []byte, retryAfter string) *Error {
	var env Envelope
	var e *Error
	if err := json.Unmarshal(data, &env); err == nil && env.Error != nil && env.Error.Code != "" {
		e = env.Error
		e.Status = status
	} else {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		e = &Error{Status: status, Code: CodeForStatus(status), Message: msg}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(retryAfter)); retryAfter != "" && err == nil && n >= 0 {
		e.RetryAfter = time.Duration(n) * time.Second
	}
	return e
}

// Clip quotes a raw JSON value for an error message, shortened.
func Clip(raw []byte) string {
	const max = 60
	s := string(bytes.TrimSpace(raw))
	if len(s) > max {
		s = s[:max] + "..."
	}
	if s == "" {
		return "nothing"
	}
	return s
}
