package service

// CallCheck: whether a tool call the model made may execute now (#26
// item 3). A native rendering keeps defining tools the history references
// after the user disabled them, so "defined" never means "allowed": the
// backend asks before it executes.

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolintent/engine/aggregate"
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
	// CallAsk or CallDenied (#31).
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
	// the engine's tool_search in the session. A deferred tool the engine
	// has not loaded stays callable: a provider's own search (such as
	// anthropic-native-server) loads tools the engine does not see.
	Deferred bool `json:"deferred"`
	Loaded   bool `json:"loaded"`
	// Channel is the channel whose policy decided: the open turn's (#31).
	Channel string `json:"channel,omitempty"`
	// Decision is the permission decision for a known tool: "allow",
	// "ask" or "deny" (#31), "" for an unknown tool; an ask the user
	// allowed reads "allow" with Grant set.
	Decision string `json:"decision,omitempty"`
	// Rule names what decided (resolver.Decision.Rule, or
	// "granted:SCOPE:BY@SEQ" for an answered ask).
	Rule string `json:"rule,omitempty"`
	// Grant is the user's answer that allowed an ask, nil otherwise.
	Grant *aggregate.Grant `json:"grant,omitempty"`
}

// CallCheck reports whether a call of tool may execute now in the
// session's open turn (#26 item 3): callable when the turn froze the tool
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
// denies or asks (#31). An empty caller is the turn's channel.
func (e *Engine) CallCheckAs(ctx context.Context, session, tool, caller string) (CallCheckResult, error) {
	if tool == "" {
		return CallCheckResult{}, fmt.Errorf("%w: tool is empty: name the tool the model called", ErrInvalid)
	}
	st, err := e.latest(ctx, session, 0)
	if err != nil {
		return CallCheckResult{}, err
	}
	var out CallCheckResult
	err = e.withTurn(ctx, st, func(ot *openTurn, st aggregate.State) error {
		out = callCheck(st, ot, tool)
		if out.Reason == CallUnknown {
			return nil
		}
		return e.decideCall(ctx, &out, ot, caller) // #31
	})
	return out, err
}

// callCheck decides CallCheck against the open turn ot of st.
func callCheck(st aggregate.State, ot *openTurn, name string) CallCheckResult {
	out := CallCheckResult{Session: st.Session, Seq: st.LastSeq, Turn: ot.turn.Number(), Name: name}
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
