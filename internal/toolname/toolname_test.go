package toolname

import (
	"regexp"
	"strings"
	"testing"
)

// R22: Valid agrees with its documented pattern.
func TestValidMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for _, s := range []string{"", "a", "bash", "web_search", "tool-search", "A", "1a", "a.b", "a b", "é", "a" + strings.Repeat("b", 63), "a" + strings.Repeat("b", 64), "_a",
		"mcp__github__create_issue", "mcp__jira__createJiraIssue", "mcp__notion__API-post-search", "Read", "a/b", "a:b"} {
		if got, want := Valid(s), re.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, pattern says %v", s, got, want)
		}
	}
}

// R22, issue #15: names as MCP servers ship them are valid; what neither
// provider accepts is not.
func TestMCPNames(t *testing.T) {
	for _, s := range []string{"mcp__github__create_issue", "mcp__jira__createJiraIssue", "mcp__notion__API-post-search", "getIssue"} {
		if !Valid(s) {
			t.Errorf("Valid(%q) = false", s)
		}
	}
	for _, s := range []string{"mcp__k8s__pods.list", "user-profile/update", "admin.tools.list", "mcp__" + strings.Repeat("x", 60)} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true; providers refuse it", s)
		}
	}
}
