package resolver

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolintent/engine/internal/toolname"
)

const namePatternText = toolname.Pattern

var topLevelKeys = []string{"version", "tools", "namespaces", "default_tools", "resident_tools", "deferred_default_tools", "presets", "profiles", "auto_defer", "catalog_max_tokens", "channel_policy"}
var toolKeys = []string{"name", "description", "parameters", "available", "permission", "native", "defer", "embedding"}
var nativeKeys = []string{"anthropic", "openai"}
var profileKeys = []string{"tools", "preset", "allowed"}

// loader accumulates every problem of a registry file.
type loader struct {
	problems []error
	firstAt  map[string]int // tool name -> position in the file's tools array
	sorted   []int32        // tool indices by name, for pattern expansion
	embFirst string         // the first tool with an embedding, whose dimension every other must have
	embDim   int            // that embedding's dimension; 0 before the first
}

func (l *loader) addf(format string, args ...any) {
	l.problems = append(l.problems, fmt.Errorf("%w: "+format, append([]any{ErrInvalidRegistry}, args...)...))
}

func (l *loader) unknownKeys(path string, n *jnode, known []string) {
	for _, k := range n.keys {
		if !slices.Contains(known, k) {
			l.addf("%s: unknown key %q; use one of %s, or fix its spelling", path, k, strings.Join(known, ", "))
		}
	}
}

func (l *loader) str(path string, n *jnode) (string, bool) {
	if n.kind != jString {
		l.addf("%s: is %s; want a string", path, n.kind)
		return "", false
	}
	return n.s, true
}

// strList reads an array of strings; null reads as an absent list.
func (l *loader) strList(path string, n *jnode) ([]string, bool) {
	if n.kind == jNull {
		return nil, true
	}
	if n.kind != jArray {
		l.addf("%s: is %s; want an array of tool names", path, n.kind)
		return nil, false
	}
	out := make([]string, 0, len(n.elems))
	ok := true
	for i, e := range n.elems {
		if e.kind != jString {
			l.addf("%s[%d]: is %s; want a tool name string", path, i, e.kind)
			ok = false
			continue
		}
		out = append(out, e.s)
	}
	return out, ok
}

// refs resolves a list of tool names to indices, reporting unknown names
// and duplicates.
func (l *loader) refs(path string, names []string, index map[string]int32) []int32 {
	out := make([]int32, 0, len(names))
	first := make(map[string]int, len(names))
	for i, name := range names {
		if j, dup := first[name]; dup {
			l.addf("%s[%d]: %q repeats %s[%d]; list each tool once", path, i, name, path, j)
			continue
		}
		first[name] = i
		idx, ok := index[name]
		if !ok {
			l.addf("%s[%d]: unknown tool %q; add it to tools or remove it from the list", path, i, name)
			continue
		}
		out = append(out, idx)
	}
	return out
}

// expand replaces each name pattern of a registry list (mcp__github__*) by
// the tools it matches, in registry order, leaving out names the list
// already holds; within is non-nil for lists that may only name those
// tools (allowed filters the defaults). A pattern that matches nothing is
// a problem: a typo must not silently select nothing.
func (l *loader) expand(r *Registry, path string, list []string, within []string) []string {
	hasPattern := false
	for _, s := range list {
		if IsPattern(s) {
			hasPattern = true
			break
		}
	}
	if !hasPattern {
		return list
	}
	out := make([]string, 0, len(list))
	have := make(map[string]bool, len(list)) // names listed plainly or already added
	for _, s := range list {
		if !IsPattern(s) {
			have[s] = true
		}
	}
	var inside map[string]bool
	if within != nil {
		inside = make(map[string]bool, len(within))
		for _, s := range within {
			inside[s] = true
		}
	}
	for i, s := range list {
		if !IsPattern(s) {
			out = append(out, s)
			continue
		}
		if !toolname.ValidPattern(s) {
			l.addf("%s[%d]: %q is not %s", path, i, s, toolname.PatternRule)
			continue
		}
		matched := false
		for _, j := range l.candidates(r, s) {
			name := r.tools[j].Name
			if !matchName(s, name) || inside != nil && !inside[name] {
				continue
			}
			matched = true
			if !have[name] {
				have[name] = true
				out = append(out, name)
			}
		}
		if !matched {
			l.addf("%s[%d]: pattern %q matches no tool; fix it or remove it", path, i, s)
		}
	}
	return out
}

