package resolver

import (
	_ "embed" // for the embedded default registry
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolintent/engine/internal/toolname"
)

// Registry is a loaded, validated tool registry: tools with canonical
// parameter schemas and deferral marks, DEFAULT_TOOLS, RESIDENT_TOOLS,
// DEFERRED_DEFAULT_TOOLS, presets and agent profiles, under one version.
//
// A *Registry is immutable once built and safe for concurrent use; its only
// mutable part is an internal, bounded resolution cache guarded by a lock.
// Accessors return copies, so callers cannot change it.
type Registry struct {
	version string
	tools   []Tool
	digests []byte // ToolHash digests, sha256.Size bytes per tool, in tool order
	prefix  []byte // contractPrefix(version)
	index   map[string]int32

	defaults         []int32  // DEFAULT_TOOLS as in the file, unavailable included
	resident         []bool   // per tool: in RESIDENT_TOOLS (tool_search always)
	avail            bitset   // per tool: Available
	residentList     []string // RESIDENT_TOOLS as given or derived
	deferredDefaults []string

	presets      map[string][]int32
	presetNames  []string // sorted
	profiles     map[string]*profileEntry
	profileNames []string // sorted

	webSearch  int32 // index+1 of web_search; 0 when absent (zero Registry is safe)
	toolSearch int32 // index+1 of tool_search; 0 only in a zero Registry

	toolFlag         []int8 // per tool: its own "defer" flag, +1 defer, -1 resident, 0 none
	namespaces       map[string]*Namespace
	namespaceNames   []string // sorted
	autoDefer        AutoDefer
	catalogMaxTokens int
	eligible         bitset  // per tool: auto_defer may defer it
	cost             []int32 // per tool: EstimateToolTokens
	hasNamespaced    bool    // some tool is named mcp__<ns>__<tool>

	policy *Policy // channel_policy; nil without one

	embeddingDim int // the dimension of every tool embedding; 0 when no tool has one

	cache resolveCache
}

type profileEntry struct {
	p       Profile
	tools   []int32 // nil when p.Tools is nil
	allowed []int32 // nil when p.Allowed is empty
}

// Load parses and validates a registry file:
//
//	{
//	  "version": "builtin-2026.12.1",
//	  "tools": [{"name": "read_file", "description": "...", "parameters": {"type": "object", ...},
//	             "available": true, "permission": "read"}, ...],
//	  "default_tools": ["read_file", "tool_search", ...],
//	  "resident_tools": ["read_file", ...],
//	  "deferred_default_tools": ["playwright_browser", ...],
//	  "presets": {"full": [...], "research": [...]},
//	  "profiles": {"coder": {"preset": "coding"}, "researcher": {"tools": [...]},
//	               "assistant": {"allowed": [...]}}
//	}
//
// A tool may carry "native": {"anthropic": {...}, "openai": {...}}, the
// provider's built-in tool that the rendering for that provider emits in
// place of a function (seed §8), e.g. for web_search
// {"anthropic": {"type": "web_search_20250305", "name": "web_search",
// "max_uses": 5}, "openai": {"type": "web_search"}}. Without it a tool
// renders as a function for every provider.
//
// Optional parts: a tool's "defer" (true defers it, false keeps it
// resident, over the lists); "namespaces" {"github": {"description":
// "...", "defer": true}} for the tools named mcp__github__... (the flag
// applies to those without their own); "auto_defer" {"context_window":
// 200000, "max_share": 0.1} defers, per resolution, the largest tools
// without an explicit decision while the resident ones exceed that share;
// "catalog_max_tokens" (default 2000), above which a catalog lists
// namespaces with counts. Every list (default_tools, resident_tools,
// deferred_default_tools, presets, profile tools and allowed) may hold
// name patterns such as "mcp__github__*", expanded in registry order.
//
// "available" defaults to true. "resident_tools" is optional: when absent
// it is default_tools − deferred_default_tools ∪ {tool_search}. A profile
// sets at most one of "tools" and "preset"; "allowed" (which filters the
// defaults) only when it sets neither.
//
// Load rejects: malformed JSON, duplicate object keys, unknown keys,
// duplicate tool names, names not matching ^[A-Za-z][A-Za-z0-9_-]{0,63}$, empty
// descriptions, parameters that are not a JSON Schema object with
// "type":"object" (properties an object of schemas, required naming
// properties), a list naming an unknown tool or naming one twice, a profile
// naming an unknown preset, web_search in default_tools, tool_search missing
// or unavailable or absent from default_tools, a deferred default that is
// not a default, a name in both resident_tools and deferred_default_tools.
// Every problem is reported, joined with errors.Join; each wraps
// ErrInvalidRegistry and names the bad value and the fix, in a fixed order.
//
// Parameter schemas are stored in canonical form (see Canonicalize), so
// bytes and hashes do not depend on the file's formatting. Deferral marks
// are set here: Deferred = not in RESIDENT_TOOLS, and never for tool_search
// (guard 1). Load keeps no reference to data.
func Load(data []byte) (*Registry, error) {
	r, err := build(data)
	if err != nil {
		return nil, fmt.Errorf("load registry: %w", err)
	}
	return r, nil
}

