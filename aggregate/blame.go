package aggregate

import (
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// Blame folds a session's events and tracks which event last changed the
// explanation of one tool: the event after which the registry's
// Explain of the session's request differs in its outcome (Included) or
// its deciding rule (Rule) from what it was just before that event, with
// no later event changing either again. When no event changed them, the
// explanation is the one the session had before its first event (the
// profile, the registry or a per-turn override decides) and no event is to
// blame. The Detail sentence follows the current intent but does not move
// the blame: a picked list replaced by another that also leaves the tool
// out keeps the blame on the event that made "not-picked" the rule.
//
// The explanation depends only on the intent, the request's override and
// profile, and the registry, so Blame re-explains only when an event
// changed the intent. A Blame is not safe for concurrent use.
type Blame struct {
	state   State
	reg     *resolver.Registry
	req     resolver.Request
	tool    string
	current resolver.Explanation
	seq     uint64
}

// NewBlame starts tracking tool for session against reg, with the
// request's per-turn override and agent profile (its session intent comes
// from the fold).
func NewBlame(reg *resolver.Registry, session, tool string, override intent.Override, profile string) *Blame {
	b := &Blame{state: State{Session: session}, reg: reg, tool: tool,
		req: resolver.Request{Override: override, Profile: profile}}
	b.current = b.explain()
	return b
}

// NewChannelBlame is NewBlame for the tools of channel, whose policy
// narrows the registry's resolutions.
func NewChannelBlame(reg *resolver.Registry, session, tool string, override intent.Override, profile, channel string) *Blame {
	b := &Blame{state: State{Session: session}, reg: reg, tool: tool,
		req: resolver.Request{Override: override, Profile: profile, Channel: channel}}
	b.current = b.explain()
	return b
}

func (b *Blame) explain() resolver.Explanation {
	b.req.Session = b.state.Intent
	return b.reg.Explain(b.req, b.tool)
}

// Apply folds one event as read from the log (see State.ApplyStored) and
// reports whether it changed the tool's explanation; if so, its sequence
// becomes the blamed event. An event the fold does not apply
// changes nothing and is never blamed.
func (b *Blame) Apply(ev Stored) bool {
	before := b.state.Intent
	if err := b.state.ApplyStored(ev); err != nil {
		return false
	}
	if before.Equal(b.state.Intent) {
		return false
	}
	ex := b.explain()
	changed := ex.Included != b.current.Included || ex.Rule != b.current.Rule
	b.current = ex
	if changed {
		b.seq = ev.Seq
	}
	return changed
}

// Explanation is the tool's explanation after the events applied so far.
func (b *Blame) Explanation() resolver.Explanation { return b.current }

// Seq is the stream sequence of the event that last changed the
// explanation, 0 when none did.
func (b *Blame) Seq() uint64 { return b.seq }

// State is the session folded so far.
func (b *Blame) State() State { return b.state }
