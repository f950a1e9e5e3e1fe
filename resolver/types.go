// Package resolver holds the live tool registry and expands a session's
// stored intent into a concrete, ordered tool list.
//
// The registry (tools, presets, agent profiles, DEFAULT_TOOLS,
// RESIDENT_TOOLS, DEFERRED_DEFAULT_TOOLS) is data, loaded from a JSON file or
// a KV bucket, never Go literals. Expansion is deterministic: the same
// intent against the same registry version yields the same tools in the same
// order, de-duplicated, and the same bytes when rendered. No Go map
// iteration reaches any output order.
//
// The package imports only the intent leaf and the wire vocabulary from
// the project; it is pure and safe for concurrent use once a Registry is
// built (a *Registry is immutable).
package resolver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/wire"
)

// WebSearch is the name of the web-search tool that the web_search overlay
// adds. It is never part of the defaults.
const WebSearch = "web_search"

// ToolSearch is the name of the tool that loads deferred tools. It is never
// deferred.
const ToolSearch = "tool_search"

// Tool is one entry of the registry.
type Tool struct {
	// Name is the unique tool name: letters, digits, '_' and '-', starting
	// with a letter, at most 64 bytes (toolname.Pattern).
	Name string `json:"name"`
	// Description is sent to the provider with the schema when resident.
	Description string `json:"description"`
	// Parameters is the JSON Schema of the tool's input, stored in
	// canonical (compact, key-sorted) form once loaded.
	Parameters json.RawMessage `json:"parameters"`
	// Available reports whether the tool can run in this deployment; tools
	// that are not available never reach an expansion.
	Available bool `json:"available"`
	// Permission names the permission wrapper execution goes through
	// ("read", "write", "exec", "network", ...). Part of the contract.
	Permission string `json:"permission,omitempty"`
	// Deferred is the deferral mark: true when the tool is not in
	// RESIDENT_TOOLS. It is computed at load time, never read from
	// the file.
	Deferred bool `json:"-"`
	// Native holds, per provider, the provider's built-in tool that the
	// rendering for that provider emits instead of a function (seed §8:
	// e.g. Anthropic's server web search, OpenAI's web_search). Zero when
	// the registry does not opt in: the tool renders as a function.
	Native Native `json:"native,omitzero"`
	// Embedding is the tool's vector from the operator's embedding model
	// (the optional semantic path), nil when the registry gives
	// none. It only ranks tool_search queries that carry a query vector:
	// it is not part of the tool's contract (ToolHash), never rendered for
	// a provider, and not encoded with the tool (only the registry's
	// canonical form carries it). Shared with the registry: read-only.
	Embedding []float32 `json:"-"`
}

// Native is a tool's provider-native forms, each a JSON object in
// canonical form (compact, keys sorted), or nil when the provider renders
// the tool as a function: the API's wire.ToolNative.
type Native = wire.ToolNative

// Profile is an agent profile. When a session follows its profile (intent
// enabled unset), the profile's tools decide the base list.
type Profile struct {
	// Name of the profile.
	Name string `json:"name"`
	// Tools is the profile's explicit tool list; nil means "no opinion"
	// (fall through to the registry defaults). An empty, non-nil list means
	// no tools.
	Tools []string `json:"tools,omitempty"`
	// Preset, when set and Tools is nil, expands the named preset.
	Preset string `json:"preset,omitempty"`
	// Allowed, when set, filters the defaults (it filters the
	// defaults, not the full set).
	Allowed []string `json:"allowed,omitempty"`
}

// Intent is what a session stores about its tools.
//
// Use intent.Intent; this alias keeps outside callers compiling.
type Intent = intent.Intent

// OverrideKind says which form a per-turn override takes.
//
// Use intent.OverrideKind.
type OverrideKind = intent.OverrideKind

// The override kinds.
//
// Use intent.OverrideNone, OverrideEmpty, OverrideIntent and
// OverrideNames.
const (
	OverrideNone   = intent.OverrideNone
	OverrideEmpty  = intent.OverrideEmpty
	OverrideIntent = intent.OverrideIntent
	OverrideNames  = intent.OverrideNames
)

// Override is a per-turn override.
//
// Use intent.Override.
type Override = intent.Override

