package deferral

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolintent/engine/resolver"
)

// Provider is one row of the provider table: how a turn's tools
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
	// native row; namespaces are the resolution's. frozen is the number of
	// leading tools that form the turn's frozen array (Split.Frozen): a
	// catalog row keeps its cache breakpoint on the last of them, so a
	// discovery only appends bytes; native rows ignore it. Byte-
	// deterministic.
	Render func(tools []resolver.Tool, namespaces []resolver.Namespace, frozen int) []byte
	// SearchTool is the name of the search tool the row's array holds, the
	// one the catalog text tells the model to load with ("" is
	// resolver.ToolSearch).
	SearchTool string
	// SearchOutput renders tool_search's result; nil means the engine's
	// own (the full schemas as JSON, SearchResult.Output). deferred are
	// the deferred tools the search found, callID the provider's id of
	// the tool_search call.
	SearchOutput func(sr SearchResult, deferred []resolver.Tool, res *resolver.Resolution, callID string) json.RawMessage
}

// DefaultProvider is the provider of a request that names none: the
// Anthropic row, which is provider-native deferral.
const DefaultProvider = "anthropic"

// The provider values name a provider, and its native deferral by default
// : "anthropic" and "openai" render exactly as "anthropic-native" and
// "openai-native"; the engine's catalog, for providers without native
// deferral or backends that cannot send it, is asked for by name with
// "anthropic-engine" and "openai-engine" (earlier, "anthropic" and
// "openai" were the engine's catalog).
func anthropicNative(tools []resolver.Tool, _ []resolver.Namespace, _ int) []byte {
	return resolver.RenderAnthropicNative(tools, "")
}

func openAINative(tools []resolver.Tool, namespaces []resolver.Namespace, _ int) []byte {
	return resolver.RenderOpenAINative(tools, namespaces)
}

func openAIOutput(_ SearchResult, deferred []resolver.Tool, res *resolver.Resolution, callID string) json.RawMessage {
	return resolver.RenderToolSearchOutput(callID, deferred, res.Namespaces)
}

// providers is the table, in the order ProviderNames lists it.
var providers = [...]Provider{
	{Name: "anthropic", Native: true, Mode: ModeAnthropicNative, Render: anthropicNative, SearchOutput: toolReferences},
	{Name: "openai", Native: true, Mode: ModeOpenAINative, Render: openAINative, SearchOutput: openAIOutput},
	{Name: "anthropic-native", Native: true, Mode: ModeAnthropicNative, Render: anthropicNative, SearchOutput: toolReferences},
	// As anthropic-native, with Anthropic's server search tool in place of
	// the engine's tool_search: Anthropic runs the searches, and the
	// catalog names that tool.
	{Name: "anthropic-native-server", Native: true, Mode: ModeAnthropicNative, SearchTool: resolver.AnthropicSearchBM25Name,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace, _ int) []byte {
			return resolver.RenderAnthropicNative(tools, resolver.AnthropicSearchBM25)
		},
		SearchOutput: toolReferences},
	{Name: "openai-native", Native: true, Mode: ModeOpenAINative, Render: openAINative, SearchOutput: openAIOutput},
	// The engine's catalog: resident and loaded tools, a discovery appended
	// after the frozen array, the breakpoint kept on the frozen array.
	{Name: "anthropic-engine", Mode: ModeEngine,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace, frozen int) []byte {
			return resolver.RenderAnthropicFrozen(tools, frozen)
		}},
	{Name: "openai-engine", Mode: ModeEngine,
		Render: func(tools []resolver.Tool, _ []resolver.Namespace, _ int) []byte { return resolver.RenderOpenAI(tools) }},
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

// Context returns, for a native row, the catalog text to put in the
// system prompt and the turn's estimated context cost at its start
// (NativeContext), the catalog naming the row's search tool.
func (p Provider) Context(res *resolver.Resolution) (string, Budget) {
	text, b := NativeContext(p.Mode, res)
	if p.SearchTool != "" && p.SearchTool != resolver.ToolSearch {
		text = strings.Replace(text, "(load with "+resolver.ToolSearch+")", "(load with "+p.SearchTool+")", 1)
	}
	return text, b
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
