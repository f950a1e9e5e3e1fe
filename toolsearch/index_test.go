package toolsearch

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Names split the way MCP servers write them and also kept
// whole (compound words), text lower-cased and full-width folded, stop
// words dropped, inflections folded, CJK as bigrams then unigrams.
func TestTerms(t *testing.T) {
	cases := map[string][]string{
		"mcp__github__create_issue":            {"mcp", "github", "creat", "issu"},
		"createIssue":                          {"creat", "issu", "createissu"},
		"HTTPServer.listPods-v2":               {"http", "server", "httpserver", "list", "pod", "listpod", "v", "2", "v2"},
		"kube.pods-list":                       {"kube", "pod", "list"},
		"Create a new issue in the repository": {"creat", "new", "issu", "repository"},
		"listing created files":                {"list", "creat", "file"},
		"ec2 instances":                        {"ec", "2", "ec2", "instanc"},
		"发送消息":                                 {"发送", "送消", "消息", "发", "送", "消", "息"},
		"查":                                    {"查"},
		"JavaScript, PostgreSQL and PromQL":    {"java", "script", "javascript", "postgr", "sql", "postgresql", "prom", "ql", "promql"},
		"ConfigMap":                            {"config", "map", "configmap"},
		"YouTube iPhone":                       {"tube", "youtub", "phone", "iphon"},
		"ｇｉｔｈｕｂ　ＡＰＩ":                           {"github", "api"},
		"what's up, I'm":                       {"up"},
		"":                                     nil,
		"   __--..  ":                          nil,
	}
	for in, want := range cases {
		if got := Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

// The stemmer folds plural and -ing/-ed forms onto one stem, and
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
		{"make", "making", "makes"},
		{"file", "files", "filing"},
		{"youtube", "youtubes"},
	}
	for _, g := range groups {
		for _, w := range g[1:] {
			if stem(w) != stem(g[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q: want equal", w, stem(w), g[0], stem(g[0]))
			}
		}
	}
	// A short word is not cut into another word ("tube" is not "tub").
	for _, w := range []string{"aws", "s3", "status", "address", "string", "thing", "ünïcode", "tube", "phone", "file", "note"} {
		if got := stem(w); got != w && !(w == "ünïcode") {
			t.Errorf("stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

// The schema walk finds property names at every depth and the
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

// Keyword search ranks by BM25 over name, description and parameters.
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

// A query term brings the words of its concept groups in at a
// lower weight, and the
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
	for line := range strings.SplitSeq(conceptGroups, "\n") {
		g := strings.Fields(line)
		if len(g) == 1 {
			t.Errorf("concept group %q has one word", line)
		}
		for _, w := range g {
			if syn := conceptLexicon[stem(w)]; len(syn) == 0 && stem(g[0]) != stem(g[1]) {
				t.Errorf("%q has no concept neighbours", w)
			}
		}
	}
}

// Equal scores are ordered by name, and the same search gives the
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

// A filter restricts every search mode to the admitted documents.
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

// An incremental Build gives the same index as a fresh one, and reuses
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

// Concurrent searches share one index safely (run with -race).
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

// The failures the issue lists are reached: a compound word written
// in camelCase in a description (javascript, postgresql, promql,
// configmap), full-width Latin, a one-character CJK query, and a
// paraphrase sharing no word with its tool through the concept lexicon.
func TestKeywordReachesIssue27Cases(t *testing.T) {
	docs := []Doc{
		{Name: "run_script", Description: "Run a JavaScript snippet in the page.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "pg_query", Description: "Query a PostgreSQL database.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "metrics_query", Description: "Evaluate a PromQL expression.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "get_config", Description: "Read a ConfigMap.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "github_search", Description: "Search GitHub code.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "weather", Description: "查询城市天气。", Parameters: []byte(`{"type":"object"}`)},
		{Name: "set_status", Description: "Set the user's status (away, busy) with an emoji.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "send_sms", Description: "Send an SMS to a phone number.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "geocode", Description: "Turn an address into coordinates.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "top_pods", Description: "Show pods by memory use.", Parameters: []byte(`{"type":"object"}`)},
	}
	ix := Build(docs, nil)
	for q, want := range map[string]string{
		"javascript": "run_script", "postgresql": "pg_query", "promql": "metrics_query", "configmap": "get_config",
		"ｇｉｔｈｕｂ": "github_search", "天": "weather",
		"I'm on vacation": "set_status", "text the customer": "send_sms", "lat/long of this place": "geocode",
		"which pods eat the most RAM": "top_pods",
	} {
		if got := hitNames(ix.Keyword(q, 3, nil)); len(got) == 0 || got[0] != want {
			t.Errorf("Keyword(%q) = %v, want %s first", q, got, want)
		}
	}
}

// A document answering more of the query's words ranks above one
// answering one of them strongly (coordination).
func TestKeywordCoordination(t *testing.T) {
	docs := []Doc{
		{Name: "a_one", Description: "Invoice invoice invoice invoice.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "b_two", Description: "Email an invoice to a customer, among other things one can do.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "c_other", Description: "Unrelated.", Parameters: []byte(`{"type":"object"}`)},
	}
	if got := hitNames(Build(docs, nil).Keyword("email invoice", 3, nil)); !slices.Equal(got, []string{"b_two", "a_one"}) {
		t.Errorf("email invoice = %v, want b_two (both words) before a_one", got)
	}
}

// An action word ranks the tool whose verb does it above its
// siblings (actionClasses), and a question ranks the reading ones first
// (asksToRead); neither brings in a tool the query's words did not find.
func TestKeywordActionAndQuestion(t *testing.T) {
	docs := []Doc{
		{Name: "list_notes", Description: "List the notes in a folder.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "delete_note", Description: "Delete a note.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "create_note", Description: "Create a note.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "delete_file", Description: "Delete a file.", Parameters: []byte(`{"type":"object"}`)},
	}
	ix := Build(docs, nil)
	for q, want := range map[string]string{"wipe my shopping note": "delete_note", "what notes do I have": "list_notes", "compose a note": "create_note"} {
		got := hitNames(ix.Keyword(q, 5, nil))
		if len(got) == 0 || got[0] != want {
			t.Errorf("Keyword(%q) = %v, want %s first", q, got, want)
		}
		if slices.Contains(got, "delete_file") {
			t.Errorf("Keyword(%q) = %v: the action word alone brought delete_file in", q, got)
		}
	}
}

// FilterAll admits exactly the named documents, as NewFilter does, and
// says false when the index lacks a name.
func TestFilterAll(t *testing.T) {
	ix := Build(testDocs(), nil)
	names := []string{ix.Name(0), ix.Name(2)}
	f, ok := ix.FilterAll(slices.Values(names))
	if !ok {
		t.Fatal("FilterAll of indexed names: false")
	}
	want := ix.NewFilter(names)
	for i := range ix.Len() {
		if f.Has(i) != want.Has(i) {
			t.Errorf("doc %d: FilterAll %v, NewFilter %v", i, f.Has(i), want.Has(i))
		}
	}
	if _, ok := ix.FilterAll(slices.Values([]string{ix.Name(0), "no_such_tool"})); ok {
		t.Error("FilterAll with an unknown name: true")
	}
}
