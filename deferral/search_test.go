package deferral

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch/searcheval"
)

// A keyword query loads the best matching deferred tools of the turn,
// best first, and never a resident one; the next request appends them.
func TestSearchByQuery(t *testing.T) {
	reg := resolver.Default()
	for _, idx := range []*Index{nil, IndexFor(reg)} {
		turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, idx)
		res, err := turn.Search(SearchRequest{Query: "take a screenshot of a web page", MaxResults: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) == 0 || res.Tools[0].Name != "playwright_browser" || len(res.Tools) > 2 {
			t.Fatalf("index %v: query found %v, want playwright_browser first, at most 2", idx != nil, names(res.Tools))
		}
		for _, m := range res.Matches {
			if tl, _ := turn.Lookup(m.Name); !tl.Deferred || m.Via != "query" {
				t.Errorf("match %+v is not a deferred tool found by the query", m)
			}
		}
		if !slices.Equal(res.Loaded, names(res.Tools)) {
			t.Errorf("Loaded = %v, want %v", res.Loaded, names(res.Tools))
		}
		s := turn.Request()
		if tail := names(s.Provider[len(s.Provider)-len(res.Loaded):]); !slices.Equal(tail, res.Loaded) {
			t.Errorf("loaded tools not appended in load order: %v", names(s.Provider))
		}
		// Planning tools are deferred in the default registry.
		res, _ = turn.Search(SearchRequest{Query: "plan mode"})
		if len(res.Tools) == 0 || !strings.HasSuffix(res.Tools[0].Name, "plan_mode") {
			t.Errorf("query 'plan mode' found %v", names(res.Tools))
		}
		// read_file is resident: a query never returns it.
		res, _ = turn.Search(SearchRequest{Query: "read_file read a file"})
		if slices.Contains(names(res.Tools), "read_file") {
			t.Errorf("query returned a resident tool: %v", names(res.Tools))
		}
	}
}

