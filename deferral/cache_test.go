package deferral

import (
	"slices"
	"testing"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// The cached tools prefix of each provider mode follows the
// provider's documented rule. Anthropic native: the tools that are not
// deferred, nothing of a deferred one; OpenAI native: a deferred top-level
// function's name and description but not its schema, a namespace's name
// and description but nothing of its deferred functions; the engine's
// catalog: the array as sent. Every mode sees a resident tool's change.
func TestCachedPrefixFollowsProviderRules(t *testing.T) {
	res, err := resolver.Default().Resolve(resolver.Request{Session: intent.Intent{Enabled: boolp(true)}})
	if err != nil {
		t.Fatal(err)
	}
	tools := append(slices.Clone(res.Tools), resolver.Tool{Name: "mcp__gh__create_issue", Description: "Create an issue.", Parameters: []byte(`{"type":"object"}`), Available: true, Deferred: true})
	edit := func(name string, f func(*resolver.Tool)) []resolver.Tool {
		out := slices.Clone(tools)
		for i := range out {
			if out[i].Name == name {
				f(&out[i])
			}
		}
		return out
	}
	describe := func(t *resolver.Tool) { t.Description += " Anew." }
	reschema := func(t *resolver.Tool) {
		t.Parameters = []byte(`{"type":"object","properties":{"x":{"type":"string"}}}`)
	}
	cases := []struct {
		what    string
		tools   []resolver.Tool
		changes map[string]bool // mode -> prefix changes
	}{
		{"deferred top-level description", edit("exit_plan_mode", describe), map[string]bool{"anthropic": false, "openai": true, "anthropic-engine": false}},
		{"deferred top-level schema", edit("exit_plan_mode", reschema), map[string]bool{"anthropic": false, "openai": false, "anthropic-engine": false}},
		{"deferred MCP tool description", edit("mcp__gh__create_issue", describe), map[string]bool{"anthropic": false, "openai": false, "anthropic-engine": false}},
		{"resident tool description", edit("read_file", describe), map[string]bool{"anthropic": true, "openai": true, "anthropic-engine": true}},
	}
	for _, tc := range cases {
		for mode, want := range tc.changes {
			row, _ := LookupProvider(mode)
			before, after := tools, tc.tools
			if !row.Native { // the engine's array: the resident tools, none loaded
				before, after = notDeferred(before), notDeferred(after)
			}
			got := row.PrefixHash(before, res.Namespaces, len(before)) != row.PrefixHash(after, res.Namespaces, len(after))
			if got != want {
				t.Errorf("%s, %s: prefix changes %v, the provider's rule says %v", tc.what, mode, got, want)
			}
		}
	}
	// A deferred tool's definition is in the Anthropic native rendering
	// (after the breakpoint) but not in its cached prefix.
	row, _ := LookupProvider("anthropic")
	if slices.Equal(row.Render(tools, res.Namespaces, 0), row.CachedPrefix(tools, res.Namespaces, 0)) {
		t.Error("the cached prefix is the whole rendering")
	}
}

// In Anthropic's native modes a referenced tool's definition is cached
// where its tool_reference sits: a change to it breaks the cache, a new
// reference does not; the other modes expand no reference.
func TestReferencesBreakOnlyOnChange(t *testing.T) {
	res, err := resolver.Default().Resolve(resolver.Request{Session: intent.Intent{Enabled: boolp(true)}})
	if err != nil {
		t.Fatal(err)
	}
	row, _ := LookupProvider("anthropic")
	a := row.ReferenceDefs(res.Tools, []string{"send_message"})
	grown := row.ReferenceDefs(res.Tools, []string{"send_message", "enter_plan_mode"})
	if len(a) != 1 || ReferencesBroke(a, grown) {
		t.Fatalf("a new reference broke the cache: %v -> %v", a, grown)
	}
	changed := slices.Clone(res.Tools)
	for i := range changed {
		if changed[i].Name == "send_message" {
			changed[i].Description += " Anew."
		}
	}
	if !ReferencesBroke(a, row.ReferenceDefs(changed, []string{"send_message"})) {
		t.Fatal("a changed referenced definition did not break the cache")
	}
	for _, mode := range []string{"openai", "anthropic-engine", "openai-engine"} {
		r, _ := LookupProvider(mode)
		if r.ExpandsReferences() || r.ReferenceDefs(res.Tools, []string{"send_message"}) != nil {
			t.Errorf("%s expands references", mode)
		}
	}
}

func boolp(b bool) *bool { return &b }
