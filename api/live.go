package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Live subscriptions (#29): GET /v1/sessions/{session}/events/live and
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

// LiveEvent is one event of a live stream (wire.LiveEvent's JSON).
type LiveEvent struct {
	service.EventRef
	Session string   `json:"session"`
	Payload *Command `json:"payload,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// liveEventOf is r as a live stream sends it.
func liveEventOf(r jetstream.Record) LiveEvent {
	e := LiveEvent{
		EventRef: service.EventRef{Seq: r.Seq, ID: r.Envelope.ID, Type: string(r.Envelope.Type), Channel: r.Envelope.Channel, Actor: r.Envelope.Actor, Time: r.Time},
		Session:  r.Session,
	}
	if r.Err != nil {
		e.Error = r.Err.Error()
	}
	if r.Envelope.Payload != nil {
		e.Payload = &Command{r.Envelope.Payload}
	}
	return e
}

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
func (a *API) StopLive() { a.stopLive() }

// liveAcquire takes a live-stream slot of key, or returns the 429 of a
// full live budget.
func (a *API) liveAcquire(key, channel string) error {
	if err := a.live.acquire(key, channel); err != nil {
		return &APIError{Status: http.StatusTooManyRequests, Code: CodeBusy,
			Message: fmt.Sprintf("channel %q has the most live streams open the engine allows (%d per channel, %d in all): close one or retry later",
				clip.String(channel, clip.Max), a.cfg.MaxLivePerChannel, a.cfg.MaxLive)}
	}
	return nil
}

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
		label, err := a.serveLive(op, w, r)
		a.observe(op, label, err, start)
		if err != nil {
			e := errorOf(err)
			if e.Code == CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="engine"`)
			}
			a.logError(op, e, err)
			a.writeError(w, wantsMsgpack(r.Header.Get("Accept")), e)
		}
	})
}

// serveLive streams; it returns an error only before the stream started
// (after that, errors end the stream with an "error" event).
func (a *API) serveLive(op *operation, w http.ResponseWriter, r *http.Request) (string, error) {
	tok, err := a.authenticate(op, r)
	if err != nil {
		return "", err
	}
	channel := a.cfg.HTTPChannel
	if tok != nil {
		channel = tok.Channel
	} else if ch := r.Header.Get(HeaderChannel); ch != "" {
		if err := validToken(HeaderChannel+" header", ch); err != nil {
			return "", err
		}
		channel = ch
	}
	key := a.httpLimitKey(tok, channel)
	label := channelLabel(key)
	q := r.URL.Query()
	for k := range q {
		if k != "after_seq" {
			return label, badRequest("unknown query parameter %q: %s takes after_seq only", clip.String(k, clip.Max), op.Path)
		}
	}
	after, err := liveAfter(r.Header.Get(wire.HeaderLastEventID), q.Get("after_seq"))
	if err != nil {
		return label, err
	}
	session := r.PathValue("session")
	if err := a.liveAcquire(key, channel); err != nil {
		return label, err
	}
	defer a.live.release(key)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(a.liveCtx, cancel)
	defer stop()
	if a.liveCtx.Err() != nil {
		return label, &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the engine is shutting down: reconnect to another engine or later"}
	}
	wt, err := a.eng.Watch(ctx, session, after)
	if err != nil {
		return label, err
	}
	defer wt.Stop()

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
	if flush() != nil {
		return label, nil
	}
	for {
		nctx, ncancel := context.WithTimeout(ctx, a.cfg.LiveHeartbeat)
		rec, err := wt.Next(nctx)
		ncancel()
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, service.ErrWatchEnded), errors.Is(err, jetstream.ErrWatchStopped):
			// client gone, engine stopping, or the session was deleted
			if errors.Is(err, service.ErrWatchEnded) {
				fmt.Fprint(bw, "event: end\ndata: {}\n\n")
				_ = flush()
			}
			return label, nil
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Fprint(bw, ": heartbeat\n\n")
			if flush() != nil {
				return label, nil
			}
			continue
		default:
			e := errorOf(err)
			a.logError(op, e, err)
			body, _ := json.Marshal(wire.Envelope{Error: e})
			fmt.Fprintf(bw, "event: error\ndata: %s\n\n", body)
			_ = flush()
			return label, nil
		}
		body, err := json.Marshal(liveEventOf(rec))
		if err != nil {
			return label, nil
		}
		typ := string(rec.Envelope.Type)
		if rec.Err != nil || typ == "" || strings.ContainsAny(typ, "\r\n") {
			typ = "undecodable"
		}
		fmt.Fprintf(bw, "id: %d\nevent: %s\ndata: %s\n\n", rec.Seq, typ, body)
		if flush() != nil {
			return label, nil
		}
	}
}
