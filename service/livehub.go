package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/wire"
)

// LiveHub is the use case behind live subscriptions, shared by the
// transports, which only frame what it yields (Server-Sent Events, NATS
// messages): it caps the streams open, per key (a channel) and in all,
// ends every stream when stopped, and turns a Watch into the steps a
// stream sends, with a heartbeat when idle. Safe for concurrent use.
type LiveHub struct {
	eng               *Engine
	perChannel, total int
	heartbeat         time.Duration
	slots             *Limiter
	ctx               context.Context
	stop              context.CancelFunc
}

// ErrLiveStopped is what LiveHub.Open returns once the hub was stopped
// (the engine shuts down): the caller reconnects later or elsewhere.
var ErrLiveStopped = errors.New("live streams stopped: the engine is shutting down")

// NewLiveHub returns a hub over eng allowing perChannel streams per key
// and total in all, each sending a heartbeat after heartbeat idle.
func NewLiveHub(eng *Engine, perChannel, total int, heartbeat time.Duration) *LiveHub {
	ctx, stop := context.WithCancel(context.Background())
	return &LiveHub{eng: eng, perChannel: perChannel, total: total, heartbeat: heartbeat, slots: NewLimiter(perChannel, total), ctx: ctx, stop: stop}
}

// Stop ends every stream and refuses new ones (ErrLiveStopped). Safe to
// call more than once.
func (h *LiveHub) Stop() { h.stop() }

// Open starts a stream of session's events ("": every session's) after
// sequence after, holding a slot of key (channel names it in the busy
// error: a 429 *wire.Error when key or the hub is full). ctx bounds the
// stream besides Stop. The caller must Close it.
func (h *LiveHub) Open(ctx context.Context, key, channel, session string, after uint64) (*LiveStream, error) {
	if h.slots.Acquire(key, channel) != nil {
		return nil, &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeBusy,
			Message: fmt.Sprintf("channel %q has the most live streams open the engine allows (%d per channel, %d in all): close one or retry later",
				clip.String(channel, clip.Max), h.perChannel, h.total)}
	}
	s := &LiveStream{hub: h, key: key}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.unhook = context.AfterFunc(h.ctx, s.cancel)
	if h.ctx.Err() != nil {
		s.Close()
		return nil, ErrLiveStopped
	}
	w, err := h.eng.Watch(s.ctx, session, after)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.w = w
	return s, nil
}

// LiveStream is one open stream of a LiveHub.
type LiveStream struct {
	hub    *LiveHub
	key    string
	w      *Watch
	ctx    context.Context
	cancel context.CancelFunc
	unhook func() bool
	once   sync.Once
}

// Context is the stream's: done when the caller's context ends, the hub
// stops or Close.
func (s *LiveStream) Context() context.Context { return s.ctx }

// Close ends the stream and frees its slot. Safe to call more than once.
func (s *LiveStream) Close() {
	s.once.Do(func() {
		if s.w != nil {
			s.w.Stop()
		}
		s.unhook()
		s.cancel()
		s.hub.slots.Release(s.key)
	})
}

// LiveStepKind says what a stream sends next.
type LiveStepKind int

// The steps of a stream.
const (
	// LiveEventStep: an event (LiveStep.Seq, Type, Data).
	LiveEventStep LiveStepKind = iota
	// LiveHeartbeatStep: nothing happened for the heartbeat period.
	LiveHeartbeatStep
	// LiveEndedStep: the watched session was deleted; nothing follows.
	LiveEndedStep
	// LiveStoppedStep: the caller's context ended or the hub stopped.
	LiveStoppedStep
	// LiveFailedStep: reading failed (LiveStep.Err); the stream ends.
	LiveFailedStep
)

// LiveStep is one step of a stream: for an event its sequence, its type
// as an SSE event name ("undecodable" when it has none) and its LiveEvent
// as JSON.
type LiveStep struct {
	Kind LiveStepKind
	Seq  uint64
	Type string
	Data []byte
	Err  error
}

// Next waits for the stream's next step.
func (s *LiveStream) Next() LiveStep {
	for {
		nctx, ncancel := context.WithTimeout(s.ctx, s.hub.heartbeat)
		rec, err := s.w.Next(nctx)
		ncancel()
		switch {
		case err == nil:
		case errors.Is(err, ErrWatchEnded):
			return LiveStep{Kind: LiveEndedStep}
		case s.ctx.Err() != nil, errors.Is(err, ErrWatchStopped):
			return LiveStep{Kind: LiveStoppedStep}
		case errors.Is(err, context.DeadlineExceeded):
			return LiveStep{Kind: LiveHeartbeatStep}
		default:
			return LiveStep{Kind: LiveFailedStep, Err: err}
		}
		data, err := json.Marshal(LiveEventOf(rec))
		if err != nil {
			continue
		}
		typ := string(rec.Envelope.Type)
		if rec.Err != nil || typ == "" || strings.ContainsAny(typ, "\r\n") {
			typ = "undecodable"
		}
		return LiveStep{Kind: LiveEventStep, Seq: rec.Seq, Type: typ, Data: data}
	}
}
