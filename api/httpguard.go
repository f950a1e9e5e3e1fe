package api

import (
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/httpguard"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// readOnlyOps are the operations a read-only token may call: those of
// the table and the live streams that change nothing
// (wire.Operation.ReadOnly).
var readOnlyOps = func() map[string]bool {
	m := map[string]bool{}
	for _, o := range append(wire.Operations(), wire.LiveOperations()...) {
		if o.ReadOnly() {
			m[o.Name] = true
		}
	}
	return m
}()

// authenticate returns the token of an HTTP request, or a 401/403 error.
func (a *API) authenticate(op *operation, r *http.Request) (*tokens.Token, error) {
	if a.cfg.Tokens == nil {
		return nil, nil
	}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return nil, &APIError{Status: http.StatusUnauthorized, Code: wire.CodeUnauthorized,
			Message: "this engine's HTTP API needs Authorization: Bearer <token> (a token of its --http-tokens file)"}
	}
	e, ok := a.cfg.Tokens.Lookup(strings.TrimSpace(tok))
	if !ok {
		return nil, &APIError{Status: http.StatusUnauthorized, Code: wire.CodeUnauthorized, Message: "the bearer token is not one of this engine's tokens"}
	}
	if e.ReadOnly && !readOnlyOps[op.Name] {
		return nil, &APIError{Status: http.StatusForbidden, Code: wire.CodeForbidden,
			Message: fmt.Sprintf("the token of channel %q is read-only and may not call %s", e.Channel, op.Name)}
	}
	if ch := r.Header.Get(HeaderChannel); ch != "" && ch != e.Channel {
		return nil, &APIError{Status: http.StatusForbidden, Code: wire.CodeForbidden,
			Message: fmt.Sprintf("%s %q differs from the token's channel %q: leave the header out or send the token of that channel", HeaderChannel, clip.String(ch, clip.Max), e.Channel)}
	}
	return &e, nil
}

// httpChannel authenticates an HTTP request of op and returns its token
// (nil without tokens) and channel: the token's, else the Engine-Channel
// header, else Config.HTTPChannel.
func (a *API) httpChannel(op *operation, r *http.Request) (*tokens.Token, string, error) {
	tok, err := a.authenticate(op, r)
	if err != nil {
		return nil, "", err
	}
	if tok != nil {
		return tok, tok.Channel, nil
	}
	ch := r.Header.Get(HeaderChannel)
	if ch == "" {
		return nil, a.cfg.HTTPChannel, nil
	}
	return nil, ch, service.ValidToken(HeaderChannel+" header", ch)
}

// httpLimitKey is the limiter key of an HTTP request of channel: the
// channel itself when the engine knows it (a token's channel, the
// default HTTPChannel, or one of Config.HTTPChannels), else
// service.UnknownChannels, one budget that every made-up Engine-Channel shares.
// Without tokens the header is the caller's word: a client that sends
// many channel names gets no more than one channel's share.
func (a *API) httpLimitKey(tok *tokens.Token, channel string) string {
	if tok != nil || channel == a.cfg.HTTPChannel || slices.Contains(a.cfg.HTTPChannels, channel) {
		return channel
	}
	return service.UnknownChannels
}

// checkContentType refuses a body that is neither JSON nor msgpack (issue
// 11, item 5): a form or text/plain body is what a cross-site <form> or
// no-cors fetch sends, and must never be read as a command.
func checkContentType(r *http.Request, data []byte) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && len(data) == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == MIMEJSON || wire.IsMsgpack(mt)) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return &APIError{Status: http.StatusUnsupportedMediaType, Code: wire.CodeUnsupportedMedia,
		Message: fmt.Sprintf("request body has Content-Type %s: send %s (or %s)", clip.String(ct, clip.Max), MIMEJSON, wire.MIMEMsgpack)}
}

// Protect wraps an HTTP handler with the checks every route of the
// engine's HTTP server needs (httpguard.Guard of
// Config.Hosts and Config.Origins): Host names the engine (no DNS
// rebinding), no cross-origin writes. A refused request gets a forbidden
// (403) error reply. Handler applies Protect itself; wrap other routes
// served beside it.
func (a *API) Protect(next http.Handler) http.Handler {
	return httpguard.Guard{Hosts: a.cfg.Hosts, Origins: a.cfg.Origins}.Protect(next, func(w http.ResponseWriter, r *http.Request, msg string) {
		a.writeError(w, wire.WantsMsgpack(r.Header.Get("Accept")), &APIError{Status: http.StatusForbidden, Code: wire.CodeForbidden, Message: msg})
	})
}
