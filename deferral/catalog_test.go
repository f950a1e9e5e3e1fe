package deferral

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
)

// The catalog lists bare names while they fit the budget, and above it
// the namespaces with counts and one-line summaries; it stays bounded
// however many tools are deferred, and says how many are left out.
func TestRenderCatalogBounded(t *testing.T) {
	reg := tenKRegistry(t)
	res := resolve(t, reg, defaultSession())
	s := SplitResolution(res, nil)
	if !s.CatalogGrouped || len(s.Catalog) < 10_000 {
		t.Fatalf("10k deferred tools: grouped %v, %d names", s.CatalogGrouped, len(s.Catalog))
	}
	real := mustCount(t, s.CatalogText)
	if real > reg.CatalogMaxTokens()*115/100 {
		t.Errorf("catalog of %d deferred tools is %d tokens, budget %d", len(s.Catalog), real, reg.CatalogMaxTokens())
	}
	for _, want := range []string{"playwright_browser\n", "- airtable (10 tools): Airtable bases, tables and records.\n", "tool_search", "more entries"} {
		if !strings.Contains(s.CatalogText, want) {
			t.Errorf("grouped catalog lacks %q:\n%.600s", want, s.CatalogText)
		}
	}
	// Under the budget: the names form, exactly CatalogText.
	names, grouped, _ := RenderCatalog([]string{"a_tool", "mcp__x__b"}, nil, 2000)
	if grouped || names != CatalogText([]string{"a_tool", "mcp__x__b"}) {
		t.Errorf("small catalog = %q, grouped %v", names, grouped)
	}
	// Every budget is respected by the estimate, and the text is a pure
	// function of its input.
	ns := res.Namespaces
	for _, budget := range []int{100, 300, 1000, 5000} {
		text, g, est := RenderCatalog(s.Catalog, ns, budget)
		again, _, _ := RenderCatalog(s.Catalog, ns, budget)
		if !g || est > budget || text != again {
			t.Errorf("budget %d: grouped %v, estimate %d, deterministic %v", budget, g, est, text == again)
		}
	}
	if text, _, _ := RenderCatalog(nil, ns, 100); text != "" {
		t.Errorf("empty catalog rendered %q", text)
	}
}

// In a turn, a discovered tool leaves Catalog but
// the catalog text sent stays the turn's (the system prompt keeps its
// bytes), also in the next turn, frozen with it loaded; the estimate
// follows the text sent.
func TestTurnGroupedCatalog(t *testing.T) {
	reg := tenKRegistry(t)
	turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg))
	before := turn.Request()
	res, err := turn.Search(SearchRequest{Query: "list airtable records", MaxResults: 1})
	if err != nil || len(res.Loaded) != 1 {
		t.Fatalf("search: %+v, %v", res, err)
	}
	ns, _, _ := resolver.NamespaceOf(res.Loaded[0])
	after := turn.Request()
	count := func(text string) string {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "- "+ns+" (") {
				return l
			}
		}
		return ""
	}
	if after.CatalogText != before.CatalogText || !after.CatalogGrouped {
		t.Errorf("the catalog text changed inside the turn: line of %s %q -> %q", ns, count(before.CatalogText), count(after.CatalogText))
	}
	next := FreezeIndexed(2, resolve(t, reg, defaultSession()), res.Loaded, IndexFor(reg)).Request()
	if next.CatalogText != before.CatalogText {
		t.Errorf("next turn: line of %s changed: %q -> %q", ns, count(before.CatalogText), count(next.CatalogText))
	}
	if slices.Contains(after.Catalog, res.Loaded[0]) || Estimate(after).Catalog <= 0 {
		t.Errorf("loaded tool still in the catalog, or no estimate")
	}
}