// candidates returns, in registry order, the indices of the tools whose
// names start with the literal prefix of pattern (the part before its
// first wildcard): a binary search in the names sorted once per load, so
// that expanding many mcp__<server>__* patterns stays near linear.
func (l *loader) candidates(r *Registry, pattern string) []int32 {
	if len(l.sorted) != len(r.tools) {
		l.sorted = make([]int32, len(r.tools))
		for i := range l.sorted {
			l.sorted[i] = int32(i)
		}
		slices.SortFunc(l.sorted, func(a, b int32) int { return strings.Compare(r.tools[a].Name, r.tools[b].Name) })
	}
	prefix := pattern
	if i := strings.IndexAny(pattern, "*?"); i >= 0 {
		prefix = pattern[:i]
	}
	lo, _ := slices.BinarySearchFunc(l.sorted, prefix, func(i int32, p string) int { return strings.Compare(r.tools[i].Name, p) })
	hi := lo
	for hi < len(l.sorted) && strings.HasPrefix(r.tools[l.sorted[hi]].Name, prefix) {
		hi++
	}
	out := slices.Clone(l.sorted[lo:hi])
	slices.Sort(out)
	return out
}

// setOf returns the set of names.
func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func sortedKeys(n *jnode) []int {
	order := make([]int, len(n.keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(n.keys[a], n.keys[b]) })
	return order
}

func build(data []byte) (*Registry, error) {
	root, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRegistry, err)
	}
	if root.kind != jObject {
		return nil, fmt.Errorf("%w: the document is %s; want an object with keys %s", ErrInvalidRegistry, root.kind, strings.Join(topLevelKeys, ", "))
	}
	l := &loader{firstAt: map[string]int{}}
	l.unknownKeys("registry", root, topLevelKeys)
	r := &Registry{index: map[string]int32{}}

	l.version(r, root)
	l.tools(r, root)
	defaultNames := l.defaultTools(r, root)
	l.deferredDefaults(r, root, defaultNames)
	explicitResident := l.residentTools(r, root, defaultNames)
	l.presets(r, root)
	l.profiles(r, root, defaultNames)
	l.policy(r, root.get("channel_policy")) // After profiles, which decisions may name

	if len(l.problems) > 0 {
		return nil, errors.Join(l.problems...)
	}
	r.finish(explicitResident, l.embDim)
	return r, nil
}

// version reads the registry's version.
func (l *loader) version(r *Registry, root *jnode) {
	if n := root.get("version"); n == nil {
		l.addf(`version: missing; set a version such as "builtin-2026.12.1" (it is part of every contract hash)`)
	} else if v, ok := l.str("version", n); ok {
		if !validVersion(v) {
			l.addf("version %q: want 1 to 128 characters of A-Z a-z 0-9 . _ : + -; rename it", v)
		} else {
			r.version = v
		}
	}
}

// tools reads the tool list, then the namespaces and the automatic
// deferral that refer to it.
func (l *loader) tools(r *Registry, root *jnode) {
	toolsNode := root.get("tools")
	switch {
	case toolsNode == nil:
		l.addf(`tools: missing; list the tools, at least {"name":"tool_search",...}`)
	case toolsNode.kind != jArray:
		l.addf("tools: is %s; want an array of tool objects", toolsNode.kind)
	default:
		for i, tn := range toolsNode.elems {
			l.tool(r, i, tn)
		}
	}
	if idx, ok := r.index[ToolSearch]; !ok {
		l.addf("tools: no tool named %q; add it, it loads deferred tools and is always resident (see docs/semantics.md#deferral)", ToolSearch)
	} else if !r.tools[idx].Available {
		l.addf("tools: %q has available=false; make it available, without it deferred tools are unreachable (see docs/semantics.md#deferral)", ToolSearch)
	}
	if idx, ok := r.index[WebSearch]; ok {
		r.webSearch = idx + 1
	}
	if idx, ok := r.index[ToolSearch]; ok {
		r.toolSearch = idx + 1
	}
	l.namespaces(r, root.get("namespaces"))
	l.autoDeferConfig(r, root)
}

