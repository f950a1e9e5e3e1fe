// Package deferral splits a resolved tool set into what reaches the provider
// and what is only named in the deferred-tool catalog, freezes that set for a
// turn, lets tool_search load deferred tools inside the turn, and estimates
// what each half costs in tokens (seed §7).
//
// Available is not resident. Every tool of a resolution reaches a request in
// exactly one of two forms:
//
//   - resident, or deferred and already loaded: its full description and
//     parameter schema are in the provider tools array (Split.Provider);
//   - deferred and not loaded: one bare name line in the catalog
//     (Split.Catalog, rendered by CatalogText).
//
// A disabled tool is not in the resolution and therefore in neither. The
// tool_search tool is always resident: the resolver never marks it deferred
// (guard 1) and SplitTools ignores a deferral mark on it (guard 2).
//
// A Turn (Freeze) holds one turn's frozen copy of the resolved tools and the
// loaded set. Only Turn.Search (tool_search) changes the loaded set; the next
// Turn.Request then carries the loaded tools' real schemas.
//
// The budget estimator (EstimateTool, EstimateDeferred, Estimate) is cheap
// and uses no tokenizer; Count and Tokenizer are the measuring stick (a real
// BPE tokenizer, cl100k_base) used by tests and by the budget command, and
// Table puts both side by side for the default session.
//
// The package imports only resolver from the project.
package deferral
