package resolver

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"strings"
)

// Resolve expands a request against the registry:
//
//  1. Priority: the per-turn override wins; OverrideEmpty (or
//     OverrideNames with no names) yields no tools; OverrideNames yields
//     exactly those names in the user's order; OverrideIntent is
//     expanded like a session intent, with Override.Allowed; otherwise the
//     session intent is expanded.
//  2. An intent's base list: Enabled=false yields nothing, or exactly
//     [web_search] when WebSearch=true; else a non-empty Picked list
//     in the user's order; else the Preset's list; else, when Enabled is
//     unset and the request names a profile, the profile's tools (its Tools,
//     else its Preset, else DEFAULT_TOOLS filtered by its Allowed); else
//     DEFAULT_TOOLS. Allowed lists filter only DEFAULT_TOOLS: an
//     override's Allowed list with an intent whose base is not the defaults
//     (enabled=false, a picked list, a preset, or a profile's tools or
//     preset) is refused with ErrInvalidRequest, never ignored.
//  3. Disabled names are removed; WebSearch=true appends web_search when
//     missing. The overlay only adds: WebSearch=false and unset add
//     and remove nothing (a preset that lists web_search keeps it; removing
//     it is a Disabled name). Unavailable tools are dropped
//     (reported in Unknown when the request named them); duplicates are
//     dropped, keeping the first occurrence.
//
// The result depends only on the request's values and the registry, never
// on Go map order. An empty Picked list is the same as an unset one
// (use Enabled=false for no tools), so that encodings which drop empty lists
// cannot change a resolution.
//
// Results are cached per registry: a repeated call with an equal request
// returns the same *Resolution without allocating. The returned value is
// shared and must not be modified. Resolve is safe for concurrent use.
// Errors wrap ErrUnknownPreset, ErrUnknownProfile or ErrInvalidRequest.
func (r *Registry) Resolve(req Request) (*Resolution, error) {
	fp := fingerprint(&req)
	if e := r.cache.get(fp, &req); e != nil {
		return e.res, e.err
	}
	res, err := r.resolve(&req)
	r.cache.put(fp, &req, res, err)
	return res, err
}

// ResolveUncached is Resolve without the cache: it always computes a new
// *Resolution, which the caller owns. Use it to measure or to compare.
func (r *Registry) ResolveUncached(req Request) (*Resolution, error) {
	return r.resolve(&req)
}

func intentZero(in *Intent) bool {
	return in.Enabled == nil && in.WebSearch == nil && in.Preset == "" && len(in.Disabled) == 0 && len(in.Picked) == 0
}

func (r *Registry) resolve(req *Request) (*Resolution, error) {
	res := &Resolution{RegistryVersion: r.version}
	var out []int32
	var err error
	switch req.Override.Kind {
	case OverrideNone:
		res.Source = SourceSessionIntent
		if intentZero(&req.Session) {
			res.Source = SourceDefaults
			if req.Profile != "" {
				res.Source = SourceProfile
			}
		}
		out, res.Unknown, err = r.expand(&req.Session, nil, req.Profile, "session intent")
	case OverrideEmpty:
		res.Source = SourceOverrideEmpty
	case OverrideNames:
		if len(req.Override.Names) == 0 {
			res.Source = SourceOverrideEmpty
			break
		}
		res.Source = SourceOverrideNames
		out, res.Unknown = r.named(req.Override.Names)
	case OverrideIntent:
		res.Source = SourceOverrideIntent
		out, res.Unknown, err = r.expand(&req.Override.Intent, req.Override.Allowed, req.Profile, "override intent")
	default:
		return nil, fmt.Errorf("resolve request: %w: override kind %d; use OverrideNone, OverrideEmpty, OverrideIntent or OverrideNames", ErrInvalidRequest, req.Override.Kind)
	}
	if err != nil {
		return nil, err
	}
	out, res.Withheld = r.applyPolicy(out, req) // After intent and override, only narrows
	res.Policy = r.PolicyVersion()
	auto := r.budgetDefer(out) // auto_defer: deferral by token budget
	out, _ = r.reach(out, func(k int) bool { return r.tools[out[k]].Deferred || auto != nil && auto.has(out[k]) }, effectiveIntent(req))
	res.Tools = make([]Tool, len(out))
	prefix := r.prefix
	if prefix == nil { // zero Registry
		prefix = contractPrefix(r.version)
	}
	h := &digestWriter{h: newContractHash(prefix, len(out)), digests: make([]byte, 0, len(out)*sha256.Size)}
	if auto != nil {
		r.copyBudgeted(res.Tools, out, auto, h)
		out = nil // copied
	}
	for k := 0; k < len(out); {
		// Copy runs of consecutive registry indices at once.
		i, run := out[k], 1
		for k+run < len(out) && out[k+run] == i+int32(run) {
			run++
		}
		copy(res.Tools[k:k+run], r.tools[i:i+int32(run)])
		h.Write(r.digests[int(i)*sha256.Size : (int(i)+run)*sha256.Size])
		k += run
	}
	res.ContractHash = hexSum(h.h)
	res.digests = h.digests
	res.Namespaces = r.namespacesOf(res.Tools)
	res.CatalogMaxTokens = r.CatalogMaxTokens()
	return res, nil
}

