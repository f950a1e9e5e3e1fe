package deferral

import (
	"slices"

	"github.com/toolintent/engine/resolver"
)

// UnavailableNote starts the description of a tool that a native
// rendering keeps defined only because the session's history references
// it (#26 item 3): the model is told not to call it, and the backend's
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

// WithReferenced returns tools followed by the tools named in referenced
// that tools lacks, in the order given, each Unavailable, found by lookup
// (a name lookup does not find is left out). A native rendering of the
// result never drops a tool the history references (#26 item 3): a
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
			extra = append(extra, Unavailable(t))
		}
	}
	if len(extra) == 0 {
		return tools
	}
	return append(slices.Clip(tools), extra...)
}
