package deferral

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"

	"github.com/toolintent/engine/resolver"
)

// What each provider caches of the tools a request sends, by its
// documented rule (docs/semantics.md#prompt-cache). Every prompt-cache
// figure of the engine (a view's prefix_hash and references_hash, the
// history's prefix changes the inspector shows as cache breaks, registry
// diff's prefix changes and the prompt-cache benchmark) is computed from
// CachedPrefix and References, so they agree on any change:
//
//   - Anthropic with native deferral: "Deferred tools are not included in
//     the system-prompt prefix"; a discovered tool's definition is
//     expanded inline at its tool_reference in the history. The prefix is
//     the tools that are not deferred, through the cache breakpoint; the
//     definitions of the tools the history references are cached where
//     their references sit (References).
//   - OpenAI with native deferral: the model sees, at the start of a
//     request, the name and description of a deferred function, or only
//     the name and description of a namespace whose functions are
//     deferred; discovered tools are injected at the end of the context.
//     The prefix is what the model sees: every tool that is not deferred,
//     a deferred top-level function's name and description, a namespace's
//     name and description; the definitions a tool_search_output carries
//     are the backend's own history item.
//   - The engine's catalog (anthropic-engine, openai-engine): the array
//     is the resident tools and the loaded ones, all defined, and the
//     prefix is the array as sent (the catalog text is reported apart).

// CachedPrefix returns the part of the tools array p renders that the
// provider caches as the request's tools prefix: for a native row, of
// tools (every tool of the turn, as the rendering has them) and
// namespaces; for a catalog row, the rendering of tools (the split's
// provider tools) with frozen. Equal bytes, equal prefix; the bytes are
// deterministic but for the OpenAI native row are a canonical form
// of what the model sees, not the bytes sent.
func (p Provider) CachedPrefix(tools []resolver.Tool, namespaces []resolver.Namespace, frozen int) []byte {
	switch p.Mode {
	case ModeAnthropicNative:
		return p.Render(notDeferred(tools), namespaces, frozen)
	case ModeOpenAINative:
		return openAIVisible(tools, namespaces)
	}
	return p.Render(tools, namespaces, frozen)
}

// PrefixHash is the sha256, in hex, of CachedPrefix.
func (p Provider) PrefixHash(tools []resolver.Tool, namespaces []resolver.Namespace, frozen int) string {
	return hashHex(p.CachedPrefix(tools, namespaces, frozen))
}

// ExpandsReferences reports whether the provider expands a discovered
// tool's definition inline at its reference in the history (Anthropic's
// native modes): a change to such a definition breaks the cache from its
// first reference on, though the tools prefix holds.
func (p Provider) ExpandsReferences() bool { return p.Mode == ModeAnthropicNative }

// References returns the definitions, as p expands them, of the tools of
// tools whose names referenced lists (the tools the session's history
// references), in referenced order; nil when p expands no reference or
// none is defined.
func (p Provider) References(tools []resolver.Tool, referenced []string) []byte {
	if !p.ExpandsReferences() || len(referenced) == 0 {
		return nil
	}
	var sel []resolver.Tool
	for _, n := range referenced {
		if i := slices.IndexFunc(tools, func(t resolver.Tool) bool { return t.Name == n }); i >= 0 {
			sel = append(sel, tools[i])
		}
	}
	if len(sel) == 0 {
		return nil
	}
	return resolver.RenderAnthropicNative(sel, "")
}

// ReferenceDefs returns, for a provider that expands references, the
// sha256 of each referenced tool's definition as p expands it, by name;
// nil otherwise. Two points of a session break the cache at a reference
// when a tool referenced at both has another definition (ReferencesBroke):
// a tool referenced anew is appended, the cache holds.
func (p Provider) ReferenceDefs(tools []resolver.Tool, referenced []string) map[string]string {
	if !p.ExpandsReferences() || len(referenced) == 0 {
		return nil
	}
	out := make(map[string]string, len(referenced))
	for _, n := range referenced {
		if i := slices.IndexFunc(tools, func(t resolver.Tool) bool { return t.Name == n }); i >= 0 {
			out[n] = hashHex(resolver.RenderAnthropicNative(tools[i:i+1], ""))
		}
	}
	return out
}

// ReferencesBroke reports whether a tool of both a and b (ReferenceDefs)
// has another definition in b.
func ReferencesBroke(a, b map[string]string) bool {
	for n, h := range a {
		if g, ok := b[n]; ok && g != h {
			return true
		}
	}
	return false
}

// ReferencesHash is the sha256, in hex, of References; "" when there are
// none. It changes when a tool is referenced anew (appended: the cache
// holds) and when a referenced definition changes (a break): compare
// points with ReferenceDefs.
func (p Provider) ReferencesHash(tools []resolver.Tool, referenced []string) string {
	b := p.References(tools, referenced)
	if b == nil {
		return ""
	}
	return hashHex(b)
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// notDeferred returns the tools that are not deferred, in order.
func notDeferred(tools []resolver.Tool) []resolver.Tool {
	out := make([]resolver.Tool, 0, len(tools))
	for _, t := range tools {
		if !t.Deferred {
			out = append(out, t)
		}
	}
	return out
}

// visible is one entry of what the OpenAI model sees of an array at the
// start of a request.
type visible struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Tools       []visible       `json:"tools,omitempty"`
}

// openAIVisible is the canonical form of what the model sees of
// RenderOpenAINative(tools, namespaces): in the rendering's order, the
// functions outside namespaces (a deferred one by name and description),
// one entry per namespace (its name and description, and its functions
// that are not deferred), then tool_search.
func openAIVisible(tools []resolver.Tool, namespaces []resolver.Namespace) []byte {
	var out []visible
	var search *visible
	groups := map[string]*visible{}
	var order []string
	for _, t := range tools {
		fn := visible{Type: "function", Name: t.Name, Description: t.Description}
		if !t.Deferred {
			fn.Parameters = t.Parameters
		}
		if t.Name == resolver.ToolSearch {
			fn.Type = "tool_search"
			search = &fn
			continue
		}
		ns, short, ok := resolver.NamespaceOf(t.Name)
		if !ok {
			out = append(out, fn)
			continue
		}
		g := groups[ns]
		if g == nil {
			g = &visible{Type: "namespace", Name: ns}
			for _, n := range namespaces {
				if n.Name == ns {
					g.Description = n.Description
				}
			}
			groups[ns] = g
			order = append(order, ns)
		}
		if !t.Deferred {
			fn.Name = short
			g.Tools = append(g.Tools, fn)
		}
	}
	sort.Strings(order)
	for _, ns := range order {
		out = append(out, *groups[ns])
	}
	if search != nil {
		out = append(out, *search)
	}
	b, _ := json.Marshal(out)
	return b
}
