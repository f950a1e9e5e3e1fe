package resolver

import (
	"fmt"
	"slices"
)

// Explain says why tool is or is not in Resolve(req).Tools: the rule
// of the expansion that decided, and a one-sentence Detail. Rules:
//
//	unknown-tool            the registry has no such tool
//	error                   the request does not resolve (Detail is the error)
//	override-empty          the per-turn override is an empty list
//	override-names          named by a per-turn override list (included)
//	not-in-override-names   a per-turn override list that does not name it
//	enabled=false           the intent switches tools off
//	web_search-overlay      added by web_search=true; the overlay never removes
//	web_search=false        web_search is out and the overlay is false, which adds
//	                        nothing; the Detail gives the expansion's own reason
//	picked / not-picked     the intent's picked list does / does not name it
//	preset:P / not-in-preset:P
//	profile:P / not-in-profile:P
//	default-tools / not-in-defaults
//	not-allowed             filtered out of the defaults by the override's allowed list
//	not-allowed-by-profile:P  filtered out of the defaults by the profile's allowed list
//	disabled-by-session / disabled-by-override
//	unavailable             selected, but not available in this deployment
//	tool_search-guard       tool_search added because deferred tools are in the set
//	deferred-without-tool_search  a deferred tool left out because tool_search is disabled
//	channel-deny:C:P@V / channel-max-permission:C:M@V / decision[i]:deny:...@V
//	                        selected, but withheld by channel policy V for the request's channel
//
// Included always agrees with Resolve. The output is deterministic.
func (r *Registry) Explain(req Request, tool string) Explanation {
	ex := Explanation{Tool: tool}
	i, known := r.index[tool]
	if !known {
		ex.Rule = "unknown-tool"
		ex.Detail = fmt.Sprintf("%q is not a tool of registry %s", tool, r.version)
		return ex
	}
	if _, err := r.Resolve(req); err != nil {
		ex.Rule = "error"
		ex.Detail = err.Error()
		return ex
	}
	available := r.tools[i].Available
	switch req.Override.Kind {
	case OverrideEmpty:
		ex.Rule, ex.Detail = "override-empty", "the per-turn override is an empty list: no tools this turn (see docs/semantics.md#overrides)"
	case OverrideNames:
		names := req.Override.Names
		switch {
		case len(names) == 0:
			ex.Rule, ex.Detail = "override-empty", "the per-turn override is an empty list: no tools this turn (see docs/semantics.md#overrides)"
		case !containsMatch(names, tool):
			ex.Rule = "not-in-override-names"
			ex.Detail = fmt.Sprintf("the per-turn override lists exactly the turn's tools (%d names) and %q is not one of them (see docs/semantics.md#overrides)", len(names), tool)
		case !available:
			ex.Rule = "unavailable"
			ex.Detail = fmt.Sprintf("%q is named by the per-turn override but is not available in registry %s; it is reported as unknown", tool, r.version)
		default:
			ex.Included, ex.Rule = true, "override-names"
			ex.Detail = fmt.Sprintf("%q is named by the per-turn override list, which sets exactly the turn's tools (see docs/semantics.md#overrides)", tool)
		}
	case OverrideIntent:
		r.explainIntent(&ex, &req.Override.Intent, req.Override.Allowed, req.Profile, available, "per-turn override intent", "disabled-by-override")
	default:
		r.explainIntent(&ex, &req.Session, nil, req.Profile, available, "session intent", "disabled-by-session")
	}
	r.explainPolicy(&ex, &req)
	r.explainReach(&ex, req)
	return ex
}

func (r *Registry) explainIntent(ex *Explanation, in *Intent, allowed []string, profile string, available bool, who, disabledRule string) {
	tool := ex.Tool
	isWS := tool == WebSearch
	wsOn := in.WebSearch != nil && *in.WebSearch
	// exclude sets the rule that keeps the tool out. For web_search the
	// overlay is part of the reason (it would add it back): with
	// web_search=false the rule names the overlay, the Detail gives the
	// expansion's own reason; unset only adds a note.
	exclude := func(rule, detail string) {
		switch {
		case isWS && in.WebSearch != nil && !wsOn && available:
			ex.Rule = "web_search=false"
			ex.Detail = "the " + who + " has web_search=false, which adds nothing (see docs/semantics.md#overlay), and " + detail
		case isWS && !wsOn:
			ex.Rule, ex.Detail = rule, detail+"; the web_search overlay is unset, which adds nothing (see docs/semantics.md#overlay)"
		default:
			ex.Rule, ex.Detail = rule, detail
		}
	}
	unavailable := func(why string) {
		ex.Rule = "unavailable"
		ex.Detail = fmt.Sprintf("%s, but %q is not available in registry %s", why, tool, r.version)
	}
	// overlay includes the tool by the web_search overlay, or says it is
	// unavailable: why is the rule's reason, detail the inclusion's.
	overlay := func(why, detail string) {
		if !available {
			unavailable(why)
			return
		}
		ex.Included, ex.Rule, ex.Detail = true, "web_search-overlay", detail
	}

	if in.Enabled != nil && !*in.Enabled {
		if isWS && wsOn {
			why := "the " + who + " has enabled=false with web_search=true, which yields exactly [web_search] (see docs/semantics.md#master-switch)"
			overlay(why, why)
			return
		}
		if wsOn {
			exclude("enabled=false", "the "+who+" switches tools off (enabled=false); web_search=true keeps only web_search (see docs/semantics.md#master-switch)")
		} else {
			exclude("enabled=false", "the "+who+" switches tools off (enabled=false), which yields no tools (see docs/semantics.md#master-switch)")
		}
		return
	}

	base := r.explainBase(in, allowed, profile, who, tool)

	if base.in && containsMatch(in.Disabled, tool) && !(isWS && wsOn) {
		exclude(disabledRule, fmt.Sprintf("%q was switched off by hand in the %s (disabled)", tool, who))
		return
	}
	if isWS {
		if wsOn && (!base.in || containsMatch(in.Disabled, tool)) {
			overlay("the "+who+" has web_search=true, which adds web_search (see docs/semantics.md#overlay)",
				"the "+who+" has web_search=true, which adds web_search when the expansion lacks it (see docs/semantics.md#overlay)")
			return
		}
	}
	if !base.in {
		exclude(base.missRule, base.missDetail)
		return
	}
	if !available {
		unavailable(base.hitDetail)
		return
	}
	ex.Included, ex.Rule, ex.Detail = true, base.hitRule, base.hitDetail
}

