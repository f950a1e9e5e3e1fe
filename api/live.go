package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/openapi"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Live subscriptions: GET /v1/sessions/{session}/events/live and
// GET /v1/events/live answer with Server-Sent Events (wire/live.go has the
// framing), and a NATS request to <prefix>.<channel>.session.live or
// .events.live streams the same events to the request's reply inbox.
//
// Rights: the read rights of every GET (read-only tokens may watch), the
// same Host and Origin checks. Each live stream holds a slot of its own
// budget, apart from the requests in flight: at most
// Config.MaxLivePerChannel streams per channel and Config.MaxLive in all
// (429 busy with Retry-After beyond). StopLive (engine serve calls it when
// it shuts down) ends every stream at once, so that http.Server.Shutdown
// does not wait for them.

var liveOps = func() map[string]*operation {
	m := map[string]*operation{}
	for _, o := range wire.LiveOperations() {
		m[o.Name] = &operation{Operation: o}
	}
	return m
}()

// StopLive ends every live stream (HTTP and NATS) and refuses new ones
// with 503: engine serve calls it when it shuts down (http.Server's
// RegisterOnShutdown), before waiting for requests in flight. Safe to
// call more than once.
func (a *API) StopLive() { a.live.Stop() }

// liveAfter is where a live stream starts: Last-Event-ID (what a
// reconnecting EventSource sends) wins over the after_seq parameter.
func liveAfter(lastID, afterSeq string) (uint64, error) {
	for _, v := range []struct{ name, val string }{{wire.HeaderLastEventID + " header", lastID}, {"after_seq", afterSeq}} {
		if v.val == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v.val), 10, 64)
		if err != nil {
			return 0, badRequest("%s %q is not a stream sequence (a decimal number, the id of the last event seen)", v.name, clip.String(v.val, clip.Max))
		}
		return n, nil
	}
	return 0, nil
}

// httpLive serves a live operation as Server-Sent Events.
func (a *API) httpLive(op *operation) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Vary", "Authorization")
		label, err := a.serveLive(op, w, r, start)
		if err != nil {
			a.observe(op, label, err, start)
			a.failHTTP(w, r, op, err)
		}
	})
}

// serveLive streams; it returns an error only before the stream started
// (after that, errors end the stream with an "error" event). It counts a stream that started in the metrics when it starts (the
// latency is the time to the first byte, not the stream's length).
func (a *API) serveLive(op *operation, w http.ResponseWriter, r *http.Request, start time.Time) (string, error) {
	tok, channel, err := a.httpChannel(op, r)
	if err != nil {
		return "", err
	}
	key := a.httpLimitKey(tok, channel)
	label := service.ChannelLabel(key)
	q := r.URL.Query()
	for k := range q {
		if k != "after_seq" && k != wire.LiveMessageParam {
			return label, badRequest("unknown query parameter %q: %s takes after_seq and %s only", clip.String(k, clip.Max), op.Path, wire.LiveMessageParam)
		}
	}
	after, err := liveAfter(r.Header.Get(wire.HeaderLastEventID), q.Get("after_seq"))
	if err != nil {
		return label, err
	}
	asMessage, err := liveMessageMode(q.Get(wire.LiveMessageParam))
	if err != nil {
		return label, err
	}
	session := r.PathValue("session")
	if r.Method == http.MethodHead { // the headers a GET would start with, no stream
		w.Header().Set("Content-Type", wire.MIMEEventStream)
		w.WriteHeader(http.StatusOK)
		a.observe(op, label, nil, start)
		return label, nil
	}
	st, err := a.live.Open(r.Context(), key, channel, session, after)
	if errors.Is(err, service.ErrLiveStopped) {
		return label, &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the engine is shutting down: reconnect to another engine or later"}
	}
	if err != nil {
		return label, err
	}
	defer st.Close()

	// A stream outlives the server's read and write timeouts, which are
	// sized for one request.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", wire.MIMEEventStream)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	// retry: how long an EventSource waits before reconnecting.
	fmt.Fprintf(bw, "retry: 2000\n: live %s after %d\n\n", clip.String(session, clip.Max), after)
	a.observe(op, label, nil, start)
	for err := flush(); err == nil; err = flush() {
		switch step := st.Next(); step.Kind {
		case service.LiveEventStep:
			if asMessage { // no event: line: the browser's default "message" type
				fmt.Fprintf(bw, "id: %d\ndata: %s\n\n", step.Seq, step.Data)
			} else {
				fmt.Fprintf(bw, "id: %d\nevent: %s\ndata: %s\n\n", step.Seq, step.Type, step.Data)
			}
		case service.LiveHeartbeatStep:
			fmt.Fprint(bw, ": heartbeat\n\n")
		case service.LiveEndedStep: // the session was deleted
			if asMessage {
				fmt.Fprintf(bw, "data: {\"type\":%q}\n\n", wire.LiveEndEvent)
			} else {
				fmt.Fprintf(bw, "event: %s\ndata: {}\n\n", wire.LiveEndEvent)
			}
			_ = flush()
			return label, nil
		case service.LiveStoppedStep: // client gone or engine stopping
			return label, nil
		default:
			e := errorOf(step.Err)
			a.logError(op, e, step.Err)
			if asMessage {
				body, _ := json.Marshal(liveErrorMessage{Type: wire.LiveErrorEvent, Error: e})
				fmt.Fprintf(bw, "data: %s\n\n", body)
			} else {
				body, _ := json.Marshal(wire.Envelope{Error: e})
				fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", wire.LiveErrorEvent, body)
			}
			_ = flush()
			return label, nil
		}
	}
	return label, nil
}

