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
)

// The reasons of a CallCheckResult.
const (
	// CallCallable: the tool is in the open turn's tools and the session
	// does not disable it.
	CallCallable = "callable"
	// CallDisabled: the session disables the tool (now, even if the turn
	// froze it before the disable, or a native rendering still defines it
	// because the history references it).
	CallDisabled = "disabled"
	// CallNotInTurn: the turn's registry has the tool, but the turn's
	// resolution leaves it out (the intent, the profile, the override or
	// the channel's policy), or it cannot run in this deployment.
	CallNotInTurn = "not_in_turn"
	// CallUnknown: the turn's registry has no tool of that name.
	CallUnknown = "unknown"
	// CallNotLoaded: in an engine-side mode (anthropic-engine,
	// openai-engine) the tool is deferred and not loaded, so the
	// request's array does not define it: tool_search loads it first.
	CallNotLoaded = "not_loaded"
)

// CallCheckResult says whether a tool call may execute in the session's
// open turn, and with what.
type CallCheckResult struct {
	Session string `json:"session"`
	// Seq is the session sequence the check was decided at.
	Seq uint64 `json:"seq"`
	// Turn is the open turn's number.
	Turn uint64 `json:"turn"`
	// Name is the tool asked about.
	Name string `json:"name"`
	// Callable is true only for Reason CallCallable.
	Callable bool `json:"callable"`
	// Reason is CallCallable, CallDisabled, CallNotInTurn, CallUnknown,
	// CallNotLoaded, CallAsk or CallDenied.
	Reason string `json:"reason"`
	// Note says the same for a person or a model, with what to do.
	Note string `json:"note"`
	// Tool is the turn's resolved tool (its frozen definition and
	// Permission, the wrapper execution goes through); nil when the turn
	// does not hold it. For a disabled tool of the turn it is still given,
	// with Callable false.
	Tool *resolver.Tool `json:"tool,omitempty"`
	// Permission is Tool's permission ("" without Tool).
	Permission string `json:"permission,omitempty"`
	// Deferred and Loaded say whether the tool is deferred, and loaded by
	// the engine's tool_search in the session. In a native mode a deferred
	// tool the engine has not loaded stays callable: the array defines it
	// (defer_loading), and a provider's own search (such as
	// anthropic-native-server) loads tools the engine does not see. In an
	// engine-side mode the array defines only the resident and loaded
	// tools, so a deferred tool that is not loaded is CallNotLoaded.
	Deferred bool `json:"deferred"`
	Loaded   bool `json:"loaded"`
	// Provider is the provider mode the check was decided for: the
	// request's, else the one the turn was begun for, else the default.
	Provider string `json:"provider"`
	// Channel is the channel whose policy decided: the open turn's.
	Channel string `json:"channel,omitempty"`
	// Decision is the permission decision for a known tool: "allow",
	// "ask" or "deny", "" for an unknown tool; an ask the user
	// allowed reads "allow" with Grant set.
	Decision string `json:"decision,omitempty"`
	// Rule names what decided (resolver.Decision.Rule, or
	// "granted:SCOPE:BY@SEQ" for an answered ask).
	Rule string `json:"rule,omitempty"`
	// Grant is the user's answer that allowed an ask, nil otherwise.
	Grant *aggregate.Grant `json:"grant,omitempty"`
}

// CallCheck reports whether a call of tool may execute now in the
// session's open turn: callable when the turn froze the tool
// and the session does not disable it (checked against the log as it is
// now, so a disable stored mid-turn refuses the next call); otherwise the
// reason: disabled, not in the turn, or unknown. A refusal is a result,
// not an error: the backend answers the model's call with the note. It
// returns ErrNoTurn outside a turn and ErrInvalid for an empty name or an
// invalid session id. It writes nothing; any engine answers the same.
func (e *Engine) CallCheck(ctx context.Context, session, tool string) (CallCheckResult, error) {
	return e.CallCheckAs(ctx, session, tool, "")
}

// CallCheckAs is CallCheck asked by channel caller: when caller is not
// the channel that began the turn, the caller's own channel policy
// counts too, so a channel never reads "callable" for a tool its policy
// denies or asks. An empty caller is the turn's channel.
func (e *Engine) CallCheckAs(ctx context.Context, session, tool, caller string) (CallCheckResult, error) {
	return e.CallCheckIn(ctx, session, tool, caller, "")
}

// CallCheckIn is CallCheckAs for a request rendered in provider mode
// provider ("" is the mode the turn was begun for, else the default): a
// tool is callable only when that mode's array defines it, so in an
// engine-side mode a deferred tool the session has not loaded is
// CallNotLoaded.
func (e *Engine) CallCheckIn(ctx context.Context, session, tool, caller, provider string) (CallCheckResult, error) {
	if tool == "" {
		return CallCheckResult{}, fmt.Errorf("%w: tool is empty: name the tool the model called", ErrInvalid)
	}
	if err := validProvider(provider); err != nil {
		return CallCheckResult{}, err
	}
	st, err := e.latest(ctx, session, 0)
	if err != nil {
		return CallCheckResult{}, err
	}
	var out CallCheckResult
	err = e.withTurn(ctx, st, func(ot *openTurn, st aggregate.State) error {
		out = callCheck(st, ot, tool, turnProvider(provider, ot))
		if out.Reason == CallUnknown {
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
func callCheck(st aggregate.State, ot *openTurn, name string, row deferral.Provider) CallCheckResult {
	out := CallCheckResult{Session: st.Session, Seq: st.LastSeq, Turn: ot.turn.Number(), Name: name, Provider: row.Name}
	_, disabled := slices.BinarySearch(st.Intent.Disabled, name)
	t, inTurn := ot.turn.Lookup(name)
	if inTurn {
		out.Tool, out.Permission, out.Deferred = &t, t.Permission, t.Deferred
		_, out.Loaded = slices.BinarySearch(st.Loaded, name)
	}
	known := inTurn
	if !known && ot.reg != nil {
		_, known = ot.reg.Tool(name)
	}
	switch {
	case disabled:
		out.Reason = CallDisabled
		out.Note = fmt.Sprintf("tool %q is disabled in this session; do not call it until the user enables it", name)
	case inTurn && !row.Native && out.Deferred && !ot.turn.IsLoaded(name):
		out.Reason = CallNotLoaded
		out.Note = fmt.Sprintf("tool %q is deferred and not loaded in turn %d, so the %s array does not define it; load it with %s first", name, out.Turn, row.Name, resolver.ToolSearch)
	case inTurn:
		out.Reason, out.Callable = CallCallable, true
		out.Note = fmt.Sprintf("tool %q may run in turn %d with permission %q", name, out.Turn, t.Permission)
	case known:
		out.Reason = CallNotInTurn
		out.Note = fmt.Sprintf("tool %q is not among this turn's tools (the session's intent, profile or override leaves it out); do not call it", name)
	default:
		out.Reason = CallUnknown
		out.Note = fmt.Sprintf("no tool %q exists in registry %s; call only the turn's tools", name, ot.turn.RegistryVersion())
	}
	return out
}
