package deferral

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
)

func tool(name string, deferred bool) resolver.Tool {
	return resolver.Tool{
		Name:        name,
		Description: "The " + name + " tool.",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Available:   true,
		Permission:  "read",
		Deferred:    deferred,
	}
}

// Resident or loaded → Provider (resident tools first, then the
// loaded ones, each in resolution order), deferred and not loaded →
// Catalog in resolution order; one Class per tool.
func TestSplitToolsRoutesEachToolOnce(t *testing.T) {
	tools := []resolver.Tool{
		tool("read_file", false),
		tool("browser", true),
		tool("bash", false),
		tool("send_message", true),
		tool("plan", true),
		tool(resolver.ToolSearch, false),
	}
	s := SplitTools(tools, NewSet("plan", "read_file", "nonexistent").Has)

	if got, want := names(s.Provider), []string{"read_file", "bash", resolver.ToolSearch, "plan"}; !slices.Equal(got, want) {
		t.Errorf("Provider = %v, want %v", got, want)
	}
	if got, want := s.Catalog, []string{"browser", "send_message"}; !slices.Equal(got, want) {
		t.Errorf("Catalog = %v, want %v", got, want)
	}
	want := []Class{
		{Name: "read_file", Resident: true},
		{Name: "browser", Deferred: true},
		{Name: "bash", Resident: true},
		{Name: "send_message", Deferred: true},
		{Name: "plan", Deferred: true, Loaded: true},
		{Name: resolver.ToolSearch, Resident: true},
	}
	if !reflect.DeepEqual(s.Classification, want) {
		t.Errorf("Classification = %+v\nwant %+v", s.Classification, want)
	}
	if s.Provider[3].Description != "The plan tool." || string(s.Provider[3].Parameters) != `{"type":"object"}` {
		t.Errorf("loaded tool lost its schema: %+v", s.Provider[3])
	}
}

// Guard 2: tool_search goes to Provider even when a caller hands it in
// with a deferral mark, and even when "loaded" says no.
func TestSplitToolsNeverDefersToolSearch(t *testing.T) {
	tools := []resolver.Tool{tool(resolver.ToolSearch, true), tool("browser", true)}
	s := SplitTools(tools, func(string) bool { return false })
	if got := names(s.Provider); !slices.Equal(got, []string{resolver.ToolSearch}) {
		t.Fatalf("Provider = %v, want [tool_search]", got)
	}
	if s.Provider[0].Deferred {
		t.Errorf("tool_search in Provider still carries a deferral mark")
	}
	if slices.Contains(s.Catalog, resolver.ToolSearch) {
		t.Errorf("Catalog %v lists tool_search", s.Catalog)
	}
	if c := s.Classification[0]; !c.Resident || c.Deferred || c.Loaded {
		t.Errorf("tool_search classified %+v, want resident", c)
	}
	if !tools[0].Deferred {
		t.Errorf("SplitTools modified its input")
	}
}

// Loaded is only asked about deferred tools; nil means nothing loaded.
func TestSplitToolsAsksLoadedOnlyAboutDeferred(t *testing.T) {
	var asked []string
	tools := []resolver.Tool{tool("a", false), tool("b", true), tool(resolver.ToolSearch, true)}
	SplitTools(tools, func(n string) bool { asked = append(asked, n); return true })
	if !slices.Equal(asked, []string{"b"}) {
		t.Errorf("loaded asked about %v, want [b]", asked)
	}
	s := SplitTools(tools, nil)
	if !slices.Equal(s.Catalog, []string{"b"}) {
		t.Errorf("nil loaded: Catalog = %v, want [b]", s.Catalog)
	}
}

// An empty resolution (everything disabled) reaches neither half.
func TestSplitToolsEmpty(t *testing.T) {
	s := SplitTools(nil, nil)
	if len(s.Provider) != 0 || len(s.Catalog) != 0 || len(s.Classification) != 0 {
		t.Errorf("SplitTools(nil) = %+v, want empty", s)
	}
	if b := Estimate(s); b != (Budget{}) {
		t.Errorf("Estimate(empty) = %+v, want zero", b)
	}
}