// digestWriter writes tool digests to a contract hash and keeps them, so
// that the resolution can answer ToolHashAt without hashing a tool again.
type digestWriter struct {
	h       hash.Hash
	digests []byte
}

func (w *digestWriter) Write(p []byte) (int, error) {
	w.digests = append(w.digests, p...)
	return w.h.Write(p)
}

// bitset is a set of tool indices.
type bitset []uint64

func (b bitset) has(i int32) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) set(i int32)      { b[i>>6] |= 1 << (uint(i) & 63) }

// stackWords is how many bitset words an expansion keeps on the stack: three
// sets of 16 words cover registries of up to 1024 tools without allocating.
const stackWords = 3 * 16

// bitsets splits buf (or, when too small, a new array) into three sets
// sized for n tools.
func bitsets(buf []uint64, n int) (a, b, c bitset) {
	w := (n + 63) / 64
	if 3*w > len(buf) {
		buf = make([]uint64, 3*w)
	}
	return buf[:w:w], buf[w : 2*w : 2*w], buf[2*w : 3*w : 3*w]
}

// lookupAvailable returns the index of an available tool.
func (r *Registry) lookupAvailable(name string) (int32, bool) {
	i, ok := r.index[name]
	if !ok || !r.avail.has(i) {
		return 0, false
	}
	return i, true
}

// named resolves an explicit list (override names): exactly those names in
// order, unknown or unavailable ones reported, duplicates dropped.
func (r *Registry) named(names []string) ([]int32, []string) {
	var buf [stackWords]uint64
	seen, _, _ := bitsets(buf[:], len(r.tools))
	out := make([]int32, 0, len(names))
	var unknown []string
	var picked []int32
	for _, name := range names {
		picked, unknown = r.appendAvailable(picked[:0], unknown, name)
		for _, i := range picked {
			if !seen.has(i) {
				seen.set(i)
				out = append(out, i)
			}
		}
	}
	return out, dedupeStrings(unknown)
}

