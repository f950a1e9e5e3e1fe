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
