package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/wire"
)

// LiveEvent is one event of a live stream: wire.LiveEvent.
type LiveEvent = wire.LiveEvent

// ErrWatchEnded ends a Watch whose session was deleted: its
// SessionDeleted was the last event.
var ErrWatchEnded = errors.New("watch ended: the session was deleted")

// watchRetry is how long Watch waits before reconnecting a dropped
// stream.
const watchRetry = time.Second

// Watch follows session's events ("": every session's) live, from the
// event after afterSeq on: over HTTP a Server-Sent Events stream
// (GET /v1/sessions/{session}/events/live or /v1/events/live), over NATS
// the session.live / events.live stream on an inbox. The engine's
// refusal of the stream (a bad id, a deleted session, 429 busy, ...) is
// Watch's error. The iterator yields events in stream order until ctx
// ends (then it just stops), the session's SessionDeleted (then it
// yields ErrWatchEnded once), or an error it cannot recover from. A
// dropped connection (or an engine that shuts down, 503) is reconnected
// after a second, resuming after the
// last event yielded (Last-Event-ID), so no event is lost or repeated.
func (c *Client) Watch(ctx context.Context, session string, afterSeq uint64) (iter.Seq2[LiveEvent, error], error) {
	w, ok := c.t.(watcher)
	if !ok {
		return nil, errors.New("watch: this transport cannot follow events")
	}
	s, err := w.watch(ctx, session, afterSeq)
	if err != nil {
		return nil, err
	}
	return func(yield func(LiveEvent, error) bool) {
		defer func() { s.close() }()
		last := afterSeq
		for {
			ev, err := s.next(ctx)
			if err == nil {
				last = ev.Seq
				if !yield(ev, nil) {
					return
				}
				continue
			}
			if ctx.Err() != nil {
				return
			}
			var we *Error
			if errors.Is(err, ErrWatchEnded) || errors.As(err, &we) && we.Status != http.StatusServiceUnavailable {
				yield(LiveEvent{}, err)
				return
			}
			// Dropped: reconnect after the last event seen.
			s.close()
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(watchRetry):
				}
				s, err = w.watch(ctx, session, last)
				if err == nil {
					break
				}
				if errors.As(err, &we) && we.Status != http.StatusServiceUnavailable && we.Status != http.StatusTooManyRequests {
					yield(LiveEvent{}, err)
					return
				}
			}
		}
	}, nil
}

type watcher interface {
	watch(ctx context.Context, session string, after uint64) (liveStream, error)
}

// liveStream is one connection of a watch.
type liveStream interface {
	// next returns the next event; ErrWatchEnded at the session's end, a
	// *Error for an error the engine reported, anything else when the
	// connection dropped.
	next(ctx context.Context) (LiveEvent, error)
	close()
}

func (t *httpTransport) watch(ctx context.Context, session string, after uint64) (liveStream, error) {
	path := wire.OpLiveAll.Path
	if session != "" {
		path = strings.Replace(wire.OpLive.Path, "{session}", url.PathEscape(session), 1)
	}
	sctx, cancel := context.WithCancel(ctx)
	hr, err := http.NewRequestWithContext(sctx, http.MethodGet, t.base+path, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch: %w", err)
	}
	hr.Header.Set("Accept", wire.MIMEEventStream)
	if after > 0 {
		hr.Header.Set(wire.HeaderLastEventID, strconv.FormatUint(after, 10))
	}
	if t.channel != "" && t.token == "" {
		hr.Header.Set(wire.HeaderChannel, t.channel)
	}
	if t.token != "" {
		hr.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.hc.Do(hr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", t.base+path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, wire.DecodeError(resp.StatusCode, data, resp.Header.Get(wire.HeaderRetryAfter))
	}
	return &sseStream{body: resp.Body, rd: bufio.NewReader(resp.Body), cancel: cancel}, nil
}

type sseStream struct {
	body   io.ReadCloser
	rd     *bufio.Reader
	cancel context.CancelFunc
}

func (s *sseStream) close() { s.cancel(); _ = s.body.Close() }

func (s *sseStream) next(ctx context.Context) (LiveEvent, error) {
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	var event, data string
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return LiveEvent{}, fmt.Errorf("watch: stream dropped: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			switch event {
			case "":
			case "end":
				return LiveEvent{}, ErrWatchEnded
			case "error":
				var env wire.Envelope
				if err := json.Unmarshal([]byte(data), &env); err == nil && env.Error != nil {
					return LiveEvent{}, env.Error
				}
				return LiveEvent{}, fmt.Errorf("watch: stream ended on an error: %s", data)
			default:
				var ev LiveEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return LiveEvent{}, &Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "watch: undecodable event: " + err.Error()}
				}
				return ev, nil
			}
			event, data = "", ""
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "event":
			event = v
		case "data":
			data += v
		}
	}
}

func (t *natsTransport) watch(ctx context.Context, session string, after uint64) (liveStream, error) {
	o := wire.OpLiveAll
	if session != "" {
		o = wire.OpLive
	}
	subj := t.prefix + "." + t.channel + "." + o.Subject
	b, err := json.Marshal(wire.LiveRequest{Session: session, AfterSeq: after})
	if err != nil {
		return nil, err
	}
	inbox := t.nc.NewRespInbox()
	sub, err := t.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("watch: subscribe %s: %w", inbox, err)
	}
	s := &natsStream{sub: sub}
	msg := nats.NewMsg(subj)
	msg.Reply, msg.Data = inbox, b
	msg.Header.Set("Content-Type", wire.MIMEJSON)
	if err := t.nc.PublishMsg(msg); err != nil {
		s.close()
		return nil, fmt.Errorf("watch %s: %w", subj, err)
	}
	// The first message says whether the engine took the stream: a
	// heartbeat, or the error reply.
	fctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	first, err := sub.NextMsgWithContext(fctx)
	if err != nil {
		s.close()
		if ctx.Err() == nil {
			return nil, &Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "no engine answers on " + subj + ": is `engine serve` running, and may this user publish there?"}
		}
		return nil, fmt.Errorf("watch %s: %w", subj, err)
	}
	if code := first.Header.Get("Nats-Service-Error-Code"); code != "" {
		s.close()
		status, _ := strconv.Atoi(code)
		return nil, wire.DecodeError(status, first.Data, first.Header.Get(wire.HeaderRetryAfter))
	}
	return s, nil
}

type natsStream struct {
	sub *nats.Subscription
}

func (s *natsStream) close() { _ = s.sub.Unsubscribe() }

// natsIdle is how long a NATS stream may stay silent before the client
// counts it as dropped: four heartbeats.
const natsIdle = 4 * wire.LiveHeartbeat

func (s *natsStream) next(ctx context.Context) (LiveEvent, error) {
	for {
		ictx, cancel := context.WithTimeout(ctx, natsIdle)
		m, err := s.sub.NextMsgWithContext(ictx)
		cancel()
		if err != nil {
			return LiveEvent{}, fmt.Errorf("watch: stream dropped: %w", err)
		}
		switch m.Header.Get(wire.LiveHeader) {
		case wire.LiveHeartbeatMsg:
			continue
		case wire.LiveEndMsg:
			if len(m.Data) > 0 {
				var env wire.Envelope
				if err := json.Unmarshal(m.Data, &env); err == nil && env.Error != nil {
					return LiveEvent{}, env.Error
				}
			}
			return LiveEvent{}, ErrWatchEnded
		case wire.LiveEventMsg:
			var ev LiveEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				return LiveEvent{}, &Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "watch: undecodable event: " + err.Error()}
			}
			return ev, nil
		}
	}
}
