package deferral

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// genRegistry draws a random valid registry file: tools t0..tN plus
// tool_search (and sometimes web_search), random availability, defaults,
// resident and deferred-default lists, and one preset "p".
func genRegistry(t *rapid.T) ([]byte, []string) {
	n := rapid.IntRange(0, 10).Draw(t, "tools")
	all := []string{resolver.ToolSearch}
	for i := range n {
		all = append(all, fmt.Sprintf("t%d", i))
	}
	if rapid.Bool().Draw(t, "has_web_search") {
		all = append(all, resolver.WebSearch)
	}
	type toolJSON struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Available   bool            `json:"available"`
		Permission  string          `json:"permission"`
	}
	var tools []toolJSON
	for _, name := range all {
		tools = append(tools, toolJSON{
			Name:        name,
			Description: "Tool " + name + ".",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
			Available:   name == resolver.ToolSearch || rapid.Float64Range(0, 1).Draw(t, "available_"+name) < 0.85,
			Permission:  rapid.SampledFrom([]string{"read", "write", "exec"}).Draw(t, "perm_"+name),
		})
	}
	// default_tools: a random ordered subset of the plain tools, plus tool_search.
	var plain []string
	for _, name := range all {
		if name != resolver.ToolSearch && name != resolver.WebSearch {
			plain = append(plain, name)
		}
	}
	defaults := subset(t, "defaults", plain)
	pos := rapid.IntRange(0, len(defaults)).Draw(t, "tool_search_pos")
	defaults = slices.Insert(defaults, pos, resolver.ToolSearch)
	deferredDefaults := subset(t, "deferred_defaults", slices.DeleteFunc(slices.Clone(defaults), func(s string) bool { return s == resolver.ToolSearch }))
	reg := map[string]any{
		"version":                fmt.Sprintf("prop-%d", rapid.IntRange(0, 3).Draw(t, "version")),
		"tools":                  tools,
		"default_tools":          defaults,
		"deferred_default_tools": deferredDefaults,
		"presets":                map[string][]string{"p": subset(t, "preset", all)},
	}
	if rapid.Bool().Draw(t, "explicit_resident") {
		var candidates []string
		for _, name := range all {
			if !slices.Contains(deferredDefaults, name) && name != resolver.ToolSearch {
				candidates = append(candidates, name)
			}
		}
		reg["resident_tools"] = subset(t, "resident", candidates) // tool_search left out on purpose: guard 1
	}
	b, err := json.Marshal(reg)
	if err != nil {
		t.Fatalf("marshal registry: %v", err)
	}
	return b, all
}

// subset draws an ordered subset of from.
func subset(t *rapid.T, label string, from []string) []string {
	if len(from) == 0 {
		return []string{}
	}
	picked := rapid.SliceOfDistinct(rapid.SampledFrom(from), rapid.ID[string]).Draw(t, label)
	if picked == nil {
		picked = []string{}
	}
	return picked
}

func genRequest(t *rapid.T, names []string) resolver.Request {
	tri := func(label string) *bool {
		switch rapid.IntRange(0, 2).Draw(t, label) {
		case 0:
			return nil
		case 1:
			v := true
			return &v
		default:
			v := false
			return &v
		}
	}
	pool := append(slices.Clone(names), "ghost")
	in := intent.Intent{
		Enabled:   tri("enabled"),
		WebSearch: tri("web_search"),
		Preset:    rapid.SampledFrom([]string{"", "p"}).Draw(t, "preset"),
		Disabled:  subset(t, "disabled", pool),
	}
	if rapid.Bool().Draw(t, "picked") {
		in.Picked = subset(t, "picked_names", pool)
	}
	req := resolver.Request{Session: in}
	switch rapid.IntRange(0, 5).Draw(t, "override") {
	case 0:
		req.Override = intent.Override{Kind: intent.OverrideEmpty}
	case 1:
		req.Override = intent.Override{Kind: intent.OverrideNames, Names: subset(t, "override_names", pool)}
	}
	return req
}

