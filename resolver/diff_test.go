package resolver

import (
	"slices"
	"strings"
	"testing"
)

// Diff names the tools, presets, profiles and policy a
// candidate changes, and nothing for an identical registry.
func TestDiffNamesChanges(t *testing.T) {
	cur := policyRegistry(t, testPolicy)
	if d := Diff(cur, cur); d.Added != nil || d.Removed != nil || d.Changed != nil || d.Presets != nil || d.Profiles != nil || d.DefaultsChange || d.AllHashesChange {
		t.Errorf("identical registries differ: %+v", d)
	}
	cand := policyRegistry(t, strings.Replace(testPolicy, "pol-1", "pol-2", 1))
	d := Diff(cur, cand)
	// A policy version alone changes no contract hash (the policy is not
	// hashed in since e936c78; it changes contracts only through tools).
	if d.AllHashesChange || d.PolicyFrom != "pol-1" || d.PolicyTo != "pol-2" || d.Changed != nil {
		t.Errorf("policy change: %+v", d)
	}
	d = Diff(Default(), cur)
	if !slices.Equal(d.Added, []string{"mcp__github__get_issue", "mcp__github__create_issue"}) || d.Removed != nil || !d.DefaultsChange {
		t.Errorf("added MCP tools: %+v", d)
	}
	// The profiles' own tools do not change (the new tools are defaults
	// that no profile's list or allowed filter names), and the registry
	// version is the same: no hash changes for all.
	if d.Profiles != nil || d.AllHashesChange {
		t.Errorf("profiles %v, all hashes change %v", d.Profiles, d.AllHashesChange)
	}
	d = Diff(cur, Default())
	if !slices.Equal(d.Removed, []string{"mcp__github__get_issue", "mcp__github__create_issue"}) || d.Added != nil {
		t.Errorf("removed MCP tools: %+v", d)
	}
}
