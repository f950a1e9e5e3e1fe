package legacy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/resolver"
)

// Decision kinds, one per kind of intent Plan writes.
const (
	// KindFollow: the session stored no list; it follows its profile
	// (with the web_search overlay when its flag was on).
	KindFollow = "follow"
	// KindOff: the session stored an empty list or false: tools off.
	KindOff = "off"
	// KindOffWebSearch: the stored list is exactly [web_search].
	KindOffWebSearch = "off+web_search"
	// KindEnabled: the stored list is the defaults of that time, with
	// web_search through the overlay when it had it.
	KindEnabled = "enabled"
	// KindPreset: the stored list is a preset of that time.
	KindPreset = "preset"
	// KindDefaultsMinus: the defaults of that time without a few names.
	KindDefaultsMinus = "defaults-minus"
	// KindPresetMinus: a preset of that time without a few names.
	KindPresetMinus = "preset-minus"
	// KindPicked: a short picked list, in the stored order.
	KindPicked = "picked"
	// KindSkip: nothing is written; Note says why.
	KindSkip = "skip"
)

// Options bound what an import may store. The zero value uses the
// aggregate's defaults, which are the engine's unless it was configured
// otherwise.
type Options struct {
	// Limits are the picked and disabled bounds of the engine.
	Limits aggregate.Limits
}

