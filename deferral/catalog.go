package deferral

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolintent/engine/resolver"
)

// GroupedCatalogHeader starts a catalog that lists namespaces instead of
// names; %d is the number of deferred tools.
const GroupedCatalogHeader = "Deferred tools (load with " + resolver.ToolSearch + "): %d tools, too many to name, listed by server with a count. Search them with a query, or a regex such as ^mcp__github__ for one server's tools."

// Token estimates of the grouped catalog's fixed parts, checked against
// the tokenizer by a test.
const (
	groupedHeaderTokens = 48 // GroupedCatalogHeader, its number and newline
	groupLineTokens     = 4  // "- ", " (N tools): " and the newline, net of the estimate's rounding
	restLineTokens      = 19 // "... and N more entries with M tools: ..."
)

// RenderCatalog renders the catalog of deferred names. While the
// names fit maxTokens (by the estimate) it is CatalogText: each bare name
// on its own line. Above it the catalog stays bounded however many tools
// are deferred: one line per namespace (MCP server) with its count and
// its one-line description, then the other deferred names; and when even
// that exceeds maxTokens, as many lines as fit and a last line counting
// the rest. maxTokens <= 0 means no bound. It returns the text, whether it
// is grouped, and its estimated tokens. The output depends only on the
// arguments.
func RenderCatalog(names []string, namespaces []resolver.Namespace, maxTokens int) (text string, grouped bool, tokens int) {
	if len(names) == 0 {
		return "", false, 0
	}
	tokens = catalogHeaderTokens
	for _, n := range names {
		tokens += EstimateDeferred(n)
		if maxTokens > 0 && tokens > maxTokens {
			break // over the budget: grouped
		}
	}
	if maxTokens <= 0 || tokens <= maxTokens {
		return CatalogText(names), false, tokens
	}

	type group struct {
		name, desc string
		count      int
	}
	var groups []group
	var others []string
	at := map[string]int{}
	last, lastAt := "", -1
	for _, n := range names {
		ns, _, ok := resolver.NamespaceOf(n)
		if !ok {
			others = append(others, n)
			continue
		}
		i := lastAt
		if ns != last { // a server's tools are usually adjacent
			var seen bool
			if i, seen = at[ns]; !seen {
				i = len(groups)
				at[ns] = i
				groups = append(groups, group{name: ns})
			}
			last, lastAt = ns, i
		}
		groups[i].count++
	}
	for i := range groups {
		if j, found := slices.BinarySearchFunc(namespaces, groups[i].name, func(x resolver.Namespace, name string) int { return strings.Compare(x.Name, name) }); found {
			groups[i].desc = oneLine(namespaces[j].Description)
		}
	}
	slices.SortFunc(groups, func(a, b group) int { return strings.Compare(a.name, b.name) })

	var b strings.Builder
	fmt.Fprintf(&b, GroupedCatalogHeader+"\n", len(names))
	tokens = groupedHeaderTokens
	left, leftTools := len(groups)+len(others), len(names)
	full := false
	// Tools outside namespaces first, by name: they are few (the
	// registry's own deferred tools) and each has a line anyway.
	for _, n := range others {
		cost := EstimateDeferred(n)
		if tokens+cost > maxTokens-restLineTokens {
			full = true
			break
		}
		b.WriteString(n)
		b.WriteByte('\n')
		tokens += cost
		left--
		leftTools--
	}
	for _, g := range groups {
		if full {
			break
		}
		line := fmt.Sprintf("- %s (%d tools)", g.name, g.count)
		cost := groupLineTokens + resolver.NameTokens(g.name) + 1
		if g.desc != "" {
			line += ": " + g.desc
			cost += resolver.EstimateTextTokens(g.desc)
		}
		if tokens+cost > maxTokens-restLineTokens {
			break
		}
		b.WriteString(line)
		b.WriteByte('\n')
		tokens += cost
		left--
		leftTools -= g.count
	}
	if left > 0 {
		line := fmt.Sprintf("... and %d more entries with %d tools: search with a query or a regex.\n", left, leftTools)
		b.WriteString(line)
		tokens += restLineTokens
	}
	return b.String(), true, tokens
}

// oneLine keeps the first line of a description.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// SplitResolution splits a resolution for one provider dispatch
// (SplitTools) and renders its catalog bounded by the registry's catalog
// budget, with the resolution's namespaces (RenderCatalog).
func SplitResolution(res *resolver.Resolution, loaded func(name string) bool) Split {
	if res == nil {
		return Split{}
	}
	s := SplitTools(res.Tools, loaded)
	s.renderCatalog(res.Namespaces, res.CatalogMaxTokens)
	return s
}

// renderCatalog sets the catalog text of s, bounded by maxTokens.
func (s *Split) renderCatalog(namespaces []resolver.Namespace, maxTokens int) {
	s.CatalogText, s.CatalogGrouped, s.catalogTokens = RenderCatalog(s.Catalog, namespaces, maxTokens)
}

// SplitInLoadOrder is SplitResolution with the loaded deferred tools
// given in the order they were loaded (aggregate.State.InLoadOrder): the
// provider array holds the resident tools in resolution order, then the
// loaded deferred tools in that order, exactly as a turn frozen with the
// same loaded tools renders its first request (Turn.Request).
// Names that are not deferred tools of res are ignored. As in a turn, the
// catalog text lists every deferred tool of res, loaded or not (it
// changes with the intent and the registry only), and Frozen counts
// the resident tools.
func SplitInLoadOrder(res *resolver.Resolution, loaded []string) Split {
	if res == nil {
		return Split{}
	}
	s := splitTools(res.Tools, nil)
	s.Frozen = len(s.Provider)
	s.fixCatalog(res.Namespaces, res.CatalogMaxTokens)
	if len(loaded) > 0 {
		pos := make(map[string]int, len(res.Tools))
		for i := range res.Tools {
			if _, dup := pos[res.Tools[i].Name]; !dup {
				pos[res.Tools[i].Name] = i
			}
		}
		in := make(map[string]bool, len(loaded))
		for _, name := range loaded {
			i, ok := pos[name]
			if !ok || !s.Classification[i].Deferred || in[name] {
				continue
			}
			in[name] = true
			s.Provider = append(s.Provider, res.Tools[i])
			s.Classification[i].Loaded = true
		}
		if len(in) > 0 {
			catalog := s.Catalog[:0:0]
			for _, name := range s.Catalog {
				if !in[name] {
					catalog = append(catalog, name)
				}
			}
			s.Catalog = catalog
		}
	}
	return s
}

// fixCatalog renders the catalog text of every deferred tool of s, before
// any is loaded: the engine's catalog, the same for every load.
func (s *Split) fixCatalog(namespaces []resolver.Namespace, maxTokens int) {
	s.CatalogText, s.CatalogGrouped, s.catalogTokens = RenderCatalog(s.Catalog, namespaces, maxTokens)
	s.catalogFixed = true
}