// LoadFile reads and loads the registry file at path.
func LoadFile(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read registry file: %w", err)
	}
	r, err := build(data)
	if err != nil {
		return nil, fmt.Errorf("load registry file %s: %w", path, err)
	}
	return r, nil
}

//go:embed default_registry.json
var defaultRegistryJSON []byte

// DefaultRegistryJSON returns a copy of the embedded default registry file.
func DefaultRegistryJSON() []byte { return slices.Clone(defaultRegistryJSON) }

var defaultRegistry = sync.OnceValue(func() *Registry {
	r, err := Load(defaultRegistryJSON)
	if err != nil {
		// The embedded file is part of the build, not input; a test loads it.
		panic(fmt.Sprintf("resolver: embedded default_registry.json is invalid, fix the file: %v", err))
	}
	return r
})

// Default returns the embedded default registry (default_registry.json),
// loaded once. All callers share the same *Registry.
func Default() *Registry { return defaultRegistry() }

// Version returns the registry version, part of every contract hash.
func (r *Registry) Version() string { return r.version }

// Tool returns the named tool, with its deferral mark.
func (r *Registry) Tool(name string) (Tool, bool) {
	i, ok := r.index[name]
	if !ok {
		return Tool{}, false
	}
	return r.tools[i], true
}

// Tools returns every tool in registry (file) order, in a new slice. The
// Parameters bytes are shared and must not be modified.
func (r *Registry) Tools() []Tool { return slices.Clone(r.tools) }

// Len returns the number of tools in the registry.
func (r *Registry) Len() int { return len(r.tools) }

// DefaultTools returns DEFAULT_TOOLS in order, only the available ones.
func (r *Registry) DefaultTools() []string {
	out := make([]string, 0, len(r.defaults))
	for _, i := range r.defaults {
		if r.tools[i].Available {
			out = append(out, r.tools[i].Name)
		}
	}
	return out
}

// ResidentTools returns RESIDENT_TOOLS in order (as given in the file, or
// derived as default_tools − deferred_default_tools ∪ {tool_search}).
func (r *Registry) ResidentTools() []string { return slices.Clone(r.residentList) }

// DeferredDefaultTools returns DEFERRED_DEFAULT_TOOLS in file order: tools
// that stay in the defaults but are not resident.
func (r *Registry) DeferredDefaultTools() []string { return slices.Clone(r.deferredDefaults) }

// IsResident reports whether the tool is resident by the registry's
// marks: in RESIDENT_TOOLS, or kept resident by its own or its
// namespace's defer flag. It is always true for tool_search and
// false for names not in the registry. (auto_defer may still defer a
// resident tool in a resolution whose resident tools exceed the budget.)
func (r *Registry) IsResident(name string) bool {
	if name == ToolSearch {
		return true
	}
	i, ok := r.index[name]
	return ok && !r.tools[i].Deferred
}

// Preset returns the named preset's tool names in order, unavailable ones
// included (they are dropped at resolution).
func (r *Registry) Preset(name string) ([]string, bool) {
	idx, ok := r.presets[name]
	if !ok {
		return nil, false
	}
	return r.names(idx), true
}

// PresetNames returns the preset names, sorted.
func (r *Registry) PresetNames() []string { return slices.Clone(r.presetNames) }

// Profile returns the named agent profile (a copy).
func (r *Registry) Profile(name string) (Profile, bool) {
	e, ok := r.profiles[name]
	if !ok {
		return Profile{}, false
	}
	p := e.p
	if p.Tools != nil {
		p.Tools = append([]string{}, p.Tools...)
	}
	p.Allowed = slices.Clone(p.Allowed)
	return p, true
}

// ProfileNames returns the agent profile names, sorted.
func (r *Registry) ProfileNames() []string { return slices.Clone(r.profileNames) }

func (r *Registry) names(idx []int32) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = r.tools[i].Name
	}
	return out
}