// Decision is the import of one legacy session.
type Decision struct {
	// Session is the session id.
	Session string `json:"session"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Preset is the chosen preset for KindPreset and KindPresetMinus.
	Preset string `json:"preset,omitempty"`
	// Events are the events to append, in order, as Decide returns them.
	Events []events.Payload `json:"-"`
	// Intent is the session's intent after the events.
	Intent intent.Intent `json:"intent"`
	// Stored is the stored list as read (names mapped to true for a dict).
	Stored []string `json:"stored"`
	// Unknown are stored names that the registry does not have or that are
	// not tool names: they cannot be reproduced.
	Unknown []string `json:"unknown,omitempty"`
	// Faithful reports that the intent expands exactly to the stored list
	// (without Unknown) against the lists of the time it was saved.
	Faithful bool `json:"faithful"`
	// Today is the intent's resolution against the live registry.
	Today []string `json:"today"`
	// Gained and Lost compare Today with the stored list: tools added to
	// the defaults or a preset since (the point of storing intent),
	// and stored tools that are gone or unavailable.
	Gained []string `json:"gained,omitempty"`
	Lost   []string `json:"lost,omitempty"`
	// Note says in one sentence why this decision.
	Note string `json:"note"`
}

// Report is the plan of a whole file.
type Report struct {
	// RegistryVersion is the registry the plan was made against.
	RegistryVersion string `json:"registry_version"`
	// Decisions are per session, in file order.
	Decisions []Decision `json:"decisions"`
	// Notes are remarks about the file as a whole.
	Notes []string `json:"notes,omitempty"`
}

// lists are the reference lists of the time a session was saved.
type lists struct {
	defaults []string
	presets  []namedList // sorted by name
}

type namedList struct {
	name  string
	names []string
}

// Plan decides the intent of each session of f against the live registry
// reg:
//
//   - no stored list: nothing to write (the session follows its profile),
//     or WebSearchSet{true} when its web_search flag was on;
//   - true / false: ToolsToggled{true} / ToolsToggled{false} (with
//     WebSearchSet{true} when the flag was on: off for false);
//   - an empty list: ToolsToggled{false}; exactly [web_search]:
//     ToolsToggled{false} and WebSearchSet{true};
//   - equal, as a set, to the defaults of that time (with or without
//     web_search): ToolsToggled{true}, plus WebSearchSet{true} when the
//     list had web_search or the flag was on;
//   - equal to a preset of that time (with or without web_search):
//     PresetChosen, plus the overlay likewise;
//   - otherwise the shortest faithful intent: the defaults or a preset
//     minus a few ToolDisabled names, or a ToolsPicked list of at most the
//     picked bound, whichever stores fewer names (ties: defaults, then
//     presets by name, then picked).
//
// Names the registry lacks are reported and left out; when every stored
// name is unknown, or no intent fits the bounds, the session is skipped
// with the reason. A web_search flag that was on adds web_search to the
// list to reproduce. The "defaults" and "presets" of f (or of a session)
// are the lists of the time; the live registry's available lists stand in
// for the ones not given. Each decision's events are folded through
// aggregate.Decide, so a choice the engine would refuse is not made.
// Plan is deterministic and reads nothing but its arguments.
func Plan(reg *resolver.Registry, f File, opt Options) Report {
	rep := Report{RegistryVersion: reg.Version()}
	lim := opt.Limits
	if lim.MaxPicked <= 0 {
		lim.MaxPicked = aggregate.DefaultMaxPicked
	}
	if lim.MaxDisabled <= 0 {
		lim.MaxDisabled = aggregate.DefaultMaxDisabled
	}
	fileLists := lists{defaults: known(reg, f.Defaults)}
	if f.Defaults == nil {
		fileLists.defaults = reg.DefaultTools()
	}
	for _, name := range reg.PresetNames() {
		list, ok := f.Presets[name]
		if ok {
			list = known(reg, list)
		} else {
			list = available(reg, mustPreset(reg, name))
		}
		fileLists.presets = append(fileLists.presets, namedList{name, list})
	}
	for _, name := range sortedKeys(f.Presets) {
		if _, ok := reg.Preset(name); !ok {
			rep.Notes = append(rep.Notes, fmt.Sprintf("presets.%s: registry %s has no such preset, so no session is imported as it", name, reg.Version()))
		}
	}
	if f.Defaults != nil {
		if unknown := unknownNames(reg, f.Defaults); len(unknown) > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("defaults: %s not in registry %s (removed since); left out of the comparison", strings.Join(unknown, ", "), reg.Version()))
		}
	}
	first := map[string]int{}
	for i, s := range f.Sessions {
		var d Decision
		if j, dup := first[s.Session]; dup {
			d = Decision{Session: s.Session, Kind: KindSkip, Stored: nonNil(s.Tools),
				Note: fmt.Sprintf("session %q appears twice in the file (first at sessions[%d]); keep one", s.Session, j)}
		} else {
			first[s.Session] = i
			l := fileLists
			if s.Defaults != nil {
				l.defaults = known(reg, s.Defaults)
			}
			d = plan(reg, s, l, lim)
		}
		rep.Decisions = append(rep.Decisions, d)
	}
	return rep
}

// candidate is one intent that reproduces a session, before Decide.
type candidate struct {
	kind, preset string
	cmds         []events.Payload
	expand       []string // the intent's expansion against the lists of that time
	cost         int      // names stored
	note         string
}

func plan(reg *resolver.Registry, s Session, l lists, lim aggregate.Limits) Decision {
	d := Decision{Session: s.Session, Stored: nonNil(s.Tools)}
	if err := events.ValidateSessionID(s.Session); err != nil {
		d.Kind, d.Note = KindSkip, fmt.Sprintf("session id %q: %v", clip.String(s.Session, 64), err)
		return d
	}
	_, hasWSTool := reg.Tool(resolver.WebSearch)
	o := overlay(s.WebSearch != nil && *s.WebSearch && hasWSTool)
	if s.Kind == ToolsNone || s.Kind == ToolsBool {
		return finish(reg, d, scalarCandidate(s, o), nil, lim)
	}
	flagOn := bool(o)
	var target []string

	// A stored list (or dict): the names to reproduce.
	stored := s.Tools
	if s.Kind == ToolsDict {
		stored = dictList(s, l.defaults)
		d.Stored = nonNil(stored)
	}
	for _, n := range stored {
		switch {
		case events.ValidateToolName(n) != nil, !has(reg, n):
			if !slices.Contains(d.Unknown, n) {
				d.Unknown = append(d.Unknown, n)
			}
		case !slices.Contains(target, n):
			target = append(target, n)
		}
	}
	note := ""
	if flagOn && !slices.Contains(target, resolver.WebSearch) {
		target = append(target, resolver.WebSearch)
		note = " (web_search added: its flag was on)"
	}
	if len(target) == 0 {
		if len(d.Unknown) > 0 {
			d.Kind, d.Note = KindSkip, fmt.Sprintf("every stored name is unknown to registry %s (%s): nothing to reproduce; check the registry", reg.Version(), strings.Join(d.Unknown, ", "))
			return d
		}
		note := "the session stored an empty list: all off"
		if s.Kind == ToolsDict {
			note = "the session's dict switched off every default tool of its time and added none: all off"
		}
		return finish(reg, d, candidate{kind: KindOff, cmds: []events.Payload{events.ToolsToggled{Enabled: on(false)}},
			note: note}, target, lim)
	}
	if len(target) == 1 && target[0] == resolver.WebSearch {
		return finish(reg, d, candidate{kind: KindOffWebSearch,
			cmds:   []events.Payload{events.ToolsToggled{Enabled: on(false)}, events.WebSearchSet{Enabled: on(true)}},
			expand: []string{resolver.WebSearch},
			note:   "the stored list is exactly [web_search]: tools off with the web_search overlay (see docs/semantics.md#master-switch)" + note}, target, lim)
	}
	// Equal to the defaults, or to a preset, of that time.
	cands := exactCandidates(target, l, o, note)
	if len(cands) == 0 {
		// The shortest faithful intent.
		cands = shortestCandidates(target, l, o, lim, note)
	}
	var refused []string
	for _, c := range cands {
		out := finish(reg, d, c, target, lim)
		if out.Kind != KindSkip {
			return out
		}
		refused = append(refused, out.Note)
	}
	d.Kind = KindSkip
	if len(refused) > 0 {
		d.Note = "no intent the engine accepts reproduces the list: " + strings.Join(refused, "; ")
	} else {
		d.Note = fmt.Sprintf("%d names: more than the picked bound %d, and neither the defaults nor a preset hold them; add a preset to the registry or import with a larger --max-picked", len(target), lim.MaxPicked)
	}
	return d
}

// overlay says whether a migrated session had the web_search flag on
// (with the tool in the registry): its add appends the overlay's command.
type overlay bool

// add appends the web_search overlay to cmds when need or the flag says so.
func (o overlay) add(cmds []events.Payload, need bool) []events.Payload {
	if need || bool(o) {
		return append(cmds, events.WebSearchSet{Enabled: on(true)})
	}
	return cmds
}

// scalarCandidate is the intent of a session that stored no list, or a
// boolean.
func scalarCandidate(s Session, o overlay) candidate {
	flagOn := bool(o)
	switch s.Kind {
	case ToolsNone:
		c := candidate{kind: KindFollow, note: "the session stored no list: it follows its profile"}
		if flagOn {
			c.note += ", with the web_search overlay it had on"
		}
		c.cmds = o.add(nil, false)
		return c
	case ToolsBool:
		if s.Enabled {
			c := candidate{kind: KindEnabled, cmds: o.add([]events.Payload{events.ToolsToggled{Enabled: on(true)}}, false),
				note: "the session stored true: all on, {enabled: true} follows the live defaults"}
			return c
		}
		c := candidate{kind: KindOff, cmds: o.add([]events.Payload{events.ToolsToggled{Enabled: on(false)}}, false),
			note: "the session stored false: all off"}
		if flagOn {
			c.kind, c.note = KindOffWebSearch, "the session stored false with web_search on: exactly [web_search] (see docs/semantics.md#master-switch)"
		}
		return c
	}
	return candidate{}
}

// exactCandidates are the intents whose expansion is the stored list
// itself: the defaults of that time, or one of its presets.
func exactCandidates(target []string, l lists, o overlay, note string) []candidate {
	var cands []candidate
	flagOn := bool(o)
	hasWS := slices.Contains(target, resolver.WebSearch)
	base := without(target, resolver.WebSearch)
	if sameSet(base, l.defaults) {
		cands = append(cands, candidate{kind: KindEnabled,
			cmds:   o.add([]events.Payload{events.ToolsToggled{Enabled: on(true)}}, hasWS),
			expand: withWS(l.defaults, hasWS || flagOn),
			note:   "the stored list is the defaults of that time" + wsText(hasWS) + ": {enabled: true} follows the live defaults" + note})
	}
	for _, p := range l.presets {
		pHasWS := slices.Contains(p.names, resolver.WebSearch)
		if sameSet(target, p.names) || (hasWS && !pHasWS && sameSet(base, p.names)) {
			cands = append(cands, candidate{kind: KindPreset, preset: p.name,
				cmds:   o.add([]events.Payload{events.PresetChosen{Preset: p.name}}, hasWS && !pHasWS),
				expand: withWS(p.names, hasWS || flagOn),
				note:   fmt.Sprintf("the stored list is preset %q", p.name) + wsText(hasWS && !pHasWS) + note})
		}
	}
	return cands
}

// shortestCandidates are the intents that reproduce the stored list with
// exceptions (the defaults or a preset without some names, or a picked
// list), fewest names stored first.
func shortestCandidates(target []string, l lists, o overlay, lim aggregate.Limits, note string) []candidate {
	var cands []candidate
	flagOn := bool(o)
	hasWS := slices.Contains(target, resolver.WebSearch)
	base := without(target, resolver.WebSearch)
	if subset(base, l.defaults) {
		dis := minus(l.defaults, base)
		if len(dis) <= lim.MaxDisabled {
			cmds := []events.Payload{events.ToolsToggled{Enabled: on(true)}}
			for _, n := range dis {
				cmds = append(cmds, events.ToolDisabled{Name: n})
			}
			cands = append(cands, candidate{kind: KindDefaultsMinus, cmds: o.add(cmds, hasWS), cost: len(dis),
				expand: withWS(minus(l.defaults, dis), hasWS || flagOn),
				note:   "the stored list is the defaults of that time without " + strings.Join(dis, ", ") + wsText(hasWS) + note})
		}
	}
	for _, p := range l.presets {
		pHasWS := slices.Contains(p.names, resolver.WebSearch)
		if !subset(base, p.names) {
			continue
		}
		dis := minus(p.names, target)
		if len(dis) == 0 || len(dis) > lim.MaxDisabled {
			continue
		}
		cmds := []events.Payload{events.PresetChosen{Preset: p.name}}
		for _, n := range dis {
			cmds = append(cmds, events.ToolDisabled{Name: n})
		}
		cands = append(cands, candidate{kind: KindPresetMinus, preset: p.name, cmds: o.add(cmds, hasWS && !pHasWS), cost: len(dis),
			expand: withWS(minus(p.names, dis), (hasWS && !pHasWS) || (flagOn && !slices.Contains(dis, resolver.WebSearch))),
			note:   fmt.Sprintf("the stored list is preset %q without %s", p.name, strings.Join(dis, ", ")) + wsText(hasWS && !pHasWS) + note})
	}
	if len(target) <= lim.MaxPicked {
		cands = append(cands, candidate{kind: KindPicked, cmds: o.add([]events.Payload{events.ToolsPicked{Names: slices.Clone(target)}}, false),
			cost: len(target), expand: withWS(target, flagOn),
			note: fmt.Sprintf("no preset or the defaults hold the list with fewer exceptions: a picked list of %d names, in the stored order", len(target)) + note})
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return a.cost - b.cost })
	return cands
}

// finish folds c's commands through Decide, resolves the intent with the
// live registry and fills the report.
func finish(reg *resolver.Registry, d Decision, c candidate, target []string, lim aggregate.Limits) Decision {
	st := aggregate.State{Session: d.Session}
	var seq uint64
	for _, cmd := range c.cmds {
		out, err := aggregate.Decide(st, reg, cmd, lim)
		if err != nil {
			d.Kind, d.Note = KindSkip, fmt.Sprintf("%s refused by the engine's rules: %v", c.kind, err)
			return d
		}
		for _, p := range out {
			seq++
			st.Apply(seq, events.Envelope{Session: d.Session, Type: p.EventType(), Payload: p})
			d.Events = append(d.Events, p)
		}
	}
	d.Kind, d.Preset, d.Intent, d.Note = c.kind, c.preset, st.Intent, c.note
	res, err := reg.Resolve(resolver.Request{Session: st.Intent})
	if err != nil {
		d.Kind, d.Note = KindSkip, fmt.Sprintf("%s does not resolve: %v", c.kind, err)
		return d
	}
	d.Today = res.Names()
	if target != nil {
		d.Faithful = sameSet(c.expand, target)
		d.Gained, d.Lost = minus(d.Today, target), minus(target, d.Today)
		// The tools array is the prompt-cache prefix: the same names in
		// another order is another request, so it does not reproduce
		// the list (a reversed preset imports as the preset, in the
		// engine's order, and says so).
		if got, want := common(d.Today, target), common(target, d.Today); d.Faithful && !slices.Equal(got, want) {
			d.Faithful = false
			d.Note += fmt.Sprintf("; the stored order differs: the engine serves %s, the session stored %s", strings.Join(got, ", "), strings.Join(want, ", "))
		}
	} else {
		d.Faithful = true // a stored bool or nothing: the intent is the same value
	}
	return d
}

func on(b bool) *bool { return &b }

func has(reg *resolver.Registry, name string) bool {
	_, ok := reg.Tool(name)
	return ok
}

func mustPreset(reg *resolver.Registry, name string) []string {
	list, _ := reg.Preset(name)
	return list
}

// known keeps the names the registry has, in order.
func known(reg *resolver.Registry, names []string) []string {
	out := []string{}
	for _, n := range names {
		if has(reg, n) {
			out = append(out, n)
		}
	}
	return out
}

func unknownNames(reg *resolver.Registry, names []string) []string {
	var out []string
	for _, n := range names {
		if !has(reg, n) {
			out = append(out, strconv.Quote(n))
		}
	}
	return out
}

// available keeps the names of available tools, in order.
func available(reg *resolver.Registry, names []string) []string {
	out := []string{}
	for _, n := range names {
		if t, ok := reg.Tool(n); ok && t.Available {
			out = append(out, n)
		}
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func without(xs []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(xs), func(n string) bool { return n == drop })
}

func withWS(xs []string, ws bool) []string {
	if ws && !slices.Contains(xs, resolver.WebSearch) {
		return append(slices.Clone(xs), resolver.WebSearch)
	}
	return xs
}

func wsText(overlay bool) string {
	if overlay {
		return ", with web_search through the overlay"
	}
	return ""
}

// minus returns the names of a not in b, in a's order.
func minus(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

func subset(a, b []string) bool { return len(minus(a, b)) == 0 }

func sameSet(a, b []string) bool { return subset(a, b) && subset(b, a) }

// common returns the names of a that b has, in a's order.
func common(a, b []string) []string {
	var out []string
	for _, n := range a {
		if slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// dictList is the list an opencode-style dict means: the defaults of its
// time without the names mapped to false, then the names mapped to true
// that the defaults lack, in the order written.
func dictList(s Session, defaults []string) []string {
	out := []string{}
	for _, n := range defaults {
		if !slices.Contains(s.Off, n) {
			out = append(out, n)
		}
	}
	for _, n := range s.Tools {
		if !slices.Contains(out, n) && !slices.Contains(s.Off, n) {
			out = append(out, n)
		}
	}
	return out
}
