package toolsearch

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// R29: names split the way MCP servers write them, text lower-cased,
// stop words dropped, inflections folded, CJK as bigrams.
func TestTerms(t *testing.T) {
	cases := map[string][]string{
		"mcp__github__create_issue":            {"mcp", "github", "creat", "issu"},
		"createIssue":                          {"creat", "issu"},
		"HTTPServer.listPods-v2":               {"http", "server", "list", "pod", "v", "2", "v2"},
		"kube.pods-list":                       {"kub", "pod", "list"},
		"Create a new issue in the repository": {"creat", "new", "issu", "repository"},
		"listing created files":                {"list", "creat", "fil"},
		"ec2 instances":                        {"ec", "2", "ec2", "instanc"},
		"发送消息":                                 {"发送", "送消", "消息"},
		"查":                                    {"查"},
		"":                                     nil,
		"   __--..  ":                          nil,
	}
	for in, want := range cases {
		if got := Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

// R29: the stemmer folds plural and -ing/-ed forms onto one stem, and
// leaves short or non-ASCII words alone.
func TestStemFoldsInflections(t *testing.T) {
	groups := [][]string{
		{"issue", "issues"},
		{"create", "creates", "creating", "created"},
		{"list", "lists", "listing", "listed"},
		{"branch", "branches"},
		{"repository", "repositories"},
		{"message", "messages", "messaging"},
		{"run", "running", "runs"},
		{"process", "processes"},
		{"assignee", "assigned", "assign"},
	}
	for _, g := range groups {
		for _, w := range g[1:] {
			if stem(w) != stem(g[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q: want equal", w, stem(w), g[0], stem(g[0]))
			}
		}
	}
	for _, w := range []string{"aws", "s3", "status", "address", "string", "thing", "ünïcode"} {
		if got := stem(w); got != w && !(w == "ünïcode") {
			t.Errorf("stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

// R29: the schema walk finds property names at every depth and the
// description, title and enum strings, escapes decoded.
func TestSchemaText(t *testing.T) {
	schema := []byte(`{"properties":{"owner":{"description":"Repository owner","type":"string"},` +
		`"state":{"enum":["open","closed"],"type":"string"},` +
		`"labels":{"items":{"properties":{"name":{"title":"Label \"name\" \u00e9"}},"type":"object"},"type":"array"},` +
		`"properties":{"description":"a property named properties","type":"string"}},"required":["owner"],"type":"object"}`)
	names, texts := SchemaText(schema)
	if want := []string{"owner", "state", "labels", "name", "properties"}; !slices.Equal(names, want) {
		t.Errorf("names = %q, want %q", names, want)
	}
	if want := []string{"Repository owner", "open", "closed", `Label "name" é`, "a property named properties"}; !slices.Equal(texts, want) {
		t.Errorf("texts = %q, want %q", texts, want)
	}
	// Malformed input: what was read before the fault, no panic.
	for _, bad := range []string{``, `{`, `{"properties":{"a":`, `{"properties":{"a":{"description":"x"}`, `[[[[`, `{"description":"unterminated`, `nul`} {
		SchemaText([]byte(bad))
	}
	deep := strings.Repeat(`{"properties":{"a":`, 200) + `{}` + strings.Repeat(`}}`, 200)
	if names, _ := SchemaText([]byte(deep)); len(names) > maxSchemaDepth {
		t.Errorf("walked %d levels, bound is %d", len(names), maxSchemaDepth)
	}
}

func testDocs() []Doc {
	return []Doc{
		{Name: "mcp__github__create_issue", Description: "Create a new issue in a GitHub repository.",
			Parameters: []byte(`{"properties":{"owner":{"description":"Repository owner","type":"string"},"repo":{"type":"string"},"title":{"type":"string"}},"type":"object"}`)},
		{Name: "mcp__github__list_issues", Description: "List issues in a GitHub repository, filtered by state and labels.",
			Parameters: []byte(`{"properties":{"state":{"enum":["open","closed"],"type":"string"}},"type":"object"}`)},
		{Name: "mcp__github__create_pull_request", Description: "Open a pull request from a branch.",
			Parameters: []byte(`{"properties":{"head":{"description":"Branch with the changes","type":"string"}},"type":"object"}`)},
		{Name: "mcp__slack__post_message", Description: "Post a message to a Slack channel.",
			Parameters: []byte(`{"properties":{"channel":{"type":"string"},"text":{"type":"string"}},"type":"object"}`)},
		{Name: "mcp__jira__createIssue", Description: "Create a Jira issue in a project.",
			Parameters: []byte(`{"properties":{"projectKey":{"type":"string"}},"type":"object"}`)},
		{Name: "playwright_browser", Description: "Drive a headless browser: navigate, click, take a screenshot.",
			Parameters: []byte(`{"properties":{"action":{"enum":["navigate","click","screenshot"],"type":"string"}},"type":"object"}`)},
		{Name: "send_message", Description: "Send a message to another session.", Parameters: []byte(`{"type":"object"}`)},
	}
}

func hitNames(hs []Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}

// R29: keyword search ranks by BM25 over name, description and parameters.
func TestKeywordRanking(t *testing.T) {
	ix := Build(testDocs(), nil)
	cases := []struct {
		query string
		first string
	}{
		{"github create issue", "mcp__github__create_issue"},
		{"open a PR from my branch", "mcp__github__create_pull_request"},
		{"slack message", "mcp__slack__post_message"},
		{"jira new issue", "mcp__jira__createIssue"},
		{"take a screenshot of the page", "playwright_browser"},
		{"closed issues", "mcp__github__list_issues"},              // enum value
		{"repository owner", "mcp__github__create_issue"},          // parameter description
		{"projectKey", "mcp__jira__createIssue"},                   // parameter name, camelCase
		{"send_message", "send_message"},                           // exact name first
		{"find pull requests", "mcp__github__create_pull_request"}, // "find" brings "search" in, "pull" matches
	}
	for _, c := range cases {
		hits := ix.Keyword(c.query, 5, nil)
		if len(hits) == 0 || hits[0].Name != c.first {
			t.Errorf("Keyword(%q) = %v, want %s first", c.query, hitNames(hits), c.first)
		}
		for i := 1; i < len(hits); i++ {
			if better(hits[i], hits[i-1]) {
				t.Errorf("Keyword(%q): hits out of order: %v", c.query, hits)
			}
		}
	}
	if hits := ix.Keyword("the of and", 5, nil); hits != nil {
		t.Errorf("stop words only: %v, want no hits", hits)
	}
	if hits := ix.Keyword("zebra", 5, nil); hits != nil {
		t.Errorf("unknown term: %v, want no hits", hits)
	}
	if hits := ix.Keyword("issue", 2, nil); len(hits) != 2 {
		t.Errorf("k=2: %d hits", len(hits))
	}
}

// R29: a query term brings its synonyms in at a lower weight, and the
// tool's group description (Context) is searchable at a low weight.
func TestSynonymsAndContext(t *testing.T) {
	docs := []Doc{
		{Name: "search_pages", Description: "Search pages by title.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "create_element", Description: "Create a shape on the canvas.", Parameters: []byte(`{"type":"object"}`), Context: "Excalidraw whiteboard diagrams."},
		{Name: "find_pages", Description: "Find pages.", Parameters: []byte(`{"type":"object"}`)},
	}
	ix := Build(docs, nil)
	hits := ix.Keyword("find pages", 5, nil)
	if got := hitNames(hits); !slices.Equal(got, []string{"find_pages", "search_pages"}) {
		t.Errorf("find pages = %v: want the literal match first, the synonym match after it", got)
	}
	if got := hitNames(ix.Keyword("draw on a whiteboard", 5, nil)); !slices.Equal(got, []string{"create_element"}) {
		t.Errorf("whiteboard = %v: want the tool whose group mentions it", got)
	}
	for _, g := range synonymGroups {
		for _, w := range g {
			if syn := synonyms[stem(w)]; len(syn) == 0 && len(g) > 1 && stem(g[0]) != stem(g[1]) {
				t.Errorf("%q has no synonyms", w)
			}
		}
	}
}

// R9, R29: equal scores are ordered by name, and the same search gives the
// same hits every time, whatever the document order.
func TestKeywordTiesByName(t *testing.T) {
	var docs []Doc
	for _, n := range []string{"zeta_tool", "alpha_tool", "mid_tool"} {
		docs = append(docs, Doc{Name: n, Description: "Exports a report.", Parameters: []byte(`{"type":"object"}`)})
	}
	ix := Build(docs, nil)
	want := []string{"alpha_tool", "mid_tool", "zeta_tool"}
	for i := 0; i < 20; i++ {
		if got := hitNames(ix.Keyword("export report", 5, nil)); !slices.Equal(got, want) {
			t.Fatalf("run %d: %v, want %v", i, got, want)
		}
	}
	slices.Reverse(docs)
	if got := hitNames(Build(docs, nil).Keyword("export report", 5, nil)); !slices.Equal(got, want) {
		t.Errorf("reversed docs: %v, want %v", got, want)
	}
}

// R29: a filter restricts every search mode to the admitted documents.
func TestFilter(t *testing.T) {
	ix := Build(testDocs(), nil)
	f := ix.NewFilter([]string{"mcp__jira__createIssue", "send_message", "not-indexed"})
	if got := hitNames(ix.Keyword("create issue", 5, f)); !slices.Equal(got, []string{"mcp__jira__createIssue"}) {
		t.Errorf("filtered keyword = %v", got)
	}
	if got := hitNames(ix.Keyword("mcp__github__create_issue", 5, f)); slices.Contains(got, "mcp__github__create_issue") {
		t.Errorf("exact name outside the filter returned: %v", got)
	}
	hits, err := ix.Regex("message", 5, f)
	if err != nil || !slices.Equal(hitNames(hits), []string{"send_message"}) {
		t.Errorf("filtered regex = %v, %v", hitNames(hits), err)
	}
	var none *Filter
	if !none.Has(3) {
		t.Errorf("nil filter must admit every document")
	}
}

// R29: regex matches name, description and parameters, name matches
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

// R29: an incremental Build gives the same index as a fresh one, and reuses
// the analysis of unchanged documents.
func TestBuildIncremental(t *testing.T) {
	docs := testDocs()
	prev := Build(docs, nil)
	next := slices.Clone(docs)
	next[1].Description = "List every issue of a repository, filtered by milestone."
	next = append(next, Doc{Name: "mcp__linear__createIssue", Description: "Create a Linear issue.", Parameters: []byte(`{"type":"object"}`)})
	next = slices.Delete(next, 3, 4) // slack gone
	inc, fresh := Build(next, prev), Build(next, nil)
	if !reflect.DeepEqual(inc.names, fresh.names) || !reflect.DeepEqual(inc.docs, fresh.docs) ||
		!reflect.DeepEqual(inc.dict, fresh.dict) || !reflect.DeepEqual(inc.post, fresh.post) ||
		!reflect.DeepEqual(inc.idf, fresh.idf) || !reflect.DeepEqual(inc.norm, fresh.norm) {
		t.Fatalf("incremental build differs from a fresh one")
	}
	// Unchanged documents share the previous analysis (same backing array).
	if &inc.docs[0].terms[0] != &prev.docs[0].terms[0] {
		t.Errorf("unchanged document was analysed again")
	}
	if &inc.docs[1].terms[0] == &prev.docs[1].terms[0] {
		t.Errorf("changed document reused its stale analysis")
	}
	for _, q := range []string{"milestone", "linear issue", "slack"} {
		if a, b := inc.Keyword(q, 5, nil), fresh.Keyword(q, 5, nil); !reflect.DeepEqual(a, b) {
			t.Errorf("%q: incremental %v, fresh %v", q, a, b)
		}
	}
}

// R29: concurrent searches share one index safely (run with -race).
func TestConcurrentSearch(t *testing.T) {
	ix := Build(testDocs(), nil)
	want := hitNames(ix.Keyword("github issue", 5, nil))
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				if got := hitNames(ix.Keyword("github issue", 5, nil)); !slices.Equal(got, want) {
					done <- fmt.Errorf("got %v, want %v", got, want)
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
