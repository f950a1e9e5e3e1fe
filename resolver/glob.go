package resolver

import "strings"

// IsPattern reports whether s is a name pattern rather than a plain name:
// it holds '*' (any run of characters) or '?' (any one character).
func IsPattern(s string) bool { return strings.ContainsAny(s, "*?") }

// matchName reports whether name matches pattern, a plain name or a
// glob of '*' and '?' (mcp__github__* matches every tool of the github
// server). Matching is byte-wise and case-sensitive; it never allocates.
func matchName(pattern, name string) bool {
	if !IsPattern(pattern) {
		return pattern == name
	}
	// Iterative glob with one backtrack point: linear in practice.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// MatchName reports whether name matches pattern: equal to a plain name,
// or matched by a glob of '*' and '?' (IsPattern).
func MatchName(pattern, name string) bool { return matchName(pattern, name) }

// containsMatch reports whether any entry of list (names or patterns)
// matches name.
func containsMatch(list []string, name string) bool {
	for _, p := range list {
		if matchName(p, name) {
			return true
		}
	}
	return false
}

// Matches returns the names of the registry's tools that pattern matches
// (a plain name matches itself), in registry order.
func (r *Registry) Matches(pattern string) []string {
	var out []string
	r.eachMatch(pattern, func(i int32) { out = append(out, r.tools[i].Name) })
	return out
}

// eachMatch calls f with the index of every tool pattern matches, in
// registry order, available or not. It reports whether any matched.
func (r *Registry) eachMatch(pattern string, f func(i int32)) bool {
	if !IsPattern(pattern) {
		i, ok := r.index[pattern]
		if ok {
			f(i)
		}
		return ok
	}
	found := false
	for i := range r.tools {
		if matchName(pattern, r.tools[i].Name) {
			f(int32(i))
			found = true
		}
	}
	return found
}

// appendAvailable appends to out the available tools a name or pattern
// selects, in registry order for a pattern; a name or pattern that selects
// none is appended to unknown.
func (r *Registry) appendAvailable(out []int32, unknown []string, name string) ([]int32, []string) {
	if !IsPattern(name) {
		i, ok := r.lookupAvailable(name)
		if !ok {
			return out, append(unknown, name)
		}
		return append(out, i), unknown
	}
	n := len(out)
	r.eachMatch(name, func(i int32) {
		if r.avail.has(i) {
			out = append(out, i)
		}
	})
	if len(out) == n {
		unknown = append(unknown, name)
	}
	return out, unknown
}

// setMatches sets in b every tool a name or pattern selects.
func (r *Registry) setMatches(b bitset, name string) {
	r.eachMatch(name, func(i int32) { b.set(i) })
}
