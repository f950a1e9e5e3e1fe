// Package toolname holds the one rule for tool (and preset) names, shared
// by the registry loader and the event decoder so they cannot disagree.
package toolname

// Pattern is the rule Valid checks, for error messages.
const Pattern = "^[a-z][a-z0-9_-]{0,63}$"

// Valid reports whether s matches Pattern.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