// Names only, one per line, after a fixed header; "" when empty.
func TestCatalogText(t *testing.T) {
	if got := CatalogText(nil); got != "" {
		t.Errorf("CatalogText(nil) = %q, want empty", got)
	}
	if got := CatalogText([]string{}); got != "" {
		t.Errorf("CatalogText([]) = %q, want empty", got)
	}
	got := CatalogText([]string{"playwright_browser", "send_message"})
	want := CatalogHeader + "\nplaywright_browser\nsend_message\n"
	if got != want {
		t.Errorf("CatalogText = %q, want %q", got, want)
	}
}

// §7.6: a new default session's provider array holds no
// DEFERRED_DEFAULT_TOOLS member, none is resident, all are in the catalog.
func TestDefaultSessionDefersDeferredDefaults(t *testing.T) {
	reg := resolver.Default()
	s := SplitTools(resolve(t, reg, defaultSession()).Tools, nil)
	deferredDefaults := []string{"playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}
	for _, name := range deferredDefaults {
		if _, ok := reg.Tool(name); !ok {
			t.Errorf("default registry lacks %s", name)
			continue
		}
		if reg.IsResident(name) {
			t.Errorf("%s is in RESIDENT_TOOLS", name)
		}
		if slices.Contains(names(s.Provider), name) {
			t.Errorf("%s is in the default provider array", name)
		}
		if !slices.Contains(s.Catalog, name) {
			t.Errorf("%s is missing from the default catalog %v", name, s.Catalog)
		}
		if !strings.Contains(CatalogText(s.Catalog), "\n"+name+"\n") {
			t.Errorf("%s is missing from the catalog text", name)
		}
	}
	if !slices.Contains(names(s.Provider), resolver.ToolSearch) {
		t.Errorf("tool_search is not in the default provider array %v", names(s.Provider))
	}
}

// The catalog lists names only and stays near 200 tokens even for
// everything the default registry defers (checked with the real tokenizer).
func TestCatalogTextStaysSmall(t *testing.T) {
	reg := resolver.Default()
	var deferred []string
	for _, tl := range reg.Tools() {
		if tl.Available && tl.Deferred {
			deferred = append(deferred, tl.Name)
		}
	}
	if len(deferred) == 0 {
		t.Fatal("the default registry defers no tool")
	}
	text := CatalogText(deferred)
	n := mustCount(t, text)
	t.Logf("catalog of all %d deferred tools: %d bytes, %d tokens", len(deferred), len(text), n)
	if n > 250 {
		t.Errorf("catalog of %d deferred tools is %d tokens, want near 200 (<= 250)", len(deferred), n)
	}
	for _, tl := range reg.Tools() {
		if tl.Deferred && tl.Description != "" && strings.Contains(text, tl.Description) {
			t.Errorf("catalog carries the description of %s", tl.Name)
		}
	}
	def := CatalogText(SplitTools(resolve(t, reg, defaultSession()).Tools, nil).Catalog)
	t.Logf("default session catalog: %d tokens", mustCount(t, def))
}

// Set is the loaded-set helper: sorted, de-duplicated, immutable.
func TestSet(t *testing.T) {
	s := NewSet("b", "a", "b", "", "c")
	if got := s.Names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Names = %v", got)
	}
	if s.Len() != 3 || !s.Has("a") || s.Has("") || s.Has("d") {
		t.Errorf("Len/Has wrong for %v", s.Names())
	}
	n := s.Names()
	n[0] = "z"
	if !s.Has("a") {
		t.Errorf("Names aliases the set")
	}
	var zero Set
	if zero.Has("a") || zero.Len() != 0 || len(zero.Names()) != 0 {
		t.Errorf("zero Set not empty")
	}
}