// MarshalJSON encodes the registry as a registry file in canonical form:
// fixed key order, presets and profiles sorted by name, resident_tools
// always explicit, parameters as their canonical bytes. Load of the output
// yields an equivalent registry, and encoding that again gives the same bytes.
func (r *Registry) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 256+len(r.tools)*256)
	b = append(b, `{"version":`...)
	b = appendJSONString(b, r.version)
	b = append(b, `,"tools":[`...)
	for i := range r.tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.appendTool(b, i)
	}
	b = append(b, ']')
	if len(r.namespaceNames) > 0 {
		b = append(b, `,"namespaces":{`...)
		for k, name := range r.namespaceNames {
			ns := r.namespaces[name]
			if k > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, name)
			b = append(b, `:{"description":`...)
			b = appendJSONString(b, ns.Description)
			if ns.Defer != nil {
				b = append(b, `,"defer":`...)
				b = strconv.AppendBool(b, *ns.Defer)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if a := r.autoDefer; a.Budget() > 0 {
		b = append(b, `,"auto_defer":{"context_window":`...)
		b = strconv.AppendInt(b, int64(a.ContextWindow), 10)
		b = append(b, `,"max_share":`...)
		b = strconv.AppendFloat(b, a.MaxShare, 'g', -1, 64)
		b = append(b, '}')
	}
	if r.catalogMaxTokens != 0 && r.catalogMaxTokens != DefaultCatalogMaxTokens {
		b = append(b, `,"catalog_max_tokens":`...)
		b = strconv.AppendInt(b, int64(r.catalogMaxTokens), 10)
	}
	b = append(b, `,"default_tools":`...)
	b = appendStringList(b, r.names(r.defaults))
	b = append(b, `,"resident_tools":`...)
	b = appendStringList(b, r.residentList)
	b = append(b, `,"deferred_default_tools":`...)
	b = appendStringList(b, r.deferredDefaults)
	b = append(b, `,"presets":{`...)
	for i, name := range r.presetNames {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':')
		b = appendStringList(b, r.names(r.presets[name]))
	}
	b = append(b, `},"profiles":{`...)
	for i, name := range r.profileNames {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':')
		b = appendProfile(b, r.profiles[name].p)
	}
	b = append(b, '}')
	if r.policy != nil {
		b = r.policy.appendJSON(b)
	}
	b = append(b, '}')
	return b, nil
}

// appendTool appends tool i as the registry file writes it.
func (r *Registry) appendTool(b []byte, i int) []byte {
	t := &r.tools[i]
	b = append(b, `{"name":`...)
	b = appendJSONString(b, t.Name)
	b = append(b, `,"description":`...)
	b = appendJSONString(b, t.Description)
	b = append(b, `,"parameters":`...)
	b = append(b, t.Parameters...)
	if t.Available {
		b = append(b, `,"available":true`...)
	} else {
		b = append(b, `,"available":false`...)
	}
	if t.Permission != "" {
		b = append(b, `,"permission":`...)
		b = appendJSONString(b, t.Permission)
	}
	if !t.Native.IsZero() {
		b = append(b, `,"native":{`...)
		sep := ""
		if len(t.Native.Anthropic) > 0 {
			b = append(b, `"anthropic":`...)
			b = append(b, t.Native.Anthropic...)
			sep = ","
		}
		if len(t.Native.OpenAI) > 0 {
			b = append(b, sep+`"openai":`...)
			b = append(b, t.Native.OpenAI...)
		}
		b = append(b, '}')
	}
	switch r.toolFlag[i] {
	case 1:
		b = append(b, `,"defer":true`...)
	case -1:
		b = append(b, `,"defer":false`...)
	}
	if len(t.Embedding) > 0 {
		b = append(b, `,"embedding":`...)
		b = appendEmbedding(b, t.Embedding)
	}
	return append(b, '}')
}

// appendProfile appends a profile as the registry file writes it.
func appendProfile(b []byte, p Profile) []byte {
	b = append(b, '{')
	sep := ""
	if p.Tools != nil {
		b = append(b, `"tools":`...)
		b = appendStringList(b, p.Tools)
		sep = ","
	}
	if p.Preset != "" {
		b = append(b, sep+`"preset":`...)
		b = appendJSONString(b, p.Preset)
		sep = ","
	}
	if len(p.Allowed) > 0 {
		b = append(b, sep+`"allowed":`...)
		b = appendStringList(b, p.Allowed)
	}
	return append(b, '}')
}

func appendStringList(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// validName is the shared tool-name rule.
func validName(s string) bool { return toolname.Valid(s) }

// validVersion reports whether s is 1..128 bytes of [A-Za-z0-9._:+-].
func validVersion(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:+-", c) >= 0) {
			return false
		}
	}
	return true
}

// validPermission reports whether s is 1..64 bytes of [a-z0-9_.:-] starting
// with a letter.
func validPermission(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_.:-", c) >= 0) {
			return false
		}
	}
	return true
}