// expand expands one intent (session or override) into tool indices.
func (r *Registry) expand(in *Intent, allowed []string, profile string, what string) ([]int32, []string, error) {
	ws := r.webSearch - 1 // -1 when the registry has no web_search
	if ws >= 0 && !r.avail.has(ws) {
		ws = -1
	}
	if len(allowed) > 0 {
		if err := r.allowedApplies(in, profile, what); err != nil {
			return nil, nil, err
		}
	}
	if in.Enabled != nil && !*in.Enabled {
		if in.WebSearch != nil && *in.WebSearch && ws >= 0 {
			return []int32{ws}, nil, nil
		}
		return nil, nil, nil
	}

	var buf [stackWords]uint64
	seen, drop, allowedSet := bitsets(buf[:], len(r.tools))
	var base []int32
	var unknown []string
	filter := false // base is DEFAULT_TOOLS under at least one allowed list
	switch {
	case len(in.Picked) > 0:
		base = make([]int32, 0, len(in.Picked))
		for _, name := range in.Picked {
			base, unknown = r.appendAvailable(base, unknown, name) // a pattern picks its matches
		}
		unknown = dedupeStrings(unknown)
	case in.Preset != "":
		idx, ok := r.presets[in.Preset]
		if !ok {
			return nil, nil, fmt.Errorf("resolve %s: %w %q; choose one of %s, or clear the preset", what, ErrUnknownPreset, in.Preset, presetChoices(r.presetNames))
		}
		base = idx
	case in.Enabled == nil && profile != "":
		e, ok := r.profiles[profile]
		if !ok {
			return nil, nil, fmt.Errorf("resolve %s: %w %q; use one of %s, or name no profile", what, ErrUnknownProfile, profile, profileChoices(r.profileNames))
		}
		switch {
		case e.tools != nil:
			base = e.tools
		case e.p.Preset != "":
			base = r.presets[e.p.Preset]
		default:
			base = r.defaults
			if len(e.allowed) > 0 {
				filter = true
				for _, i := range e.allowed {
					allowedSet.set(i)
				}
			}
			filter = r.allow(allowedSet, allowed, filter)
		}
	default:
		base = r.defaults
		filter = r.allow(allowedSet, allowed, false)
	}

	for _, name := range in.Disabled {
		r.setMatches(drop, name) // a pattern disables its matches
	}
	// The overlay only adds. web_search=false is the same as unset here.
	wsOn := in.WebSearch != nil && *in.WebSearch

	out := make([]int32, 0, len(base)+1)
	for _, i := range base {
		if drop.has(i) || seen.has(i) || !r.avail.has(i) || filter && !allowedSet.has(i) {
			continue
		}
		seen.set(i)
		out = append(out, i)
	}
	if wsOn && ws >= 0 && !seen.has(ws) {
		out = append(out, ws)
	}
	return out, unknown, nil
}

// allowedApplies refuses an allowed list where the expansion does not use
// the defaults: allowed filters DEFAULT_TOOLS only (seed §8), and a
// filter that cannot apply must not be dropped silently.
func (r *Registry) allowedApplies(in *Intent, profile, what string) error {
	var base string
	switch {
	case in.Enabled != nil && !*in.Enabled:
		base = "enabled=false, which yields no tools"
	case len(in.Picked) > 0:
		base = "a picked list"
	case in.Preset != "":
		base = fmt.Sprintf("preset %q", in.Preset)
	case in.Enabled == nil && profile != "":
		e, ok := r.profiles[profile]
		switch {
		case !ok:
			return nil // the profile lookup reports ErrUnknownProfile
		case e.tools != nil:
			base = fmt.Sprintf("profile %q, whose tools are an explicit list", profile)
		case e.p.Preset != "":
			base = fmt.Sprintf("profile %q, whose tools are preset %q", profile, e.p.Preset)
		}
	}
	if base == "" {
		return nil
	}
	return fmt.Errorf("resolve %s: %w: allowed filters the default tools (see docs/semantics.md#defaults-and-allowed), but this expansion uses %s; drop allowed, or list the tools to remove in disabled", what, ErrInvalidRequest, base)
}

// allow intersects the allowed set with a request's Allowed list. It
// returns whether a filter applies.
func (r *Registry) allow(set bitset, allowed []string, filtering bool) bool {
	if len(allowed) == 0 {
		return filtering
	}
	if !filtering {
		for _, name := range allowed {
			r.setMatches(set, name)
		}
		return true
	}
	// Both the profile and the request filter: keep the intersection.
	var buf [stackWords]uint64
	req, _, _ := bitsets(buf[:], len(r.tools))
	for _, name := range allowed {
		r.setMatches(req, name)
	}
	for w := range set {
		set[w] &= req[w]
	}
	return true
}

// dedupeStrings keeps the first occurrence of each string, in order. It
// reuses in's backing array.
func dedupeStrings(in []string) []string {
	if len(in) < 2 {
		return in
	}
	out := in[:0]
	if len(in) <= 32 {
		for _, v := range in {
			dup := false
			for _, p := range out {
				if p == v {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, v)
			}
		}
		return out
	}
	seen := make(map[string]struct{}, len(in))
	for _, v := range in {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}

func profileChoices(names []string) string {
	if len(names) == 0 {
		return "(none: the registry defines no profiles)"
	}
	return strings.Join(names, ", ")
}
