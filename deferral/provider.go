package deferral

import (
	"encoding/json"
	"slices"

	"github.com/toolintent/engine/resolver"
)

// Provider is one row of the provider table (R30): how a turn's tools
// reach one provider value of a request. A new provider mode is one row
// of the table; the engine (service) and the tools that measure modes
// read the rows, never switch on the name.
type Provider struct {
	// Name is the provider value of requests ("anthropic", ...).
	Name string
	// Native reports provider-native deferral: the array holds every tool
	// of the turn once, deferred ones marked, and never changes within a
	// turn; a catalog row (Native false) holds the resident and loaded
	// tools, and a discovered tool is appended after the frozen array.
	Native bool
	// Mode is the row's deferral mode (NativeContext, ModeTable).
	Mode Mode
	// Render renders the provider tools array: of the split's provider
	// tools for a catalog row, of every tool of the resolution for a
	// native row; namespaces are the resolution's. Byte-deterministic (R9).
	Render func(tools []resolver.Tool, namespaces []resolver.Namespace) []byte
	// SearchOutput renders tool_search's result; nil means the engine's
	// own (the full schemas as JSON, SearchResult.Output). deferred are
	// the deferred tools the search found, callID the provider's id of
	// the tool_search call.
	SearchOutput func(sr SearchResult, deferred []resolver.Tool, res *resolver.Resolution, callID string) json.RawMessage
}

// DefaultProvider is the provider of a request that names none.
const DefaultProvider = "anthropic"

// providers is the table, in the order ProviderNames lists it.
var providers = [...]Provider{
	{Name: "anthropic", Mode: ModeEngine,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace) []byte { return resolver.RenderAnthropic(tools) }},
	{Name: "openai", Mode: ModeEngine,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace) []byte { return resolver.RenderOpenAI(tools) }},
	{Name: "anthropic-native", Native: true, Mode: ModeAnthropicNative,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace) []byte {
			return resolver.RenderAnthropicNative(tools, "")
		},
		SearchOutput: toolReferences},
	// As anthropic-native, with Anthropic's server search tool in place of
	// the engine's tool_search: Anthropic runs the searches.
	{Name: "anthropic-native-server", Native: true, Mode: ModeAnthropicNative,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace) []byte {
			return resolver.RenderAnthropicNative(tools, resolver.AnthropicSearchBM25)
		},
		SearchOutput: toolReferences},
	{Name: "openai-native", Native: true, Mode: ModeOpenAINative,
		Render: resolver.RenderOpenAINative,
		SearchOutput: func(_ SearchResult, deferred []resolver.Tool, res *resolver.Resolution, callID string) json.RawMessage {
			return resolver.RenderToolSearchOutput(callID, deferred, res.Namespaces)
		}},
}

// LookupProvider returns the row named name; "" is DefaultProvider. ok is
// false for a name not in the table.
func LookupProvider(name string) (Provider, bool) {
	if name == "" {
		name = DefaultProvider
	}
	for _, p := range providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// ProviderNames returns the names of the table's rows, in a fixed order,
// in a new slice.
func ProviderNames() []string {
	out := make([]string, len(providers))
	for i := range providers {
		out[i] = providers[i].Name
	}
	return out
}

// Output renders tool_search's result for p: the row's SearchOutput over
// the deferred tools sr found, or the engine's own.
func (p Provider) Output(sr SearchResult, res *resolver.Resolution, callID string) json.RawMessage {
	if p.SearchOutput == nil {
		return sr.Output()
	}
	var deferred []resolver.Tool
	for _, t := range sr.Tools {
		if t.Deferred {
			deferred = append(deferred, t)
		}
	}
	return p.SearchOutput(sr, deferred, res, callID)
}

// toolReferences is Anthropic's native search result: tool_reference
// blocks naming the deferred tools found, with a note when none is new.
func toolReferences(sr SearchResult, deferred []resolver.Tool, _ *resolver.Resolution, _ string) json.RawMessage {
	names := make([]string, len(deferred))
	for i, t := range deferred {
		names[i] = t.Name
	}
	note := sr.Note
	if len(names) == 0 && note == "" {
		note = "the tools found are already loaded; call them directly"
	}
	return resolver.RenderToolReferences(names, note)
}

// nativeModes returns the first native row of each mode, in table order:
// the native ways a mode table compares.
func nativeModes() []Provider {
	var out []Provider
	for _, p := range providers {
		if p.Native && !slices.ContainsFunc(out, func(q Provider) bool { return q.Mode == p.Mode }) {
			out = append(out, p)
		}
	}
	return out
}
