package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// readOnlyOps are the operations a read-only token may call.
var readOnlyOps = map[string]bool{"intent": true, "resolve": true, "history": true, "explain": true,
	"sessions": true, "registry": true, "budget": true, "turn-inspect": true,
	"turn-call-check": true, "registry-diff": true, "session-live": true, "events-live": true}

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

// httpLimitKey is the limiter key of an HTTP request of channel (#24 row
// 6): the channel itself when the engine knows it (a token's channel, the
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

// parseOrigin checks an allowed origin: scheme://host[:port], no path.
func parseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", fmt.Errorf("allowed origin %q: want scheme://host[:port], e.g. https://console.example.com", o)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Protect wraps an HTTP handler with the checks every route of the
// engine's HTTP server needs (issue 11, item 5):
//   - the Host header must name the engine (Config.Hosts, by default
//     localhost, 127.0.0.1 and [::1]): a page whose DNS name was rebound
//     to the engine's address sends its own name and is refused;
//   - a browser request with an unsafe method from another origin
//     (Sec-Fetch-Site, or Origin against Host) is refused unless the
//     origin is in Config.Origins: no cross-site form or fetch writes.
//
// Handler applies Protect itself; wrap other routes served beside it.
func (a *API) Protect(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range a.cfg.Origins {
		if norm, err := parseOrigin(o); err == nil {
			_ = cop.AddTrustedOrigin(norm)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, wire.WantsMsgpack(r.Header.Get("Accept")), &APIError{Status: http.StatusForbidden, Code: wire.CodeForbidden,
			Message: fmt.Sprintf("cross-origin %s from %s refused: the engine accepts writes only from its own pages (or serve --http-origin)", r.Method, clip.String(originOf(r), clip.Max))})
	}))
	protected := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostAllowed(r.Host) {
			a.writeError(w, wire.WantsMsgpack(r.Header.Get("Accept")), &APIError{Status: http.StatusForbidden, Code: wire.CodeForbidden,
				Message: fmt.Sprintf("Host %q is not a name of this engine (%s): reach it by one of those, or add the name with serve --http-host", clip.String(r.Host, clip.Max), strings.Join(a.hostNames(), ", "))})
			return
		}
		protected.ServeHTTP(w, r)
	})
}

func originOf(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return "a " + s + " page"
	}
	return "another origin"
}

func (a *API) hostNames() []string {
	if len(a.cfg.Hosts) > 0 {
		return a.cfg.Hosts
	}
	return []string{"localhost", "127.0.0.1", "[::1]"}
}

// hostAllowed matches a Host header against the configured names: a name
// without a port matches any port.
func (a *API) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	return slices.ContainsFunc(a.hostNames(), func(want string) bool {
		if strings.EqualFold(want, host) {
			return true
		}
		if _, _, err := net.SplitHostPort(want); err == nil {
			return false // a name with a port matches only exactly
		}
		return strings.EqualFold(strings.TrimSuffix(strings.TrimPrefix(want, "["), "]"), name)
	})
}
