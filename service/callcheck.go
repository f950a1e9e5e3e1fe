package service

// CallCheck: whether a tool call the model made may execute now. A native rendering keeps defining tools the history references
// after the user disabled them, so "defined" never means "allowed": the
// backend asks before it executes.

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// CallCheck reports whether a call of tool may execute now in the
// session's open turn: callable when the turn froze the tool
// and the session does not disable it (checked against the log as it is
// now, so a disable stored mid-turn refuses the next call); otherwise the
// reason: disabled, not in the turn, or unknown. A refusal is a result,
// not an error: the backend answers the model's call with the note. It
// returns ErrNoTurn outside a turn and ErrInvalid for an empty name or an
// invalid session id. It writes nothing; any engine answers the same.
func (e *Engine) CallCheck(ctx context.Context, session, tool string) (wire.CallCheckReply, error) {
	return e.CallCheckAs(ctx, session, tool, "")
}

// CallCheckAs is CallCheck asked by channel caller: when caller is not
// the channel that began the turn, the caller's own channel policy
// counts too, so a channel never reads "callable" for a tool its policy
// denies or asks. An empty caller is the turn's channel.
func (e *Engine) CallCheckAs(ctx context.Context, session, tool, caller string) (wire.CallCheckReply, error) {
	return e.CallCheckIn(ctx, session, tool, caller, "")
}

// CallCheckIn is CallCheckAs for a request rendered in provider mode
// provider ("" is the mode the turn was begun for, else the default): a
// tool is callable only when that mode's array defines it, so in an
// engine-side mode a deferred tool the session has not loaded is
// wire.CallNotLoaded.
func (e *Engine) CallCheckIn(ctx context.Context, session, tool, caller, provider string) (wire.CallCheckReply, error) {
	if tool == "" {
		return wire.CallCheckReply{}, fmt.Errorf("%w: tool is empty: name the tool the model called", ErrInvalid)
	}
	if err := validProvider(provider); err != nil {
		return wire.CallCheckReply{}, err
	}
	st, err := e.latest(ctx, session, 0)
	if err != nil {
		return wire.CallCheckReply{}, err
	}
	var out wire.CallCheckReply
	err = e.withTurn(ctx, st, func(ot *openTurn, st aggregate.State) error {
		out = callCheck(st, ot, tool, turnProvider(provider, ot))
		if out.Reason == wire.CallUnknown {
			return nil
		}
		return e.decideCall(ctx, &out, ot, caller)
	})
	return out, err
}

// turnProvider is the provider row a request of ot is rendered in: the
// request's provider, else the one ot was begun for, else the default.
func turnProvider(provider string, ot *openTurn) deferral.Provider {
	if provider == "" && ot != nil {
		provider = ot.req.Provider
	}
	row, ok := deferral.LookupProvider(provider)
	if !ok { // a recorded name this engine does not know
		row, _ = deferral.LookupProvider("")
	}
	return row
}

// callCheck decides CallCheck against the open turn ot of st, for a
// request rendered by row.
func callCheck(st aggregate.State, ot *openTurn, name string, row deferral.Provider) wire.CallCheckReply {
	out := wire.CallCheckReply{Session: st.Session, Seq: st.LastSeq, Turn: ot.turn.Number(), Name: name, Provider: row.Name}
	_, disabled := slices.BinarySearch(st.Intent.Disabled, name)
	t, inTurn := ot.turn.Lookup(name)
	if inTurn {
		wt := wireTool(t)
		out.Tool, out.Permission, out.Deferred = &wt, t.Permission, t.Deferred
		_, out.Loaded = slices.BinarySearch(st.Loaded, name)
	}
	known := inTurn
	if !known && ot.reg != nil {
		_, known = ot.reg.Tool(name)
	}
	switch {
	case disabled:
		out.Reason = wire.CallDisabled
		out.Note = fmt.Sprintf("tool %q is disabled in this session; do not call it until the user enables it", name)
	case inTurn && !row.Native && out.Deferred && !ot.turn.IsLoaded(name):
		out.Reason = wire.CallNotLoaded
		out.Note = fmt.Sprintf("tool %q is deferred and not loaded in turn %d, so the %s array does not define it; load it with %s first", name, out.Turn, row.Name, resolver.ToolSearch)
	case inTurn:
		out.Reason, out.Callable = wire.CallCallable, true
		out.Note = fmt.Sprintf("tool %q may run in turn %d with permission %q", name, out.Turn, t.Permission)
	case known:
		out.Reason = wire.CallNotInTurn
		out.Note = fmt.Sprintf("tool %q is not among this turn's tools (the session's intent, profile or override leaves it out); do not call it", name)
	default:
		out.Reason = wire.CallUnknown
		out.Note = fmt.Sprintf("no tool %q exists in registry %s; call only the turn's tools", name, ot.turn.RegistryVersion())
	}
	return out
}
