package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Error codes callers outside api use: wire's.
const (
	CodeInvalid     = wire.CodeInvalid
	CodeUnavailable = wire.CodeUnavailable
	CodeStorageFull = wire.CodeStorageFull
)

// ErrBadRequest is matched (errors.Is) by every error the api package returns for a
// request it cannot accept (malformed JSON, unknown field or command type,
// wrong field type, bad query parameter): wire.ErrBadRequest. It maps to
// CodeInvalid.
var ErrBadRequest = wire.ErrBadRequest

// badRequest is wire.BadRequest.
var badRequest = wire.BadRequest

// APIError is an error reply: wire.Error, whose JSON is the envelope's
// "error" object. Status is the HTTP status (also the NATS micro error
// code, as a decimal string).
type APIError = wire.Error

// kindCodes maps the service's error kinds to the reply's status and code.
var kindCodes = map[service.Kind]struct {
	status int
	code   string
}{
	service.KindInternal:       {http.StatusInternalServerError, wire.CodeInternal},
	service.KindConflict:       {http.StatusConflict, wire.CodeConflict},
	service.KindNoTurn:         {http.StatusConflict, wire.CodeNoTurn},
	service.KindOutcomeUnknown: {http.StatusServiceUnavailable, wire.CodeOutcomeUnknown},
	service.KindStorageFull:    {http.StatusInsufficientStorage, CodeStorageFull},
	service.KindKeyInUse:       {http.StatusUnprocessableEntity, wire.CodeKeyInUse},
	service.KindInvalid:        {http.StatusBadRequest, CodeInvalid},
	service.KindUnavailable:    {http.StatusServiceUnavailable, CodeUnavailable},
	service.KindDeleted:        {http.StatusGone, wire.CodeDeleted},
	service.KindNotFound:       {http.StatusNotFound, wire.CodeNotFound},
	service.KindForbidden:      {http.StatusForbidden, wire.CodeForbidden},
}

// errorOf maps an error of the service layer (or of this package) to its
// reply: the code, the HTTP status and the message. The service decides
// the kind (service.KindOf); this maps kinds to codes.
func errorOf(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	kind := service.KindOf(err)
	if errors.Is(err, ErrBadRequest) {
		kind = service.KindInvalid
	}
	kc := kindCodes[kind]
	e := &APIError{Status: kc.status, Code: kc.code, Message: err.Error()}
	var ce *service.ConflictError
	var ke *service.KeyInUseError
	var me *service.KeyMismatchError
	switch {
	case kind == service.KindKeyInUse && errors.As(err, &me):
		e.Code, e.Message = wire.CodeKeyMismatch, me.Error()
	case kind == service.KindConflict && errors.As(err, &ce):
		e.Expected, e.Actual = ce.Expected, ce.Actual
	case kind == service.KindKeyInUse && errors.As(err, &ke):
		e.Message = ke.Error() // the reason only: nothing of the session that holds the key
	}
	return e
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
