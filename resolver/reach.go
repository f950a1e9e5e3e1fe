package resolver

import (
	"fmt"
)

// Rules of Explain for the reachability guard.
const (
	// RuleToolSearchGuard: tool_search is in the set only because deferred
	// tools are, and it is their only way in.
	RuleToolSearchGuard = "tool_search-guard"
	// RuleDeferredWithoutSearch: a deferred tool is out because the intent
	// disabled tool_search, which alone could load it.
	RuleDeferredWithoutSearch = "deferred-without-tool_search"
)

// effectiveIntent is the intent a request expands, or nil when it expands
// none (an override list).
func effectiveIntent(req *Request) *Intent {
	switch req.Override.Kind {
	case OverrideNone:
		return &req.Session
	case OverrideIntent:
		return &req.Override.Intent
	}
	return nil
}

// searchDisabled reports whether the intent switched tool_search off by
// hand (a disabled entry naming or matching it).
func searchDisabled(in *Intent) bool {
	if in == nil {
		return false
	}
	for _, d := range in.Disabled {
		if matchName(d, ToolSearch) {
			return true
		}
	}
	return false
}

// reach makes an expansion reachable: no tool may be deferred
// without tool_search to load it. When out holds a deferred tool and not
// tool_search, tool_search is appended, whatever the intent, preset,
// picked list, profile or override chose; only when the intent disabled
// tool_search itself are the deferred tools dropped instead. deferred
// reports the deferral of out[k] (the registry mark, or a budget
// decision). It returns the new list and which rule acted ("" none).
func (r *Registry) reach(out []int32, deferred func(k int) bool, in *Intent) ([]int32, string) {
	ts := r.toolSearch - 1
	if ts < 0 {
		return out, "" // a zero Registry: nothing is deferred either
	}
	anyDeferred := false
	for k, i := range out {
		if i == ts {
			return out, ""
		}
		if deferred(k) {
			anyDeferred = true
		}
	}
	if !anyDeferred {
		return out, ""
	}
	if searchDisabled(in) {
		kept := make([]int32, 0, len(out))
		for k, i := range out {
			if !deferred(k) {
				kept = append(kept, i)
			}
		}
		return kept, RuleDeferredWithoutSearch
	}
	return append(out, ts), RuleToolSearchGuard
}

// explainReach corrects an explanation for the reachability guard, so that
// Included agrees with Resolve: tool_search added by the guard, or a
// deferred tool left out because tool_search is disabled.
func (r *Registry) explainReach(ex *Explanation, req Request) {
	res, err := r.Resolve(req)
	if err != nil {
		return
	}
	in := false
	deferredInSet := 0
	for i := range res.Tools {
		if res.Tools[i].Name == ex.Tool {
			in = true
		}
		if res.Tools[i].Deferred {
			deferredInSet++
		}
	}
	switch {
	case in && !ex.Included && ex.Tool == ToolSearch:
		ex.Detail = fmt.Sprintf("%s was not chosen (%s: %s), but %d deferred tools are in the set and %s is the only way to load them, so it is added (see docs/semantics.md#deferral)",
			ToolSearch, ex.Rule, ex.Detail, deferredInSet, ToolSearch)
		ex.Included, ex.Rule = true, RuleToolSearchGuard
	case !in && ex.Included:
		who := "session intent"
		if req.Override.Kind == OverrideIntent {
			who = "per-turn override intent"
		}
		ex.Included, ex.Rule = false, RuleDeferredWithoutSearch
		ex.Detail = fmt.Sprintf("%q is deferred and the %s disabled %s, the only tool that could load it, so it is left out rather than listed unreachable (see docs/semantics.md#deferral)", ex.Tool, who, ToolSearch)
	}
}
