package deferral

import (
	"encoding/json"
	"slices"

	"github.com/toolintent/engine/resolver"
)

// UnavailableNote starts the description of a tool that a native
// rendering keeps defined only because the session's history references
// it: the model is told not to call it, and the backend's
// call check refuses a call anyway.
const UnavailableNote = "Not callable in this session (disabled, or no longer permitted); do not call it. "

// Unavailable returns t as a native rendering keeps it when the turn's
// resolution lacks it but the session's history references it: deferred
// (so it costs no context until a tool_reference names it) and with
// UnavailableNote before its description.
func Unavailable(t resolver.Tool) resolver.Tool {
	t.Deferred = true
	t.Description = UnavailableNote + t.Description
	return t
}

// WithheldNote is the whole description of a tool a native rendering
// keeps defined only because the session's history references it while
// the channel policy withholds it from the requesting channel: the
// name stays (the provider refuses a history naming a tool the list
// lacks), its description and schema do not.
const WithheldNote = "Not callable on this channel (withheld by the channel policy); do not call it."

// Withheld returns the stub a native rendering keeps for name when the
// channel policy withholds it: deferred, WithheldNote as description, an
// empty object schema, no provider-native form.
func Withheld(name string) resolver.Tool {
	return resolver.Tool{Name: name, Description: WithheldNote, Parameters: json.RawMessage(`{"type":"object"}`), Available: true, Deferred: true}
}

// WithholdLookup wraps lookup so that a name in withheld (a resolution's
// Withheld) is found as its Withheld stub, never as its definition.
func WithholdLookup(withheld []string, lookup func(string) (resolver.Tool, bool)) func(string) (resolver.Tool, bool) {
	if len(withheld) == 0 {
		return lookup
	}
	return func(name string) (resolver.Tool, bool) {
		if slices.Contains(withheld, name) {
			return Withheld(name), true
		}
		return lookup(name)
	}
}

// WithReferenced returns tools followed by the tools named in referenced
// that tools lacks, in the order given, each Unavailable, found by lookup
// (a name lookup does not find is left out). A native rendering of the
// result never drops a tool the history references: a
// provider refuses a history whose tool_reference names a tool missing
// from the tools list. tools itself is returned when nothing is added.
func WithReferenced(tools []resolver.Tool, referenced []string, lookup func(string) (resolver.Tool, bool)) []resolver.Tool {
	var extra []resolver.Tool
	for _, n := range referenced {
		if slices.ContainsFunc(tools, func(t resolver.Tool) bool { return t.Name == n }) ||
			slices.ContainsFunc(extra, func(t resolver.Tool) bool { return t.Name == n }) {
			continue
		}
		if t, ok := lookup(n); ok {
			if t.Description != WithheldNote {
				t = Unavailable(t)
			}
			extra = append(extra, t)
		}
	}
	if len(extra) == 0 {
		return tools
	}
	return append(slices.Clip(tools), extra...)
}
