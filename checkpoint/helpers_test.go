package checkpoint

import (
	"encoding/json"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// regFile mirrors the resolver's registry file format, so tests can build
// small registries and variants of them as data.
type regFile struct {
	Version       string              `json:"version"`
	Tools         []toolFile          `json:"tools"`
	DefaultTools  []string            `json:"default_tools"`
	ResidentTools []string            `json:"resident_tools,omitempty"`
	DeferredDef   []string            `json:"deferred_default_tools,omitempty"`
	Presets       map[string][]string `json:"presets,omitempty"`
}

type toolFile struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Permission  string          `json:"permission,omitempty"`
	Available   *bool           `json:"available,omitempty"`
}

// baseJSON is the test registry: read_file, bash and tool_search are
// resident; send_message and playwright_browser are deferred defaults;
// memory_read and web_fetch are deferred because they are not defaults.
const baseJSON = `{
  "version": "test-1",
  "tools": [
    {"name": "read_file", "description": "Read a file.", "permission": "read",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "bash", "description": "Run a shell command.", "permission": "exec",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
    {"name": "tool_search", "description": "Load deferred tools by name.", "permission": "read",
     "parameters": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}}},
    {"name": "send_message", "description": "Send a message to another session.", "permission": "interactive",
     "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}}}},
    {"name": "playwright_browser", "description": "Drive a browser.", "permission": "network",
     "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}},
    {"name": "memory_read", "description": "Read long-term memory.", "permission": "read",
     "parameters": {"type": "object"}},
    {"name": "web_fetch", "description": "Fetch a URL.", "permission": "network",
     "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}}
  ],
  "default_tools": ["read_file", "bash", "tool_search", "send_message", "playwright_browser"],
  "deferred_default_tools": ["send_message", "playwright_browser"]
}`

// base returns the test registry file as data, for building variants.
func base(t tb) regFile {
	t.Helper()
	var f regFile
	if err := json.Unmarshal([]byte(baseJSON), &f); err != nil {
		t.Fatalf("parse base registry: %v", err)
	}
	return f
}

// load builds a registry from f with resolver.Load.
func load(t tb, f regFile) *resolver.Registry {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatalf("marshal registry: %v", err)
	}
	reg, err := resolver.Load(b)
	if err != nil {
		t.Fatalf("load registry: %v\n%s", err, b)
	}
	return reg
}

// resolveNames resolves exactly names (a per-turn override) against reg.
func resolveNames(t tb, reg *resolver.Registry, names ...string) *resolver.Resolution {
	t.Helper()
	res, err := reg.Resolve(resolver.Request{Override: intent.Override{Kind: intent.OverrideNames, Names: names}})
	if err != nil {
		t.Fatalf("resolve %v: %v", names, err)
	}
	if len(res.Unknown) > 0 {
		t.Fatalf("resolve %v: unknown %v", names, res.Unknown)
	}
	return res
}

// resolveAll resolves every tool of f against the registry built from f.
func resolveAll(t tb, f regFile) *resolver.Resolution {
	t.Helper()
	names := make([]string, len(f.Tools))
	for i, tool := range f.Tools {
		names[i] = tool.Name
	}
	return resolveNames(t, load(t, f), names...)
}

// toolIndex returns the position of the tool named name in f.
func toolIndex(t tb, f regFile, name string) int {
	t.Helper()
	for i := range f.Tools {
		if f.Tools[i].Name == name {
			return i
		}
	}
	t.Fatalf("no tool %q in test registry", name)
	return -1
}

// mustNew is New that fails the test on error.
func mustNew(t tb, turn uint64, res *resolver.Resolution, loaded ...string) Record {
	t.Helper()
	rec, err := New(turn, res, loaded)
	if err != nil {
		t.Fatalf("New(%d, %v): %v", turn, loaded, err)
	}
	return rec
}
