package service

// Permission decisions at call time: the channel policy's
// allow / ask / deny for a tool of the open turn, and the user's recorded
// answers (PermissionGranted) that turn an ask into allow.

import (
	"context"
	"fmt"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// Grants folds the session's PermissionGranted events up to upTo (0: the
// end of the log) with the fold's verdicts, as every engine replays them:
// the answers that allow an ask.
func (e *Engine) Grants(ctx context.Context, session string, upTo uint64) (aggregate.Grants, error) {
	return e.grantsWhere(ctx, session, upTo, nil)
}

// grantsWhere is Grants keeping only the answers keep accepts (nil: all).
func (e *Engine) grantsWhere(ctx context.Context, session string, upTo uint64, keep func(events.Envelope) bool) (aggregate.Grants, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.Grants{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	st := aggregate.State{Session: session}
	var g aggregate.Grants
	err := e.scanSession(ctx, session, upTo, func(r logport.Record) error {
		ev, err := e.storedOf(ctx, r)
		if err != nil {
			return err
		}
		before := st.LastSeq
		if st.ApplyStored(ev) == nil && ev.Seq > before && (keep == nil || keep(ev.Envelope)) {
			g.Observe(ev.Seq, keptGrants(ev.Envelope, keep))
		}
		return nil
	})
	return g, err
}

// keptGrants is env, with the answers a compaction snapshot carries
// narrowed to those keep accepts, each judged as the PermissionGranted it
// was, on its own channel: a snapshot does not let an answer a filter
// would refuse back in. (A snapshot keeps each tool's latest answer only:
// when that one is refused, an earlier accepted answer it replaced is not
// restored, so the decision after a compaction can only be stricter.)
func keptGrants(env events.Envelope, keep func(events.Envelope) bool) events.Envelope {
	if keep == nil {
		return env
	}
	v, _ := events.PayloadValue(env.Payload)
	snap, ok := v.(events.SessionCompacted)
	if !ok {
		return env
	}
	var grants []events.CompactedGrant
	for _, c := range snap.Grants {
		as := events.Envelope{Session: env.Session, Channel: c.Channel, Actor: c.By, Payload: events.PermissionGranted{Tool: c.Tool, Scope: c.Scope, By: c.By, Turn: c.Turn}}
		if keep(as) {
			grants = append(grants, c)
		}
	}
	snap.Grants = grants
	env.Payload = snap
	return env
}

// decideCall adds the permission decision to a call-check of the open
// turn ot. It takes the most restrictive of: the turn's registry for the
// turn's channel; the live registry for the turn's channel (a policy
// pushed mid-turn that denies or asks takes effect at once, while one
// that loosens waits for the next turn); and both registries for caller,
// the channel asking, when it is not the turn's (a channel never gets
// "callable" for a tool its own policy denies). Deny beats ask beats
// allow; an ask the user allowed (for the session, or once in this turn)
// becomes allow, naming the answer.
func (e *Engine) decideCall(ctx context.Context, out *wire.CallCheckReply, ot *openTurn, caller string) error {
	if ot.reg == nil {
		return nil
	}
	channel := ot.req.Channel
	d := ot.reg.Decide(channel, ot.req.Profile, out.Name)
	consider := func(reg *resolver.Registry, ch string) {
		if reg == nil {
			return
		}
		if c := reg.Decide(ch, ot.req.Profile, out.Name); severity(c.Decision) > severity(d.Decision) {
			d, channel = c, ch
		}
	}
	live := e.Registry()
	if live != ot.reg {
		consider(live, ot.req.Channel)
	}
	if caller != "" && caller != ot.req.Channel {
		consider(ot.reg, caller)
		if live != ot.reg {
			consider(live, caller)
		}
	}
	out.Channel, out.Decision, out.Rule = channel, d.Decision, d.Rule
	if !out.Callable {
		return nil
	}
	switch d.Decision {
	case resolver.DecisionDeny:
		out.Callable, out.Reason = false, wire.CallDenied
		out.Note = fmt.Sprintf("tool %q is denied on channel %q by %s; do not call it", out.Name, channel, d.Rule)
	case resolver.DecisionAsk:
		// An answer counts only when given on a channel whose policy does
		// not deny the tool: a channel cannot allow what it may not use.
		g, err := e.grantsWhere(ctx, out.Session, out.Seq, func(env events.Envelope) bool {
			pg, ok := env.Payload.(events.PermissionGranted)
			return !ok || severity(ot.reg.Decide(env.Channel, ot.req.Profile, pg.Tool).Decision) < severity(resolver.DecisionDeny)
		})
		if err != nil {
			return err
		}
		if gr, ok := g.Allowed(out.Name, out.Turn); ok {
			out.Grant = &wire.Grant{Tool: gr.Tool, Scope: gr.Scope, By: gr.By, Turn: gr.Turn, Seq: gr.Seq}
			out.Decision = resolver.DecisionAllow
			out.Rule = fmt.Sprintf("granted:%s:%s@%d", gr.Scope, gr.By, gr.Seq)
			out.Note = fmt.Sprintf("tool %q may run in turn %d: %s allowed it (%s) at seq %d", out.Name, out.Turn, gr.By, gr.Scope, gr.Seq)
			return nil
		}
		out.Callable, out.Reason = false, wire.CallAsk
		out.Note = fmt.Sprintf("tool %q needs the user's permission (%s): ask, then record the answer as PermissionGranted{tool:%q, scope:\"once\" or \"session\", by}", out.Name, d.Rule, out.Name)
	}
	return nil
}

// severity orders decisions for decideCall: deny > ask > allow.
func severity(decision string) int {
	switch decision {
	case resolver.DecisionDeny:
		return 2
	case resolver.DecisionAsk:
		return 1
	}
	return 0
}