// A regex matches names, descriptions and parameters of deferred
// tools; an unusable regex is a note, not an error; max_results caps
// query and regex together; names come first.
func TestSearchRegexAndCombined(t *testing.T) {
	reg := resolver.Default()
	turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg))
	res, err := turn.Search(SearchRequest{Regex: "_plan_mode$"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(res.Tools); !slices.Equal(got, []string{"enter_plan_mode", "exit_plan_mode"}) {
		t.Errorf("regex found %v", got)
	}
	res, err = turn.Search(SearchRequest{Regex: "(unclosed"})
	if err != nil || len(res.Tools) != 0 || !strings.Contains(res.Note, "regex") {
		t.Errorf("bad regex: %+v, %v; want a note and no error", res, err)
	}
	// A pattern too costly to match is refused at once, as a
	// note naming the pattern and the fix, not as a failed call.
	res, err = turn.Search(SearchRequest{Regex: "(?:.*){1,1000}z"})
	if err != nil || len(res.Tools) != 0 || !strings.Contains(res.Note, "(?:.*){1,1000}z") || !strings.Contains(res.Note, "repetition counts") {
		t.Errorf("costly regex: %+v, %v; want a note naming the pattern and the fix, and no error", res, err)
	}
	res, err = turn.Search(SearchRequest{Names: []string{"send_message", "nope"}, Query: "plan", Regex: ".", MaxResults: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 2 || res.Tools[0].Name != "send_message" || len(res.Matches) != 1 {
		t.Errorf("combined: tools %v matches %+v, want send_message then one match", names(res.Tools), res.Matches)
	}
	if !slices.Equal(res.NotFound, []string{"nope"}) {
		t.Errorf("NotFound = %v", res.NotFound)
	}
	if _, err := turn.Search(SearchRequest{MaxResults: 21}); !errors.Is(err, ErrInvalidSearch) {
		t.Errorf("max_results 21: %v, want ErrInvalidSearch", err)
	}
}

// The tool result of a search is byte-deterministic and carries
// the full schemas.
func TestSearchOutput(t *testing.T) {
	reg := resolver.Default()
	run := func() []byte {
		turn := Freeze(1, resolve(t, reg, defaultSession()), nil)
		res, err := turn.Search(SearchRequest{Names: []string{"send_message", "ghost"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Output()
	}
	a, b := run(), run()
	if string(a) != string(b) {
		t.Fatalf("output differs:\n%s\n%s", a, b)
	}
	var out struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Loaded   []string `json:"loaded"`
		NotFound []string `json:"not_found"`
	}
	if err := json.Unmarshal(a, &out); err != nil {
		t.Fatal(err)
	}
	want, _ := reg.Tool("send_message")
	if len(out.Tools) != 1 || string(out.Tools[0].InputSchema) != string(want.Parameters) ||
		!slices.Equal(out.Loaded, []string{"send_message"}) || !slices.Equal(out.NotFound, []string{"ghost"}) {
		t.Errorf("output %s", a)
	}
}

// IndexFor builds once per registry and reuses the analysis of the
// previous one; a turn frozen with it searches that registry's tools.
func TestIndexFor(t *testing.T) {
	a := smallReg(t, 1, 100, "network")
	b := smallReg(t, 2, 5, "network")
	ia := IndexFor(a)
	if IndexFor(a) != ia {
		t.Errorf("IndexFor built twice for one registry")
	}
	ib := IndexFor(b)
	if ib == ia || ib.Search().Len() != a.Len() {
		t.Errorf("index of the second registry: %p vs %p, %d docs", ib, ia, ib.Search().Len())
	}
	turn := FreezeIndexed(1, resolve(t, b, defaultSession()), nil, ib)
	res, _ := turn.Search(SearchRequest{Query: "browser"})
	if !slices.Equal(res.Loaded, []string{"browser"}) {
		t.Errorf("query on an indexed turn loaded %v", res.Loaded)
	}
}

// The engine's own search path (a registry imported from
// the MCP corpus, its index, a frozen turn, tool_search with a query)
// ranks as the index does on its own: recall@5 >= 0.95 and MRR >= 0.8 on
// the 171 labelled queries.
func TestTurnSearchQuality(t *testing.T) {
	servers, err := searcheval.Servers()
	if err != nil {
		t.Fatal(err)
	}
	in := make([]resolver.MCPServer, len(servers))
	for i, s := range servers {
		in[i] = resolver.MCPServer{Name: s.Name, Description: s.Description, ToolsList: s.Raw}
	}
	data, _, err := resolver.ImportMCP(resolver.DefaultRegistryJSON(), in, resolver.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg))
	search := func(q string, k int) []string {
		res, err := turn.Search(SearchRequest{Query: q, MaxResults: k})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(res.Matches))
		for i, m := range res.Matches {
			out[i] = m.Name
		}
		return out
	}
	qs, err := searcheval.Queries()
	if err != nil {
		t.Fatal(err)
	}
	q := searcheval.Evaluate(search, qs, "")
	t.Logf("engine path: %d queries, recall@5 %.3f, MRR %.3f", q.Queries, q.Recall, q.MRR)
	// What a query loads (its confident matches) against
	// what it ranks.
	res1 := resolve(t, reg, defaultSession())
	calls, total, ranked := 0, 0, 0
	loaded := func(q string, k int) []string {
		fresh := FreezeIndexed(1, res1, nil, IndexFor(reg)) // nothing loaded yet
		res, err := fresh.Search(SearchRequest{Query: q, MaxResults: k})
		if err != nil {
			t.Fatal(err)
		}
		calls, total, ranked = calls+1, total+len(res.Loaded), ranked+len(res.Matches)
		return res.Loaded
	}
	l := searcheval.Evaluate(loaded, qs, "")
	t.Logf("loaded (matches >= %.1f of the best score): recall@5 %.3f, MRR %.3f; %.2f tools loaded per query, of %.2f ranked",
		ConfidentShare, l.Recall, l.MRR, float64(total)/float64(max(calls, 1)), float64(ranked)/float64(max(calls, 1)))
	if l.Recall < 0.95 {
		t.Errorf("the confident matches a query loads hold the expected tool in %.3f of the queries, want at least 0.95", l.Recall)
	}
	if q.Recall < 0.95 || q.MRR < 0.8 {
		t.Errorf("recall@5 %.3f, MRR %.3f; want at least 0.95 and 0.8", q.Recall, q.MRR)
	}
}

// Turns frozen from one resolution share their search filter (built by
// the first search of any of them), so the first search of every other
// turn costs no pass over a large registry's tools; it admits exactly the
// turn's deferred tools.
func TestTurnsShareSearchFilter(t *testing.T) {
	reg := resolver.Default()
	res := resolve(t, reg, defaultSession())
	a := FreezeIndexed(1, res, nil, IndexFor(reg))
	b := FreezeIndexed(2, res, nil, IndexFor(reg))
	ixa, fa := a.searchIndex()
	ixb, fb := b.searchIndex()
	if ixa != ixb || fa == nil || fa != fb {
		t.Fatalf("turns of one resolution: index shared %v, filters %p %p; want one shared filter", ixa == ixb, fa, fb)
	}
	for i := range ixa.Len() {
		tool, _ := a.Lookup(ixa.Name(i))
		if want := tool.Name != "" && tool.Deferred; fa.Has(i) != want {
			t.Errorf("%s: admitted %v, deferred in the turn %v", ixa.Name(i), fa.Has(i), want)
		}
	}
}
