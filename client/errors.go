package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is an error reply of the engine (docs/api.md, "Error codes").
// Status is the HTTP status (over NATS, Nats-Service-Error-Code); Code is
// stable, Message is for people. Expected and Actual are the sequences of
// a conflict.
type Error struct {
	Status   int    `json:"-"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Expected uint64 `json:"expected,omitempty"`
	Actual   uint64 `json:"actual,omitempty"`
	// RetryAfter is the reply's Retry-After (busy 429 and unavailable 503
	// replies carry it, over both transports): how long to wait before
	// retrying. 0 when the reply had none.
	RetryAfter time.Duration `json:"-"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code == "conflict" {
		return fmt.Sprintf("%d %s: %s (expected %d, actual %d)", e.Status, e.Code, e.Message, e.Expected, e.Actual)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches another *Error by code: errors.Is(err, client.ErrConflict).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per error code of docs/api.md.
var (
	ErrConflict         = &Error{Code: "conflict"}
	ErrInvalid          = &Error{Code: "invalid"}
	ErrNoTurn           = &Error{Code: "no_turn"}
	ErrNotFound         = &Error{Code: "not_found"}
	ErrMethodNotAllowed = &Error{Code: "method_not_allowed"}
	ErrTooLarge         = &Error{Code: "too_large"}
	ErrUnavailable      = &Error{Code: "unavailable"}
	ErrInternal         = &Error{Code: "internal"}
	ErrBusy             = &Error{Code: "busy"}
	ErrUnauthorized     = &Error{Code: "unauthorized"}
	ErrForbidden        = &Error{Code: "forbidden"}
	ErrUnsupportedMedia = &Error{Code: "unsupported_media_type"}
	// ErrKeyInUse (422): the idempotency key (EventID) was already used
	// on another session or by another channel; nothing was written.
	ErrKeyInUse = &Error{Code: "idempotency_key_in_use"}
	// ErrOutcomeUnknown (503): the write was sent but its acknowledgement
	// never came; it may or may not be stored. Read the session before
	// writing again (or retry with the same EventID).
	ErrOutcomeUnknown = &Error{Code: "outcome_unknown"}
	// ErrStorageFull (507): the engine's store is short of free space;
	// nothing was written.
	ErrStorageFull = &Error{Code: "storage_full"}
)

// statusCodes is the code of an error reply whose body is not the
// engine's envelope (a proxy in between), by HTTP status: the documented
// code of that status (the first, where two share one).
var statusCodes = map[int]string{
	http.StatusBadRequest:            "invalid",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusUnprocessableEntity:   "idempotency_key_in_use",
	http.StatusTooManyRequests:       "busy",
	http.StatusInternalServerError:   "internal",
	http.StatusBadGateway:            "unavailable",
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusGatewayTimeout:        "unavailable",
	http.StatusInsufficientStorage:   "storage_full",
}

// replyError decodes an error reply, or makes one from the status when
// the body is not the engine's envelope (a proxy in between).
func replyError(status int, data []byte) error {
	var env struct {
		Error *Error `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.Status = status
		return env.Error
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	code, ok := statusCodes[status]
	switch {
	case ok:
	case status >= 400 && status < 500:
		code = "invalid"
	default:
		code = "internal"
	}
	return &Error{Status: status, Code: code, Message: msg}
}

// withRetryAfter sets the Retry-After (delay-seconds) of an error reply.
func withRetryAfter(err error, header string) error {
	var e *Error
	if header == "" || !errors.As(err, &e) {
		return err
	}
	if n, perr := strconv.Atoi(strings.TrimSpace(header)); perr == nil && n >= 0 {
		e.RetryAfter = time.Duration(n) * time.Second
	}
	return err
}