// defaultTools reads default_tools and returns their names, expanded.
func (l *loader) defaultTools(r *Registry, root *jnode) []string {
	var defaultNames []string
	if n := root.get("default_tools"); n == nil {
		l.addf("default_tools: missing; list DEFAULT_TOOLS in order, including %q", ToolSearch)
	} else if list, ok := l.strList("default_tools", n); ok {
		list = l.expand(r, "default_tools", list, nil)
		defaultNames = list
		r.defaults = l.refs("default_tools", list, r.index)
		if !slices.Contains(list, ToolSearch) {
			l.addf("default_tools: %q is missing; add it, the defaults must be able to load deferred tools", ToolSearch)
		}
		if slices.Contains(list, WebSearch) {
			l.addf("default_tools: contains %q; remove it, the web_search overlay adds it on request (see docs/semantics.md#overlay)", WebSearch)
		}
	}
	return defaultNames
}

// deferredDefaults reads deferred_default_tools, which must be defaults.
func (l *loader) deferredDefaults(r *Registry, root *jnode, defaultNames []string) {
	if n := root.get("deferred_default_tools"); n != nil {
		if list, ok := l.strList("deferred_default_tools", n); ok {
			list = l.expand(r, "deferred_default_tools", list, nil)
			l.refs("deferred_default_tools", list, r.index)
			isDefault := setOf(defaultNames)
			for i, name := range list {
				if name == ToolSearch {
					l.addf("deferred_default_tools[%d]: %q can never be deferred (see docs/semantics.md#deferral); remove it", i, name)
				} else if defaultNames != nil && !isDefault[name] {
					l.addf("deferred_default_tools[%d]: %q is not in default_tools; deferred defaults stay in the defaults (see docs/semantics.md#deferral), add it there or remove it here", i, name)
				}
			}
			r.deferredDefaults = list
		}
	}
	if r.deferredDefaults == nil {
		r.deferredDefaults = []string{}
	}
}

// residentTools reads resident_tools, or derives them from the defaults
// that are not deferred; it reports whether the list was explicit.
func (l *loader) residentTools(r *Registry, root *jnode, defaultNames []string) bool {
	explicitResident := false
	if n := root.get("resident_tools"); n != nil && n.kind != jNull {
		explicitResident = true
		if list, ok := l.strList("resident_tools", n); ok {
			list = l.expand(r, "resident_tools", list, nil)
			l.refs("resident_tools", list, r.index)
			isDeferred := setOf(r.deferredDefaults)
			for i, name := range list {
				if isDeferred[name] {
					l.addf("resident_tools[%d]: %q is also in deferred_default_tools; remove it from one of the two lists", i, name)
				}
			}
			r.residentList = list
		}
	} else {
		r.residentList = []string{}
		isDeferred, listed := setOf(r.deferredDefaults), map[string]bool{}
		for _, name := range defaultNames {
			if !isDeferred[name] && !listed[name] {
				listed[name] = true
				r.residentList = append(r.residentList, name)
			}
		}
		if !slices.Contains(r.residentList, ToolSearch) {
			r.residentList = append(r.residentList, ToolSearch)
		}
	}
	return explicitResident
}

// presets reads the named tool lists.
func (l *loader) presets(r *Registry, root *jnode) {
	r.presets = map[string][]int32{}
	r.presetNames = []string{}
	l.entries(root, "presets", "an object of preset name to tool list", func(name string, v *jnode) {
		path := "presets." + name
		if !validName(name) {
			l.addf("presets: name %q must match %s; rename it", name, namePatternText)
			return
		}
		list, ok := l.strList(path, v)
		if !ok {
			return
		}
		if list != nil {
			list = l.expand(r, path, list, nil)
		}
		if list == nil {
			l.addf("%s: is null; want an array of tool names ([] for none)", path)
			return
		}
		r.presets[name] = l.refs(path, list, r.index)
		r.presetNames = append(r.presetNames, name)
	})
}

// profiles reads the profiles, whose tools may name the defaults.
func (l *loader) profiles(r *Registry, root *jnode, defaultNames []string) {
	r.profiles = map[string]*profileEntry{}
	r.profileNames = []string{}
	l.entries(root, "profiles", "an object of profile name to profile", func(name string, v *jnode) {
		l.profile(r, name, v, defaultNames)
	})
}