// For random registries, requests and loaded sets, every
// available resolved tool lands in exactly one of Provider and Catalog,
// tool_search is always in Provider, tools outside the resolution
// (disabled, unavailable, unknown) are in neither, order is preserved, and
// the split is deterministic.
func TestSplitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data, all := genRegistry(t)
		reg, err := resolver.Load(data)
		if err != nil {
			t.Fatalf("generated registry rejected: %v\n%s", err, data)
		}
		req := genRequest(t, all)
		res, err := reg.Resolve(req)
		if err != nil {
			t.Fatalf("generated request not resolvable: %v", err)
		}
		loadedNames := subset(t, "loaded", append(slices.Clone(all), "ghost"))
		loaded := NewSet(loadedNames...)
		s := SplitTools(res.Tools, loaded.Has)

		resolved := names(res.Tools)
		prov := names(s.Provider)
		for _, tl := range res.Tools {
			inP, inC := slices.Contains(prov, tl.Name), slices.Contains(s.Catalog, tl.Name)
			if inP == inC {
				t.Fatalf("%s: in Provider %v, in Catalog %v; want exactly one", tl.Name, inP, inC)
			}
			if !tl.Available {
				t.Fatalf("unavailable %s resolved", tl.Name)
			}
			wantProvider := !tl.Deferred || tl.Name == resolver.ToolSearch || loaded.Has(tl.Name)
			if inP != wantProvider {
				t.Fatalf("%s (deferred %v, loaded %v): in Provider %v", tl.Name, tl.Deferred, loaded.Has(tl.Name), inP)
			}
		}
		for _, name := range slices.Concat(prov, s.Catalog) {
			if !slices.Contains(resolved, name) {
				t.Fatalf("%s is outside the resolution %v but in the split", name, resolved)
			}
		}
		if req.Override.Kind == intent.OverrideNone && req.Session.Picked == nil {
			for _, name := range req.Session.Disabled {
				if name == resolver.WebSearch && req.Session.WebSearch != nil && *req.Session.WebSearch {
					continue // the overlay adds it back after removing Disabled
				}
				if slices.Contains(prov, name) || slices.Contains(s.Catalog, name) {
					t.Fatalf("disabled %s reached the split", name)
				}
			}
		}
		if slices.Contains(resolved, resolver.ToolSearch) && !slices.Contains(prov, resolver.ToolSearch) {
			t.Fatalf("tool_search not in Provider %v", prov)
		}
		if slices.Contains(s.Catalog, resolver.ToolSearch) {
			t.Fatalf("tool_search in Catalog")
		}
		// Resident tools first, then loaded ones, each part in resolution
		// order (a load never moves a resident tool).
		var residentPart, loadedPart []string
		for _, c := range s.Classification {
			if c.Resident {
				residentPart = append(residentPart, c.Name)
			} else if c.Loaded {
				loadedPart = append(loadedPart, c.Name)
			}
		}
		if !slices.Equal(prov, append(slices.Clone(residentPart), loadedPart...)) || !isSubsequence(s.Catalog, resolved) {
			t.Fatalf("order not preserved: %v / %v from %v", prov, s.Catalog, resolved)
		}
		if len(s.Classification) != len(res.Tools) {
			t.Fatalf("%d classes for %d tools", len(s.Classification), len(res.Tools))
		}
		for i, c := range s.Classification {
			if c.Name != resolved[i] || c.Resident == c.Deferred || (c.Loaded && !c.Deferred) ||
				c.InProvider() != slices.Contains(prov, c.Name) {
				t.Fatalf("inconsistent class %+v", c)
			}
		}
		// Deterministic: again, and against a freshly loaded copy.
		if again := SplitTools(res.Tools, NewSet(loadedNames...).Has); !reflect.DeepEqual(again, s) {
			t.Fatalf("split not deterministic")
		}
		reg2, err := resolver.Load(data)
		if err != nil {
			t.Fatal(err)
		}
		res2, err := reg2.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		s2 := SplitTools(res2.Tools, loaded.Has)
		if string(resolver.RenderAnthropic(s2.Provider)) != string(resolver.RenderAnthropic(s.Provider)) ||
			!slices.Equal(s2.Catalog, s.Catalog) || !reflect.DeepEqual(s2.Classification, s.Classification) {
			t.Fatalf("split differs across identical registries")
		}
	})
}

