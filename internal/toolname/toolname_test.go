package toolname

import (
	"regexp"
	"strings"
	"testing"
)

// Valid agrees with its documented pattern.
func TestValidMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for _, s := range []string{"", "a", "bash", "web_search", "tool-search", "A", "1a", "a.b", "a b", "é", "a" + strings.Repeat("b", 63), "a" + strings.Repeat("b", 64), "_a",
		"mcp__github__create_issue", "mcp__jira__createJiraIssue", "mcp__notion__API-post-search", "Read", "a/b", "a:b"} {
		if got, want := Valid(s), re.MatchString(s); got != want {
			t.Errorf("Valid(%q) = %v, pattern says %v", s, got, want)
		}
	}
}

// Names as MCP servers ship them are valid; what neither
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

// Patterns take the name bytes and the wildcards; every
// valid name is a valid pattern.
func TestValidPattern(t *testing.T) {
	for _, s := range []string{"mcp__github__*", "*", "*_search", "tool_?earch", "bash", "mcp__*__create_*"} {
		if !ValidPattern(s) {
			t.Errorf("ValidPattern(%q) = false", s)
		}
	}
	for _, s := range []string{"", "mcp.*", "a b*", "1*", "_*", strings.Repeat("*", 65), "[a]"} {
		if ValidPattern(s) {
			t.Errorf("ValidPattern(%q) = true", s)
		}
	}
	for _, s := range []string{"a", "read_file", "mcp__jira__createJiraIssue"} {
		if Valid(s) != ValidPattern(s) {
			t.Errorf("%q: a valid name must be a valid pattern", s)
		}
	}
}
