package toolname

import (
	"regexp"
	"strings"
	"testing"
)

// R22: Valid agrees with its documented pattern.
func TestValidMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for _, s := range []string{"", "a", "bash", "web_search", "tool-search", "A", "1a", "a.b", "a b", "é", "a" + strings.Repeat("b", 63), "a" + strings.Repeat("b", 64), "_a"} {
		if got, want := Valid(s), re.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, pattern says %v", s, got, want)
		}
	}
}