// SplitTools alone, on arbitrary tool lists including a
// tool_search that carries a deferral mark.
func TestSplitToolsArbitraryProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pool := []string{resolver.ToolSearch, "a", "b", "c", "d", "e", "f"}
		ns := rapid.SliceOfDistinct(rapid.SampledFrom(pool), rapid.ID[string]).Draw(t, "names")
		tools := make([]resolver.Tool, len(ns))
		for i, n := range ns {
			tools[i] = resolver.Tool{Name: n, Available: true, Deferred: rapid.Bool().Draw(t, "deferred_"+n)}
		}
		loaded := NewSet(subset(t, "loaded", pool)...)
		s := SplitTools(tools, loaded.Has)
		if len(s.Provider)+len(s.Catalog) != len(tools) {
			t.Fatalf("%d + %d != %d", len(s.Provider), len(s.Catalog), len(tools))
		}
		if slices.Contains(ns, resolver.ToolSearch) && !slices.Contains(names(s.Provider), resolver.ToolSearch) {
			t.Fatalf("tool_search deferred")
		}
		for _, n := range s.Catalog {
			if loaded.Has(n) {
				t.Fatalf("loaded %s left in Catalog", n)
			}
		}
	})
}

// Random interleavings of Search and Request keep every frozen tool
// in exactly one half; loaded tools only grow, and only with deferred
// tools of the turn.
func TestTurnProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data, all := genRegistry(t)
		reg, err := resolver.Load(data)
		if err != nil {
			t.Fatalf("generated registry rejected: %v", err)
		}
		res, err := reg.Resolve(genRequest(t, all))
		if err != nil {
			t.Fatalf("generated request not resolvable: %v", err)
		}
		pool := append(slices.Clone(all), "ghost")
		turn := Freeze(1, res, subset(t, "loaded", pool))
		prev := turn.Loaded()
		steps := rapid.IntRange(0, 6).Draw(t, "steps")
		for range steps {
			_ = turn.Load(subset(t, "search", pool)...)
			s := turn.Request()
			if len(s.Provider)+len(s.Catalog) != len(res.Tools) {
				t.Fatalf("tool lost: %v + %v vs %v", names(s.Provider), s.Catalog, names(res.Tools))
			}
			now := turn.Loaded()
			for _, n := range prev {
				if !slices.Contains(now, n) {
					t.Fatalf("loaded %s was dropped", n)
				}
			}
			for _, n := range now {
				tl, ok := turn.Lookup(n)
				if !ok || !tl.Deferred {
					t.Fatalf("loaded %s is not a deferred tool of the turn", n)
				}
				if !slices.Contains(names(s.Provider), n) {
					t.Fatalf("loaded %s not in Provider", n)
				}
			}
			prev = now
		}
	})
}

// isSubsequence reports whether sub appears in seq in the same order.
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

// Never unreachable. For random registries and intents
// (presets, picked lists, overrides, hand-disabled names), every name in
// the catalog can be loaded by the tool set sent with it: tool_search is
// in the provider array, and a search for the name loads it into the next
// request. When the intent disabled tool_search, the catalog is empty.
func TestCatalogAlwaysLoadable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data, all := genRegistry(t)
		reg, err := resolver.Load(data)
		if err != nil {
			t.Fatalf("generated registry rejected: %v", err)
		}
		req := genRequest(t, all)
		if rapid.Bool().Draw(t, "disable_tool_search") {
			req.Session.Disabled = append(req.Session.Disabled, resolver.ToolSearch)
		}
		res, err := reg.Resolve(req)
		if err != nil {
			t.Fatalf("generated request not resolvable: %v", err)
		}
		loaded := subset(t, "loaded", all)
		turn := Freeze(1, res, loaded)
		s := turn.Request()
		if len(s.Catalog) == 0 {
			return
		}
		if !slices.Contains(names(s.Provider), resolver.ToolSearch) {
			t.Fatalf("catalog %v sent without tool_search: provider %v (request %+v)", s.Catalog, names(s.Provider), req)
		}
		if req.Override.Kind == intent.OverrideNone && slices.Contains(req.Session.Disabled, resolver.ToolSearch) {
			t.Fatalf("tool_search disabled by hand, yet catalog %v", s.Catalog)
		}
		name := rapid.SampledFrom(s.Catalog).Draw(t, "search")
		if got := turn.Load(name); !slices.Equal(got.Loaded, []string{name}) {
			t.Fatalf("searching catalog name %s loaded %v", name, got.Loaded)
		}
		if !slices.Contains(names(turn.Request().Provider), name) {
			t.Fatalf("%s not in the next request after loading it", name)
		}
	})
}