// liveErrorMessage is the data of the error that ends a stream in
// message mode: the error envelope with "type":"error" beside it.
type liveErrorMessage struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error"`
}

// liveMessageMode reads the message query parameter: true sends every
// event as the SSE default type.
func liveMessageMode(v string) (bool, error) {
	switch v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, badRequest("%s=%q: give %s=true (every event as an SSE message, its type in data) or leave it out", wire.LiveMessageParam, clip.String(v, clip.Max), wire.LiveMessageParam)
}

// addLiveEndpoints adds the live operations to the micro service: a
// request (a wire.LiveRequest) starts a stream of messages to its reply
// inbox, each with the wire.LiveHeader: "heartbeat" first (the stream is
// open) and every LiveHeartbeat when idle, "event" with a LiveEvent per
// event, "end" when it ends (the error envelope as body when on an
// error: 503 unavailable when the engine shuts down, a reason to
// reconnect after the last event seen). A refused request gets the error
// reply of every operation.
// The engine sends each heartbeat as a request: when no one subscribes
// to the inbox any more (no responders), it ends the stream.
func (a *API) addLiveEndpoints(ctx context.Context, nc *nats.Conn, group micro.Group) error {
	for _, o := range wire.LiveOperations() {
		op := liveOps[o.Name]
		meta := map[string]string{
			"http":            strings.Join(op.Methods, "|") + " " + op.Path,
			"write":           "false",
			"summary":         op.Summary,
			"request_schema":  openapi.JSON(schemaOf(reflect.TypeFor[wire.LiveRequest]())),
			"response_schema": openapi.JSON(schemaOf(reflect.TypeFor[service.LiveEvent]())),
			"streaming":       "true",
		}
		if err := group.AddEndpoint(op.Name, a.microLive(ctx, nc, op), micro.WithEndpointSubject(op.Subject), micro.WithEndpointMetadata(meta)); err != nil {
			return fmt.Errorf("add micro endpoint %s: %w", op.Name, err)
		}
	}
	return nil
}

func (a *API) microLive(ctx context.Context, nc *nats.Conn, op *operation) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		channel, ok := a.microChannel(op, r)
		if !ok {
			return
		}
		start := time.Now()
		fail := func(err error) {
			e := errorOf(err)
			a.logError(op, e, err)
			a.respondError(r, false, e)
			a.observe(op, channel, err, start)
		}
		if err := service.ValidToken("channel (subject token)", channel); err != nil {
			fail(err)
			return
		}
		var req wire.LiveRequest
		if len(r.Data()) > 0 {
			dec := json.NewDecoder(strings.NewReader(string(r.Data())))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				fail(badRequest("%s takes a JSON object {\"session\", \"after_seq\"}: %v", op.Name, err))
				return
			}
		}
		if op.Name == wire.OpLiveAll.Name {
			if req.Session != "" {
				fail(badRequest("%s follows every session: send session.live for one", op.Name))
				return
			}
		} else if req.Session == "" {
			fail(badRequest("%s: field \"session\" is required", op.Name))
			return
		}
		st, err := a.live.Open(ctx, channel, channel, req.Session, req.AfterSeq)
		if errors.Is(err, service.ErrLiveStopped) {
			err = &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the engine is shutting down: retry later"}
		}
		if err != nil {
			fail(err)
			return
		}
		a.observe(op, channel, nil, start)
		reply := r.Reply()
		go func() {
			defer st.Close()
			a.streamNATS(nc, op, reply, st)
		}()
	})
}

func liveMsg(reply, kind string, body []byte) *nats.Msg {
	return &nats.Msg{Subject: reply, Data: body, Header: nats.Header{wire.LiveHeader: []string{kind}, "Content-Type": []string{MIMEJSON}}}
}

// streamNATS sends st's steps to reply until the stream ends.
func (a *API) streamNATS(nc *nats.Conn, op *operation, reply string, st *service.LiveStream) {
	alive := func() bool {
		pctx, cancel := context.WithTimeout(st.Context(), time.Second)
		defer cancel()
		_, err := nc.RequestMsgWithContext(pctx, liveMsg(reply, wire.LiveHeartbeatMsg, nil))
		return !errors.Is(err, nats.ErrNoResponders)
	}
	if !alive() {
		return
	}
	for {
		switch step := st.Next(); step.Kind {
		case service.LiveEventStep:
			if err := nc.PublishMsg(liveMsg(reply, wire.LiveEventMsg, step.Data)); err != nil {
				return
			}
		case service.LiveHeartbeatStep:
			if !alive() {
				return
			}
		case service.LiveEndedStep:
			_ = nc.PublishMsg(liveMsg(reply, wire.LiveEndMsg, nil))
			return
		case service.LiveStoppedStep:
			// The engine stops: the client reconnects (to another engine).
			body, _ := json.Marshal(wire.Envelope{Error: &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the engine is shutting down: reconnect after the last event seen"}})
			_ = nc.PublishMsg(liveMsg(reply, wire.LiveEndMsg, body))
			return
		default:
			e := errorOf(step.Err)
			a.logError(op, e, step.Err)
			body, _ := json.Marshal(wire.Envelope{Error: e})
			_ = nc.PublishMsg(liveMsg(reply, wire.LiveEndMsg, body))
			return
		}
	}
}
