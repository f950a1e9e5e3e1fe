package service

import (
	"fmt"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
)

// sameVersionRegistry is a registry of version "same-1" whose namespace
// description and whose tool "gone" (not in the defaults, so not in a
// resolution) are given: two of them share the version and every
// resolved tool's contract, and differ in what a rendering looks up.
func sameVersionRegistry(t *testing.T, namespace, gone string) *resolver.Registry {
	t.Helper()
	r, err := resolver.Load(fmt.Appendf(nil, `{
 "version": "same-1",
 "tools": [
  {"name":"read_file","description":"Read a file.","parameters":{"type":"object"}},
  {"name":"tool_search","description":"Load deferred tools.","parameters":{"type":"object"}},
  {"name":"mcp__github__list_issues","description":"List GitHub issues.","parameters":{"type":"object"}},
  {"name":"gone","description":%q,"parameters":{"type":"object"}}
 ],
 "namespaces": {"github": {"description":%q}},
 "default_tools": ["read_file","tool_search","mcp__*"]
}`, gone, namespace))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A replay's memo of prefix and references hashes answers what cacheOf
// answers for every registry, including two pushed under one version with
// the same resolved tools that differ in a namespace description or in a
// referenced tool the resolution lacks.
func TestHistoryCacheMemoAgreesWithCacheOf(t *testing.T) {
	t.Parallel()
	a := sameVersionRegistry(t, "GitHub.", "Old gone.")
	b := sameVersionRegistry(t, "GitHub Enterprise.", "New gone.")
	ra, err := a.Resolve(resolver.Request{})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Resolve(resolver.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if ra.ContractHash != rb.ContractHash {
		t.Fatalf("contract hashes differ (%s, %s): the case needs equal ones", ra.ContractHash, rb.ContractHash)
	}
	refs := []string{"gone"}
	differed := 0
	for _, provider := range []string{"anthropic", "anthropic-native", "openai-native", "anthropic-engine", "openai-engine"} {
		regs := &registriesAt{}
		for _, c := range []struct {
			res *resolver.Resolution
			reg *resolver.Registry
		}{{ra, a}, {rb, b}, {ra, a}, {ra, nil}, {rb, nil}} {
			split := deferral.SplitInLoadOrder(c.res, nil)
			wp, wr, _ := cacheOf(provider, c.res, c.reg, split, refs)
			gp, gr, _ := regs.cacheOf(provider, c.res, c.reg, split, refs)
			if gp != wp || gr != wr {
				t.Errorf("%s, registry %p: memo gave prefix %s refs %s, cacheOf %s %s", provider, c.reg, gp, gr, wp, wr)
			}
		}
		pa, ha, _ := cacheOf(provider, ra, a, deferral.SplitInLoadOrder(ra, nil), refs)
		pb, hb, _ := cacheOf(provider, rb, b, deferral.SplitInLoadOrder(rb, nil), refs)
		if pa != pb || ha != hb {
			differed++
		}
	}
	if differed == 0 {
		t.Fatal("no provider mode renders the two registries differently: the case shows nothing")
	}
}
