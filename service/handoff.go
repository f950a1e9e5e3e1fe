package service

import (
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// handoffViews is implemented by views that take a writer's acknowledged
// events (*projection.Projection).
type handoffViews interface {
	Handoff(projection.Acked) bool
}

// handoff gives the views the events the log just acknowledged at
// ar.First.., stored on the condition that the session was at expected,
// so that the projection of this process folds them now and its feed
// skips decoding and folding them when it delivers them. A duplicate (the
// events were stored by an earlier try) is not handed over: the feed
// folds it as before.
func (e *Engine) handoff(session string, expected uint64, ar logport.AppendResult, envs []events.Envelope) {
	h, ok := e.proj.(handoffViews)
	if !ok || ar.Duplicate || ar.Last-ar.First+1 != uint64(len(envs)) {
		return
	}
	h.Handoff(projection.Acked{Session: session, Expected: expected, First: ar.First, Events: envs})
}
