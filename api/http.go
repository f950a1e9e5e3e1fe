package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/msgpackjson"
	"github.com/toolintent/engine/internal/openapi"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Handler returns the HTTP/JSON gateway: one route per operation (see
// Operations), plus JSON 404 and 405 replies for everything else.
//
// Channels, tokens, actors and in-flight budgets are as the package doc
// says (Channels and trust); read-only tokens call read operations only,
// and a token that names an actor fixes it. Every route is behind Protect
// (Host names, no cross-origin writes); POST bodies must be
// application/json or application/msgpack (415 otherwise), at most
// Config.MaxBodyBytes (413 beyond); replies are JSON, or msgpack when
// Accept names application/msgpack.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, op := range operations {
		h := a.httpOp(op)
		for _, m := range op.Methods {
			mux.Handle(m+" "+op.Path, h)
		}
	}
	for _, op := range liveOps {
		mux.Handle(http.MethodGet+" "+op.Path, a.httpLive(op))
	}
	mux.HandleFunc(http.MethodGet+" "+PathOpenAPI, a.serveOpenAPI)
	return a.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mp := wire.WantsMsgpack(r.Header.Get("Accept"))
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			a.writeError(w, mp, &APIError{Status: http.StatusMethodNotAllowed, Code: wire.CodeMethodNotAllowed,
				Message: "method " + r.Method + " is not allowed on " + r.URL.Path + ": use " + strings.Join(allow, " or ")})
			return
		}
		a.writeError(w, mp, &APIError{Status: http.StatusNotFound, Code: wire.CodeNotFound,
			Message: "no route for " + r.Method + " " + r.URL.Path + ": the API is under /v1 (GET /v1/sessions, /v1/sessions/{session}, ...)"})
	}))
}

// allowed lists the methods the mux serves on r's path.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, p := mux.Handler(probe); p != "" {
			out = append(out, m)
		}
	}
	return out
}

func (a *API) httpOp(op *operation) http.Handler {
	names := openapi.PathNames(op.Path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mp := wire.WantsMsgpack(r.Header.Get("Accept"))
		start := time.Now()
		resp, channel, err := a.serveHTTP(op, names, r)
		defer func() { a.observe(op, channel, err, start) }()
		if err != nil {
			a.failHTTP(w, r, op, err)
			return
		}
		if e, ok := resp.(etagged); ok {
			if tag := e.ETag(); tag != "" {
				w.Header().Set("ETag", `"`+tag+`"`)
				if (r.Method == http.MethodGet || r.Method == http.MethodHead) && ifNoneMatch(r.Header.Get("If-None-Match")) == tag {
					w.WriteHeader(http.StatusNotModified)
					return
				}
			}
		}
		body, err := msgpackjson.EncodeReply(resp, mp)
		if err != nil {
			a.writeError(w, mp, errorOf(err))
			return
		}
		writeBody(w, http.StatusOK, mp, body)
	})
}

// etagged is a reply with an entity tag (a turn view): the tag of the
// whole reply, so that a GET whose If-None-Match names it is answered 304
// without a body. A backend that holds the rendering alone names its
// rendering_hash in the request's if_none_match instead, on any method
// and over NATS, and gets the view without it.
type etagged interface {
	ETag() string
}

// ifNoneMatch returns the entity tag an If-None-Match header names: its
// first tag, quotes and a weak prefix removed ("" for none or "*").
func ifNoneMatch(h string) string {
	tag, _, _ := strings.Cut(h, ",")
	tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
	tag = strings.Trim(tag, `"`)
	if tag == "*" {
		return ""
	}
	return tag
}

