package toolsearch

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

// Regex matches name, description and parameters, name matches
// first; bad or overlong patterns are ErrPattern.
func TestRegex(t *testing.T) {
	ix := Build(testDocs(), nil)
	hits, err := ix.Regex(`create.*issue`, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hitNames(hits), []string{"mcp__github__create_issue", "mcp__jira__createIssue"}; !slices.Equal(got, want) {
		t.Errorf("Regex(create.*issue) = %v, want %v", got, want)
	}
	hits, _ = ix.Regex(`^mcp__slack__`, 5, nil)
	if !slices.Equal(hitNames(hits), []string{"mcp__slack__post_message"}) {
		t.Errorf("anchored name regex = %v", hitNames(hits))
	}
	hits, _ = ix.Regex(`branch`, 5, nil) // description and parameter text
	if !slices.Equal(hitNames(hits), []string{"mcp__github__create_pull_request"}) {
		t.Errorf("Regex(branch) = %v", hitNames(hits))
	}
	hits, _ = ix.Regex(`screenshot|SLACK`, 5, nil) // case-insensitive
	if got, want := hitNames(hits), []string{"mcp__slack__post_message", "playwright_browser"}; !slices.Equal(got, want) {
		t.Errorf("Regex(screenshot|SLACK) = %v, want %v", got, want)
	}
	for _, bad := range []string{"(unclosed", "a**", strings.Repeat("a", MaxPatternLen+1)} {
		if _, err := ix.Regex(bad, 5, nil); !errors.Is(err, ErrPattern) {
			t.Errorf("Regex(%.20q) err = %v, want ErrPattern", bad, err)
		}
	}
}

// A regular expression's cost is bounded before matching:
// one that compiles to too large a program, or whose width times the text
// it would scan is over RegexBudget, is refused at once with ErrPattern
// naming the pattern, the bound and the fix; a plain pattern over the
// same index is not.
func TestRegexBounded(t *testing.T) {
	ix := Build(testDocs(), nil)
	_, err := ix.Regex(`(?:.*){1,1000}z`, 5, nil)
	if !errors.Is(err, ErrPattern) || !strings.Contains(err.Error(), `"(?:.*){1,1000}z"`) ||
		!strings.Contains(err.Error(), "instructions") || !strings.Contains(err.Error(), "repetition counts") {
		t.Errorf("Regex((?:.*){1,1000}z) err = %v, want ErrPattern naming the pattern, its program size and the fix", err)
	}

	// About 2 MB of tool text: width 1 fits the budget, width 6 does not.
	var docs []Doc
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 800)
	for i := range 100 {
		docs = append(docs, Doc{Name: fmt.Sprintf("tool_%03d", i), Description: filler, Parameters: []byte(`{"type":"object"}`)})
	}
	big := Build(docs, nil)
	if hits, err := big.Regex(`tool_00[0-4]`, 10, nil); err != nil || len(hits) != 5 {
		t.Errorf("plain pattern over 2 MB: %d hits, %v; want 5 and no error", len(hits), err)
	}
	_, err = big.Regex(`(?:.*){1,5}z`, 10, nil)
	if !errors.Is(err, ErrPattern) || !strings.Contains(err.Error(), "width 6") || !strings.Contains(err.Error(), "nested or repeated .*") {
		t.Errorf("wide pattern over 2 MB: err = %v, want ErrPattern naming its width and the fix", err)
	}
	// The budget counts admitted tools only: the same pattern over a
	// filter of three tools is matched.
	f := big.NewFilter([]string{"tool_000", "tool_001", "tool_002"})
	if _, err := big.Regex(`(?:.*){1,5}z`, 10, f); err != nil {
		t.Errorf("wide pattern over three tools: %v, want it matched", err)
	}
	for p, want := range map[string]int{`create`: 1, `create.*issue`: 2, `(?:.*){1,10}z`: 11, `(ab)+`: 3, `[a-z]+x`: 2} {
		re, err := syntax.Parse("(?i)"+p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := regexWidth(re.Simplify()); got != want {
			t.Errorf("regexWidth(%s) = %d, want %d", p, got, want)
		}
	}
}
