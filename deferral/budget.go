package deferral

import (
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// Costs the estimator adds around the per-tool estimate
// (resolver.EstimateToolTokens), checked against the tokenizer by tests.
const (
	// arrayWrapperTokens is the one-off cost of a non-empty tools array:
	// the brackets and the cache_control marker on the last tool.
	arrayWrapperTokens = 9
	// catalogHeaderTokens is the cost of CatalogHeader and its newline
	// (checked against the tokenizer by a test).
	catalogHeaderTokens = 8
	// toolWrapperTokens is resolver.ToolWrapperTokens.
	toolWrapperTokens = resolver.ToolWrapperTokens
)

// Budget is the estimated token cost of one dispatch (wire.Budget, the
// reply's): Resident of the provider tools array, Catalog of the catalog
// text (0 when it is empty), Total their sum, ResidentTools the tools in
// the array (resident plus loaded deferred ones), DeferredTools the names
// in the catalog.
type Budget = wire.Budget

// EstimateTool estimates what a tool costs when its full schema is in the
// provider array: its description, its parameter schema and a small
// wrapper, all counted (resolver.EstimateToolTokens). It uses no
// tokenizer.
func EstimateTool(t resolver.Tool) int { return resolver.EstimateToolTokens(&t) }

// EstimateDeferred estimates what a deferred tool costs in the catalog: its
// bare name plus a newline, never its description.
func EstimateDeferred(name string) int {
	return nameTokens(name) + 1
}

// Estimate estimates both halves of a split: the provider array
// (EstimateTool per tool plus the array wrapper) and the catalog text
// (EstimateDeferred per name plus the header line, or the estimate of the
// grouped catalog RenderCatalog wrote).
func Estimate(s Split) Budget {
	b := Budget{ResidentTools: len(s.Provider), DeferredTools: len(s.Catalog)}
	if len(s.Provider) > 0 {
		b.Resident = arrayWrapperTokens
		for i := range s.Provider {
			b.Resident += EstimateTool(s.Provider[i])
		}
	}
	switch {
	case s.CatalogGrouped || s.catalogFixed:
		b.Catalog = s.catalogTokens
	case len(s.Catalog) > 0:
		b.Catalog = catalogHeaderTokens
		for _, name := range s.Catalog {
			b.Catalog += EstimateDeferred(name)
		}
	}
	b.Total = b.Resident + b.Catalog
	return b
}

// nameTokens estimates the tokens of a tool name (resolver.NameTokens).
func nameTokens(name string) int { return resolver.NameTokens(name) }