// entries calls fn for each entry of root's object field key, in key
// order. An absent or null field has none; a field that is not an object
// is reported, want saying what it should be.
func (l *loader) entries(root *jnode, key, want string, fn func(name string, v *jnode)) {
	n := root.get(key)
	if n == nil || n.kind == jNull {
		return
	}
	if n.kind != jObject {
		l.addf("%s: is %s; want %s", key, n.kind, want)
		return
	}
	for _, k := range sortedKeys(n) {
		fn(n.keys[k], n.vals[k])
	}
}

// finish derives what a valid registry answers from: deferral marks, the
// availability set, tool digests, the contract prefix and the caches.
func (r *Registry) finish(explicitResident bool, embeddingDim int) {
	// Deferral marks: guard 1 is the explicit name check in
	// markDeferral; guard 2 is IsResident answering true for tool_search
	// whatever the lists say.
	r.markDeferral(explicitResident)
	r.avail = make(bitset, (len(r.tools)+63)/64)
	for i := range r.tools {
		if r.tools[i].Available {
			r.avail.set(int32(i))
		}
	}
	r.digests = make([]byte, 0, len(r.tools)*sha256.Size)
	for i := range r.tools {
		t := &r.tools[i]
		d := toolDigest(t)
		r.digests = append(r.digests, d[:]...)
	}
	// The channel policy is not hashed into the contract: a contract
	// is the tools a request carries, so a policy that narrows a channel's
	// tools changes that channel's contract through them, and a checkpoint's
	// (name, ToolHash) entries add up to its hash.
	r.prefix = contractPrefix(r.version)
	r.embeddingDim = embeddingDim
	r.cache.init()
}

func (l *loader) profile(r *Registry, name string, n *jnode, defaultNames []string) {
	path := "profiles." + name
	if !validName(name) {
		l.addf("profiles: name %q must match %s; rename it", name, namePatternText)
		return
	}
	if n.kind != jObject {
		l.addf(`%s: is %s; want an object such as {"preset":"coding"}`, path, n.kind)
		return
	}
	l.unknownKeys(path, n, profileKeys)
	e := &profileEntry{p: Profile{Name: name}}
	ok := true
	if tn := n.get("tools"); tn != nil && tn.kind != jNull {
		list, good := l.strList(path+".tools", tn)
		if !good {
			ok = false
		} else {
			if list != nil {
				list = l.expand(r, path+".tools", list, nil)
			}
			e.p.Tools = list
			e.tools = l.refs(path+".tools", list, r.index)
		}
	}
	if pn := n.get("preset"); pn != nil {
		if s, good := l.str(path+".preset", pn); !good {
			ok = false
		} else if s != "" {
			if _, known := r.presets[s]; !known {
				l.addf("%s.preset %q: unknown preset; use one of %s", path, s, presetChoices(r.presetNames))
				ok = false
			}
			e.p.Preset = s
		}
	}
	if an := n.get("allowed"); an != nil && an.kind != jNull {
		list, good := l.strList(path+".allowed", an)
		if good {
			list = l.expand(r, path+".allowed", list, defaultNames) // allowed filters the defaults: a pattern allows its matches among them
		}
		if !good {
			ok = false
		} else if len(list) > 0 {
			e.p.Allowed = list
			e.allowed = l.refs(path+".allowed", list, r.index)
			for i, name := range list {
				if _, known := r.index[name]; known && defaultNames != nil && !slices.Contains(defaultNames, name) {
					l.addf("%s.allowed[%d]: %q is not in default_tools; allowed only filters the defaults (see docs/semantics.md#defaults-and-allowed), list extra tools in \"tools\" instead", path, i, name)
					ok = false
				}
			}
		}
	}
	if e.p.Tools != nil && e.p.Preset != "" {
		l.addf(`%s: sets both "tools" and "preset"; keep one (tools wins otherwise, which hides the preset)`, path)
		ok = false
	}
	if e.p.Allowed != nil && (e.p.Tools != nil || e.p.Preset != "") {
		l.addf(`%s: "allowed" filters the defaults and has no effect with "tools" or "preset" (see docs/semantics.md#defaults-and-allowed); remove one`, path)
		ok = false
	}
	if !ok {
		return
	}
	r.profiles[name] = e
	r.profileNames = append(r.profileNames, name)
}

func presetChoices(names []string) string {
	if len(names) == 0 {
		return "(none: the registry defines no presets)"
	}
	return strings.Join(names, ", ")
}