// Request is one resolution request: a per-turn override, the session's
// stored intent and the agent profile the turn runs under.
type Request struct {
	// Override is the per-turn override; OverrideNone means none.
	Override Override `json:"override,omitzero"`
	// Session is the session's stored intent.
	Session Intent `json:"session,omitzero"`
	// Profile names the agent profile; "" means no profile.
	Profile string `json:"profile,omitempty"`
	// Channel names the channel the tools are for; the registry's
	// channel policy narrows the result for it. "" is a request without a
	// channel, which the policy's "*" rule governs.
	Channel string `json:"channel,omitempty"`
}

// Source values of a Resolution: which level of the priority chain
// decided the tool set.
const (
	SourceOverrideEmpty  = "override-empty"
	SourceOverrideNames  = "override-names"
	SourceOverrideIntent = "override-intent"
	SourceSessionIntent  = "session-intent"
	SourceProfile        = "profile"
	SourceDefaults       = "defaults"
)

// Resolution is the expanded tool set of one request. A *Resolution
// returned by Registry.Resolve is shared and immutable: callers must not
// modify it or the slices it holds.
type Resolution struct {
	// Tools is ordered, de-duplicated and holds only available tools, each
	// with its deferral mark set.
	Tools []Tool `json:"tools"`
	// Unknown lists the explicitly requested names (picked or override
	// names) that are not in the registry or not available, in request
	// order, each once. Nil when there are none.
	Unknown []string `json:"unknown,omitempty"`
	// Source is the rule that decided: one of the Source* constants.
	Source string `json:"source"`
	// RegistryVersion is the version of the registry that resolved it.
	RegistryVersion string `json:"registry_version"`
	// ContractHash is ContractHash(RegistryVersion, Tools). A channel
	// policy is not hashed in by itself: it changes a contract only
	// through the tools it withholds, so checkpoint entries add up to it.
	ContractHash string `json:"contract_hash"`
	// Namespaces are the namespaces (MCP servers) of the tools, sorted by
	// name, with their descriptions; nil when no tool is namespaced.
	Namespaces []Namespace `json:"namespaces,omitempty"`
	// Policy is the version of the channel policy that narrowed the set;
	// "" when the registry has none.
	Policy string `json:"policy,omitempty"`
	// Withheld lists, in order, the tools the expansion selected that the
	// channel policy removed (a deny pattern, the maximum permission or a
	// deny decision). Nil when none.
	Withheld []string `json:"withheld,omitempty"`
	// CatalogMaxTokens is the registry's catalog budget.
	CatalogMaxTokens int `json:"-"`

	// digests are the SHA-256 digests of Tools, in order, as the contract
	// hash was computed from them (Registry.Resolve); nil for a
	// resolution built otherwise.
	digests []byte
}

// ToolHashAt returns ToolHash(res.Tools[i]). For a resolution from
// Registry.Resolve it reads the digest the contract hash was computed
// with instead of hashing the tool again (a checkpoint lists every tool's
// hash at every turn end).
func (res *Resolution) ToolHashAt(i int) string {
	if len(res.digests) == len(res.Tools)*sha256.Size {
		return hex.EncodeToString(res.digests[i*sha256.Size : (i+1)*sha256.Size])
	}
	return ToolHash(res.Tools[i])
}

// Names returns the names of the resolved tools, in order, in a new slice.
func (res *Resolution) Names() []string {
	out := make([]string, len(res.Tools))
	for i := range res.Tools {
		out[i] = res.Tools[i].Name
	}
	return out
}

// Explanation says why one tool is or is not in a request's tool set.
// Rule is a short stable identifier, Detail a human-readable
// sentence; both are deterministic for a given request and registry.
type Explanation struct {
	// Tool is the explained tool name.
	Tool string `json:"tool"`
	// Included reports whether the tool is in Resolve(req).Tools.
	Included bool `json:"included"`
	// Rule names the deciding rule, e.g. "override-empty",
	// "disabled-by-session", "not-in-preset:research", "web_search-overlay",
	// "profile:coder", "default-tools", "not-in-defaults", "unavailable",
	// "unknown-tool", "enabled=false", "picked".
	Rule string `json:"rule"`
	// Detail explains the rule in one sentence.
	Detail string `json:"detail"`
}