// baseVerdict is whether a tool is in an intent's expansion before the
// disabled names and the web_search overlay, with the rule and detail that
// explain it either way.
type baseVerdict struct {
	in                                       bool
	hitRule, hitDetail, missRule, missDetail string
}

// explainBase explains tool against the expansion in selects (picked,
// preset, profile or the defaults, filtered by allowed lists), as who.
func (r *Registry) explainBase(in *Intent, allowed []string, profile, who, tool string) (b baseVerdict) {
	inDefaults := func() bool {
		for _, i := range r.defaults {
			if r.tools[i].Name == tool {
				return true
			}
		}
		return false
	}
	defaultsCase := func(profileAllowed []string, label, labelDetail string) {
		switch {
		case !inDefaults():
			b.missRule = "not-in-defaults"
			b.missDetail = fmt.Sprintf("the %s falls back to DEFAULT_TOOLS of registry %s, which do not include %q", who, r.version, tool)
		case len(profileAllowed) > 0 && !containsMatch(profileAllowed, tool):
			b.missRule = "not-allowed-by-profile:" + profile
			b.missDetail = fmt.Sprintf("%q is in DEFAULT_TOOLS but not in the allowed list of profile %q, which filters the defaults (see docs/semantics.md#defaults-and-allowed)", tool, profile)
		case len(allowed) > 0 && !containsMatch(allowed, tool):
			b.missRule = "not-allowed"
			b.missDetail = fmt.Sprintf("%q is in DEFAULT_TOOLS but not in the per-turn override's allowed list, which filters the defaults (see docs/semantics.md#defaults-and-allowed)", tool)
		default:
			b.in = true
			b.hitRule, b.hitDetail = label, labelDetail
		}
	}
	switch {
	case len(in.Picked) > 0:
		b.in = containsMatch(in.Picked, tool)
		b.hitRule = "picked"
		b.hitDetail = fmt.Sprintf("the %s picks %q explicitly, in the user's order", who, tool)
		b.missRule = "not-picked"
		b.missDetail = fmt.Sprintf("the %s has an explicit picked list (%d names) that does not name %q", who, len(in.Picked), tool)
	case in.Preset != "":
		b.in = slices.Contains(r.names(r.presets[in.Preset]), tool)
		b.hitRule = "preset:" + in.Preset
		b.hitDetail = fmt.Sprintf("the %s chose preset %q, which includes %q in registry %s", who, in.Preset, tool, r.version)
		b.missRule = "not-in-preset:" + in.Preset
		b.missDetail = fmt.Sprintf("the %s chose preset %q, which does not include %q in registry %s", who, in.Preset, tool, r.version)
	case in.Enabled == nil && profile != "":
		e := r.profiles[profile]
		b.hitRule, b.missRule = "profile:"+profile, "not-in-profile:"+profile
		switch {
		case e.tools != nil:
			b.in = slices.Contains(e.p.Tools, tool)
			b.hitDetail = fmt.Sprintf("the %s follows profile %q, whose tools include %q", who, profile, tool)
			b.missDetail = fmt.Sprintf("the %s follows profile %q, whose tools do not include %q", who, profile, tool)
		case e.p.Preset != "":
			b.in = slices.Contains(r.names(r.presets[e.p.Preset]), tool)
			b.hitDetail = fmt.Sprintf("the %s follows profile %q, whose preset %q includes %q", who, profile, e.p.Preset, tool)
			b.missDetail = fmt.Sprintf("the %s follows profile %q, whose preset %q does not include %q", who, profile, e.p.Preset, tool)
		default:
			defaultsCase(e.p.Allowed, "profile:"+profile,
				fmt.Sprintf("the %s follows profile %q, which uses DEFAULT_TOOLS of registry %s; they include %q", who, profile, r.version, tool))
		}
	default:
		what := "the " + who + " is {enabled: true}, which expands DEFAULT_TOOLS"
		if in.Enabled == nil {
			what = "the " + who + " follows the defaults (no preset, picked list or profile), which expands DEFAULT_TOOLS"
		}
		defaultsCase(nil, "default-tools", fmt.Sprintf("%s of registry %s; they include %q (see docs/semantics.md#defaults-and-allowed)", what, r.version, tool))
	}
	return b
}
