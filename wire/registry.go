package wire

// The replies about the registry: registry.info, registry.budget and
// registry-diff.

// RegistryRequest asks for the live registry. Without ToolLimit the
// reply lists every tool (a registry of 10,000 tools is some 2 MB of
// names and descriptions); with it, the page [ToolOffset,
// ToolOffset+ToolLimit) of the tools ToolFilter keeps (a case-insensitive
// substring of the name; a filter equal to a tool's name keeps that tool
// alone), and ToolCount says how many it keeps; the name lists and
// presets of a page name only the page's tools.
type RegistryRequest struct {
	ToolOffset int    `json:"tool_offset,omitempty"`
	ToolLimit  int    `json:"tool_limit,omitempty"`
	ToolFilter string `json:"tool_filter,omitempty"`
}

// MaxRegistryPage is the largest tool_limit of a registry request.
const MaxRegistryPage = 1000

// RegistryInfo is the live registry: its tools (a page of them when the
// request named a tool_limit) without schemas, its lists, presets and
// profiles.
type RegistryInfo struct {
	Version              string              `json:"version"`
	ToolCount            int                 `json:"tool_count"`
	Tools                []RegistryTool      `json:"tools"`
	DefaultTools         []string            `json:"default_tools"`
	ResidentTools        []string            `json:"resident_tools"`
	DeferredDefaultTools []string            `json:"deferred_default_tools"`
	Presets              map[string][]string `json:"presets"`
	Profiles             []Profile           `json:"profiles"`
}

// RegistryTool is one registry tool, without its schema.
type RegistryTool struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Available   bool     `json:"available"`
	Deferred    bool     `json:"deferred"`
	Permission  string   `json:"permission,omitempty"`
	Native      []string `json:"native,omitempty"`
}

// Profile is an agent profile of the registry.
type Profile struct {
	Name    string   `json:"name"`
	Tools   []string `json:"tools,omitempty"`
	Preset  string   `json:"preset,omitempty"`
	Allowed []string `json:"allowed,omitempty"`
}

// BudgetTable is the live registry's per-turn token table, measured with
// a real tokenizer (Real) beside the engine's estimate (Estimate).
type BudgetTable struct {
	// RegistryVersion is the version of the registry measured.
	RegistryVersion string `json:"registry_version"`
	// Encoding names the measuring stick's BPE encoding.
	Encoding string `json:"encoding"`
	// Tools is the number of tools in the default resolution.
	Tools int `json:"tools"`
	// ResidentTools is the number of tools in the provider array with
	// deferral.
	ResidentTools int `json:"resident_tools"`
	// Deferred lists the catalog names with deferral, in order; the API
	// reply names the first 128 of them and DeferredCount counts all.
	Deferred      []string `json:"deferred"`
	DeferredCount int      `json:"deferred_count"`
	// WithoutDeferral is the provider array when every default tool is
	// resident: the rendered Anthropic tools array of the whole resolution.
	WithoutDeferral TokenCount `json:"without_deferral"`
	// WithDeferral is the provider array with deferral.
	WithDeferral TokenCount `json:"with_deferral"`
	// Catalog is the catalog text with deferral, as sent.
	Catalog TokenCount `json:"catalog"`
	// CatalogGrouped says the catalog lists namespaces with counts, the
	// deferred names being over the registry's catalog budget.
	CatalogGrouped bool `json:"catalog_grouped,omitempty"`
	// ReductionPercent is the percentage by which deferral shrinks the
	// provider array, by the real tokenizer:
	// 100 * (1 - WithDeferral/WithoutDeferral).
	ReductionPercent float64 `json:"reduction_percent"`
	// NetReductionPercent is the same, counting the catalog against
	// deferral: 100 * (1 - (WithDeferral+Catalog)/WithoutDeferral), real
	// tokenizer.
	NetReductionPercent float64 `json:"net_reduction_percent"`
	// EstimatedReductionPercent is ReductionPercent computed from the
	// estimates.
	EstimatedReductionPercent float64 `json:"estimated_reduction_percent"`
	// Unreachable lists default tools that are neither in the provider
	// array nor in the catalog; it must be empty. Nil when all are
	// reachable.
	Unreachable []string `json:"unreachable,omitempty"`
}

// TokenCount is a token count by the engine's estimate and by a real
// tokenizer.
type TokenCount struct {
	// Estimate is the cheap estimator's figure.
	Estimate int `json:"estimate"`
	// Real is the measuring stick's figure (a count on the actual
	// payload).
	Real int `json:"real"`
}

// RegistryImpact is what pushing a candidate registry would change.
type RegistryImpact struct {
	Diff          RegistryDiff `json:"diff"`
	Sessions      int          `json:"sessions"`
	PrefixChanged []string     `json:"prefix_changed,omitempty"`
	// ReferencesChanged are those of PrefixChanged whose tools prefix
	// holds but whose history's referenced definitions change.
	ReferencesChanged []string         `json:"references_changed,omitempty"`
	Checkpoints       int              `json:"checkpoints"`
	CheckpointLosses  []CheckpointLoss `json:"checkpoint_losses,omitempty"`
}

// RegistryDiff compares a candidate registry (To) with the live one
// (From).
type RegistryDiff struct {
	// From and To are the two registry versions.
	From string `json:"from"`
	To   string `json:"to"`
	// Added and Removed are tool names, in the registry's order.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Changed are the tools of both whose contract bytes differ.
	Changed []ToolChange `json:"changed,omitempty"`
	// Embeddings are the tools of both whose embedding (the semantic
	// path) is added, removed or changed, in the candidate's order. An
	// embedding only ranks tool_search queries that carry a vector: it is
	// not part of the contract, so these tools change no contract hash,
	// tools prefix or checkpoint; the registry is still another one, to
	// push.
	Embeddings []string `json:"embeddings,omitempty"`
	// AllHashesChange is true when the registry versions differ: the
	// version is hashed into every contract hash, so every session's
	// contract hash changes even where its tools do not. A channel
	// policy is not hashed in: it changes contracts only through the
	// tools it withholds.
	AllHashesChange bool `json:"all_hashes_change"`
	// PolicyFrom and PolicyTo are the channel policy versions ("" none).
	PolicyFrom string `json:"policy_from,omitempty"`
	PolicyTo   string `json:"policy_to,omitempty"`
	// DefaultsChange is true when DEFAULT_TOOLS expand to other tools
	// (names, order or contract bytes).
	DefaultsChange bool `json:"defaults_change"`
	// Presets and Profiles are those, sorted, whose expansion changes
	// (other tools, order or contract bytes), or that exist in one
	// registry only.
	Presets  []string `json:"presets,omitempty"`
	Profiles []string `json:"profiles,omitempty"`
}

// ToolChange is a tool of both registries whose contract bytes differ;
// Fields names the parts that differ, in a fixed order: description,
// parameters, permission, available, deferred, native.
type ToolChange struct {
	Name   string   `json:"name"`
	Fields []string `json:"fields"`
}

// CheckpointLoss is a session whose last checkpoint would lose tools
// on resume under the candidate registry.
type CheckpointLoss struct {
	Session string   `json:"session"`
	Lost    []string `json:"lost"`
}