// serveHTTP answers one request; it also returns the channel's metrics
// label: "" when refused before the channel was known, OtherChannels for
// an unknown HTTP channel (see httpLimitKey).
func (a *API) serveHTTP(op *operation, names []string, r *http.Request) (any, string, error) {
	tok, channel, err := a.httpChannel(op, r)
	if err != nil {
		return nil, "", err
	}
	// From here on the request counts under its limiter key: the channel,
	// or the one key of every unknown HTTP channel, whose label is
	// "other" (a made-up Engine-Channel neither gets a budget
	// of its own nor a metrics series).
	key := a.httpLimitKey(tok, channel)
	label := service.ChannelLabel(key)
	if err := a.lim.Acquire(key, channel); err != nil {
		return nil, label, err
	}
	defer a.lim.Release(key)
	req := op.NewRequest()
	switch r.Method {
	case http.MethodPost:
		if len(r.URL.RawQuery) > 0 {
			return nil, label, badRequest("%s %s takes its parameters in the JSON body, not the query string (%s)", r.Method, op.Path, clip.String(r.URL.RawQuery, clip.Max))
		}
		data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.bodyLimit(op)))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, label, tooLarge(op, a.bodyLimit(op))
			}
			return nil, label, badRequest("read request body: %v", err)
		}
		if err := checkContentType(r, data); err != nil {
			return nil, label, err
		}
		if err := msgpackjson.DecodeBody(data, r.Header.Get("Content-Type"), req); err != nil {
			return nil, label, err
		}
	default: // GET, HEAD
		if err := wire.BindQuery(req, r.URL.Query(), names); err != nil {
			return nil, label, err
		}
	}
	for _, n := range names {
		if err := wire.BindPath(req, n, r.PathValue(n)); err != nil {
			return nil, label, err
		}
	}
	if err := service.BindIdempotencyKey(req, r.Header.Get(wire.HeaderIdempotencyKey)); err != nil {
		return nil, label, err
	}

	o := service.Origin{Actor: r.Header.Get(wire.HeaderActor)}
	if tok != nil && tok.Actor != "" {
		body, _ := wire.FieldString(req, "actor")
		for _, got := range []string{o.Actor, body} {
			if got != "" && got != tok.Actor {
				return nil, label, &APIError{Status: http.StatusForbidden, Code: wire.CodeForbidden,
					Message: fmt.Sprintf("actor %q differs from the token's actor %q: leave it out or send that actor's token", clip.String(got, clip.Max), tok.Actor)}
			}
		}
		o.Actor = tok.Actor
	}
	// Every operation knows its caller's channel: writes record it, reads
	// resolve under its policy.
	o.Channel = channel
	resp, err := a.run(r.Context(), op, req, o)
	return resp, label, err
}

// bodyLimit bounds a request body of op: Config.MaxBodyBytes, and for a
// registry diff at least a registry file of service.MaxRegistryBytes in
// its JSON envelope.
func (a *API) bodyLimit(op *operation) int64 {
	if op.Name == wire.OpRegistryDiff.Name {
		return max(a.cfg.MaxBodyBytes, service.MaxRegistryBytes+64<<10)
	}
	return a.cfg.MaxBodyBytes
}

// tooLarge is the error of a request body over limit, with the fix that
// fits the operation.
func tooLarge(op *operation, limit int64) error {
	fix := "send fewer commands per request"
	switch op.Name {
	case wire.OpRegistryDiff.Name:
		fix = "a registry file this large (tool embeddings make one so) cannot be diffed through the API; load it with serve --registry FILE instead"
	case wire.OpExplainBatch.Name:
		fix = "ask for fewer tools per request"
	}
	return &APIError{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeTooLarge,
		Message: "request body exceeds " + byteSize(limit) + ": " + fix}
}

// failHTTP answers an HTTP request of op with err's error reply (and the
// WWW-Authenticate challenge of a 401), and logs it.
func (a *API) failHTTP(w http.ResponseWriter, r *http.Request, op *operation, err error) {
	e := errorOf(err)
	if e.Code == wire.CodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="engine"`)
	}
	a.logError(op, e, err)
	a.writeError(w, wire.WantsMsgpack(r.Header.Get("Accept")), e)
}

func (a *API) writeError(w http.ResponseWriter, mp bool, e *APIError) {
	if ra := retryAfter(e); ra != "" {
		w.Header().Set(wire.HeaderRetryAfter, ra)
	}
	body, err := msgpackjson.EncodeReply(wire.Envelope{Error: e}, mp)
	if err != nil {
		http.Error(w, e.Message, e.Status)
		return
	}
	writeBody(w, e.Status, mp, body)
}

// writeBody writes a reply body (JSON ends with a newline) with its
// Content-Length: without it a reply over net/http's 2 KB buffer went out
// chunked, and the client could not size its read.
func writeBody(w http.ResponseWriter, status int, mp bool, body []byte) {
	n := len(body)
	if !mp {
		n++
	}
	w.Header().Set("Content-Type", contentType(mp))
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	if !mp {
		_, _ = w.Write([]byte("\n"))
	}
}

func (a *API) logError(op *operation, e *APIError, err error) {
	ev := a.cfg.Logger.Debug()
	if e.Code == wire.CodeInternal || e.Code == CodeUnavailable {
		ev = a.cfg.Logger.Warn()
	}
	ev.Str("op", op.Name).Str("code", e.Code).Err(err).Msg("request failed")
}
