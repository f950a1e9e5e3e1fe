package deferral

import (
	"github.com/toolintent/engine/resolver"
)

// Mode is how deferred tools reach a provider.
type Mode string

const (
	// ModeEngine is the engine's catalog: deferred names in the system
	// prompt, loaded tools appended to the provider array.
	ModeEngine Mode = "engine"
	// ModeAnthropicNative sends every tool to Anthropic, deferred ones
	// with defer_loading; a search answers with tool_reference blocks.
	ModeAnthropicNative Mode = "anthropic-native"
	// ModeOpenAINative sends every tool to OpenAI, deferred ones with
	// defer_loading inside namespaces; a search answers with a
	// tool_search_output item.
	ModeOpenAINative Mode = "openai-native"
)

// Estimated context cost of the metadata OpenAI shows for a deferred
// function or a namespace: its name and description, plus this wrapper.
const nativeEntryTokens = 4

// NativeContext returns, for a native mode, the catalog text to put in
// the system prompt and the estimated context cost of a turn at its start
// : Resident is the tools whose definitions enter the context (those
// not deferred, tool_search among them); Catalog is what stands for the
// deferred ones. For Anthropic the catalog is the engine's, of every
// deferred tool, and it does not change within the turn (a loaded tool
// arrives through a tool_reference in the messages, after the cached
// prefix); OpenAI shows the name and description of each deferred function
// outside namespaces and of each namespace itself, and no catalog is
// needed. Loaded tools' definitions, inserted into the messages by the
// provider, are not counted here.
func NativeContext(mode Mode, res *resolver.Resolution) (string, Budget) {
	var b Budget
	if res == nil {
		return "", b
	}
	var deferred []string
	for i := range res.Tools {
		t := &res.Tools[i]
		if t.Deferred {
			deferred = append(deferred, t.Name)
			continue
		}
		b.ResidentTools++
		b.Resident += resolver.EstimateToolTokens(t)
	}
	if b.ResidentTools > 0 {
		b.Resident += arrayWrapperTokens
	}
	b.DeferredTools = len(deferred)
	text := ""
	switch mode {
	case ModeOpenAINative:
		for _, e := range nativeEntries(res) {
			b.Catalog += resolver.NameTokens(e.name) + resolver.EstimateTextTokens(e.description) + nativeEntryTokens
		}
	default:
		text, _, b.Catalog = RenderCatalog(deferred, res.Namespaces, res.CatalogMaxTokens)
	}
	b.Total = b.Resident + b.Catalog
	return text, b
}

// nativeEntry is one entry of the metadata OpenAI's native tool search
// keeps for the deferred tools: a namespace or a tool outside any.
type nativeEntry struct{ name, description string }

// nativeEntries lists res's deferred tools as native tool search holds
// them: each namespace once (at its first deferred tool, with the
// registry's description of it), and each deferred tool outside a
// namespace, in the resolution's order.
func nativeEntries(res *resolver.Resolution) []nativeEntry {
	var out []nativeEntry
	seen := map[string]bool{}
	for i := range res.Tools {
		t := &res.Tools[i]
		if !t.Deferred {
			continue
		}
		ns, _, ok := resolver.NamespaceOf(t.Name)
		if !ok {
			out = append(out, nativeEntry{t.Name, t.Description})
			continue
		}
		if seen[ns] {
			continue
		}
		seen[ns] = true
		desc := ""
		for _, n := range res.Namespaces {
			if n.Name == ns {
				desc = n.Description
			}
		}
		out = append(out, nativeEntry{ns, desc})
	}
	return out
}
