package deferral

import (
	"slices"
	"strings"

	"github.com/toolintent/engine/resolver"
)

// Split is one provider dispatch's view of a resolved tool set.
// Every input tool is in exactly one of Provider and Catalog.
type Split struct {
	// Provider holds the tools whose full schema goes into the provider
	// tools array: first the resident tools (tool_search among them), in
	// resolution order, then the deferred tools that are loaded, in
	// resolution order. Loading a tool therefore never moves a resident
	// one, so the resident part of the array keeps its bytes. The
	// tools share their Parameters bytes with the input; treat them as
	// read-only.
	Provider []resolver.Tool
	// Catalog holds, in resolution order, the names of deferred tools that
	// are not loaded. Render it with CatalogText.
	Catalog []string
	// Classification has one entry per input tool, in resolution order: the
	// resident/deferred classification of this dispatch, kept for
	// inspection.
	Classification []Class
	// CatalogText is the catalog as sent in the system prompt: the bare
	// names (CatalogText), or, above the registry's catalog budget, the
	// namespaces with counts (RenderCatalog); "" when Catalog is empty.
	CatalogText string
	// CatalogGrouped reports that CatalogText lists namespaces, not names.
	CatalogGrouped bool
	// Frozen is the number of leading Provider tools that are resident
	// (Turn.Request, SplitInLoadOrder; 0 in other splits: the whole
	// array): the engine's renderings keep the cache breakpoint on the
	// last of them, so neither a discovery nor a turn boundary moves it.
	Frozen        int
	catalogFixed  bool // CatalogText lists every deferred tool, loaded or not; catalogTokens is its estimate
	catalogTokens int  // estimate of a grouped CatalogText
}

// Class is the classification of one tool in one dispatch.
type Class struct {
	// Name is the tool name.
	Name string `json:"name"`
	// Resident is true when the tool is never deferred: it is in
	// RESIDENT_TOOLS, or it is tool_search. Resident == !Deferred.
	Resident bool `json:"resident"`
	// Deferred is the effective deferral mark (the resolver's mark, except
	// that tool_search is never deferred).
	Deferred bool `json:"deferred"`
	// Loaded is true when the tool is deferred and loaded, so its schema is
	// in the provider array. It is false for resident tools.
	Loaded bool `json:"loaded"`
}

// InProvider reports whether the tool's full schema is in the provider
// tools array in this dispatch; otherwise its name is in the catalog.
func (c Class) InProvider() bool { return c.Resident || c.Loaded }

// SplitTools splits resolved tools for one provider dispatch:
// a tool goes to Provider when it is resident, or deferred and loaded;
// otherwise (deferred and not loaded) its name goes to Catalog. Provider
// holds the resident tools in input order, then the loaded deferred ones in
// input order; Catalog is in input order. tool_search always goes to
// Provider whatever its mark (guard 2).
//
// loaded reports whether a deferred tool is loaded in this session; nil
// means nothing is loaded. Use Set.Has for a fixed set of names. loaded is
// only asked about deferred tools. SplitTools is pure and deterministic: the
// same tools and the same answers from loaded give the same Split.
func SplitTools(tools []resolver.Tool, loaded func(name string) bool) Split {
	if len(tools) == 0 {
		return Split{}
	}
	s := splitTools(tools, loaded)
	s.CatalogText = CatalogText(s.Catalog)
	return s
}

func splitTools(tools []resolver.Tool, loaded func(name string) bool) Split {
	class := make([]Class, len(tools))
	nProvider := 0
	for i := range tools {
		c := Class{Name: tools[i].Name}
		if tools[i].Deferred && tools[i].Name != resolver.ToolSearch {
			c.Deferred = true
			c.Loaded = loaded != nil && loaded(c.Name)
		} else {
			c.Resident = true
		}
		if c.InProvider() {
			nProvider++
		}
		class[i] = c
	}
	s := Split{Classification: class}
	if nProvider > 0 {
		s.Provider = make([]resolver.Tool, 0, nProvider)
	}
	if n := len(tools) - nProvider; n > 0 {
		s.Catalog = make([]string, 0, n)
	}
	loadedAfter := false
	for i := range tools {
		switch {
		case class[i].Resident:
			t := tools[i]
			t.Deferred = false // tool_search carrying a stray mark
			s.Provider = append(s.Provider, t)
		case class[i].Loaded:
			loadedAfter = true
		default:
			s.Catalog = append(s.Catalog, tools[i].Name)
		}
	}
	if loadedAfter {
		for i := range tools {
			if class[i].Loaded {
				s.Provider = append(s.Provider, tools[i])
			}
		}
	}
	return s
}

// CatalogHeader is the first line of a non-empty catalog.
const CatalogHeader = "Deferred tools (load with " + resolver.ToolSearch + "):"

// CatalogText renders the deferred-tool catalog: CatalogHeader, then
// each name on its own line, names only, no descriptions, in the given
// order. It returns "" when names is empty. This is the exact string that
// goes into the system prompt and that the budget counts.
func CatalogText(names []string) string {
	if len(names) == 0 {
		return ""
	}
	n := len(CatalogHeader) + 1
	for _, name := range names {
		n += len(name) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(CatalogHeader)
	b.WriteByte('\n')
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte('\n')
	}
	return b.String()
}

// Set is a small, immutable set of tool names (a loaded set). The zero
// value is the empty set. Set is safe for concurrent use.
type Set struct {
	names []string // sorted, de-duplicated
}

// NewSet returns the set of the given names; duplicates and empty names
// are dropped.
func NewSet(names ...string) Set {
	s := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			s = append(s, n)
		}
	}
	slices.Sort(s)
	return Set{names: slices.Compact(s)}
}

// Has reports whether name is in the set. A method value s.Has is the
// loaded argument of SplitTools.
func (s Set) Has(name string) bool {
	_, ok := slices.BinarySearch(s.names, name)
	return ok
}

// Len returns the number of names in the set.
func (s Set) Len() int { return len(s.names) }

// Names returns the names, sorted, as a fresh slice.
func (s Set) Names() []string { return slices.Clone(s.names) }
