package deferral

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// smallRegistry is a registry of five tools, two of them deferred; %s is
// the browser tool's permission and %d a schema bound, so two versions can
// differ in contract.
const smallRegistry = `{
 "version": "test-small-%d",
 "tools": [
  {"name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"available":true,"permission":"read"},
  {"name":"bash","description":"Run a command.","parameters":{"type":"object","properties":{"command":{"type":"string"}}},"available":true,"permission":"exec"},
  {"name":"browser","description":"Drive a browser.","parameters":{"type":"object","properties":{"url":{"type":"string","maxLength":%d}}},"available":true,"permission":"%s"},
  {"name":"send_message","description":"Message another session.","parameters":{"type":"object","properties":{"to":{"type":"string"}}},"available":true,"permission":"write"},
  {"name":"tool_search","description":"Load deferred tools.","parameters":{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"}}}},"available":true,"permission":"read"}
 ],
 "default_tools": ["read_file","bash","browser","send_message","tool_search"],
 "deferred_default_tools": ["browser","send_message"],
 "presets": {"full": ["read_file","bash","browser","send_message","tool_search"]}
}`

func smallReg(t testing.TB, version, maxLen int, perm string) *resolver.Registry {
	t.Helper()
	reg, err := resolver.Load(fmt.Appendf(nil, smallRegistry, version, maxLen, perm))
	if err != nil {
		t.Fatalf("load small registry: %v", err)
	}
	return reg
}

// §7.6: tool_search loads a deferred tool into the next request of the
// turn and removes it from the catalog; without a search the request is
// stable.
func TestSearchLoadsIntoNextRequest(t *testing.T) {
	turn := Freeze(7, resolve(t, smallReg(t, 1, 100, "network"), defaultSession()), nil)
	first := turn.Request()
	if got, want := names(first.Provider), []string{"read_file", "bash", "tool_search"}; !slices.Equal(got, want) {
		t.Fatalf("first Provider = %v, want %v", got, want)
	}
	if got, want := first.Catalog, []string{"browser", "send_message"}; !slices.Equal(got, want) {
		t.Fatalf("first Catalog = %v, want %v", got, want)
	}
	again := turn.Request()
	if string(resolver.RenderAnthropic(again.Provider)) != string(resolver.RenderAnthropic(first.Provider)) ||
		!slices.Equal(again.Catalog, first.Catalog) {
		t.Errorf("two requests without a search differ")
	}

	res := turn.Load("browser")
	if !slices.Equal(res.Loaded, []string{"browser"}) || len(res.NotFound) != 0 {
		t.Errorf("Search result = %+v", res)
	}
	next := turn.Request()
	// Appended after the frozen array, never sorted into it.
	if got, want := names(next.Provider), []string{"read_file", "bash", "tool_search", "browser"}; !slices.Equal(got, want) {
		t.Errorf("next Provider = %v, want %v", got, want)
	}
	before := string(resolver.RenderOpenAI(first.Provider))
	if after := string(resolver.RenderOpenAI(next.Provider)); !strings.HasPrefix(after, before[:len(before)-1]+",") {
		t.Errorf("the array before the search is not a prefix of the array after it:\n%s\n%s", before, after)
	}
	if got, want := next.Catalog, []string{"send_message"}; !slices.Equal(got, want) {
		t.Errorf("next Catalog = %v, want %v", got, want)
	}
	if c := next.Classification[2]; c != (Class{Name: "browser", Deferred: true, Loaded: true}) {
		t.Errorf("browser classified %+v", c)
	}
	if got := turn.Loaded(); !slices.Equal(got, []string{"browser"}) {
		t.Errorf("Loaded = %v", got)
	}
	if got := turn.Discovered(); !slices.Equal(got, []string{"browser"}) {
		t.Errorf("Discovered = %v", got)
	}
	if turn.Number() != 7 {
		t.Errorf("Number = %d", turn.Number())
	}
}

// Tool_search returns the full parameter schema; execution uses the
// turn's resolved tool with its permission.
func TestSearchReturnsFullSchemaAndLookupKeepsPermission(t *testing.T) {
	reg := smallReg(t, 1, 100, "network")
	turn := Freeze(1, resolve(t, reg, defaultSession()), nil)
	res := turn.Load("browser")
	want, _ := reg.Tool("browser")
	if len(res.Tools) != 1 || res.Tools[0].Description != want.Description ||
		string(res.Tools[0].Parameters) != string(want.Parameters) {
		t.Fatalf("Search returned %+v, want the full tool %+v", res.Tools, want)
	}
	got, ok := turn.Lookup("browser")
	if !ok || got.Permission != "network" || string(got.Parameters) != string(want.Parameters) {
		t.Errorf("Lookup(browser) = %+v, %v; want permission network and the full schema", got, ok)
	}
	if _, ok := turn.Lookup("web_search"); ok {
		t.Errorf("Lookup found a tool outside the turn")
	}
	// A deferred tool not yet loaded is still executable by the turn's tool.
	if got, ok := turn.Lookup("send_message"); !ok || got.Permission != "write" {
		t.Errorf("Lookup(send_message) = %+v, %v", got, ok)
	}
}

// A registry change after Freeze never alters the frozen turn, nor
// does a caller scribbling on the resolution it froze.
func TestFreezeIsolatesTurnFromLaterChanges(t *testing.T) {
	res := resolve(t, smallReg(t, 1, 100, "network"), defaultSession())
	// Work on a private copy so the registry's cached resolution stays intact.
	own := *res
	own.Tools = slices.Clone(res.Tools)
	for i := range own.Tools {
		own.Tools[i].Parameters = slices.Clone(own.Tools[i].Parameters)
	}
	turn := Freeze(3, &own, nil)
	before := string(resolver.RenderAnthropic(turn.Tools()))

	own.Tools[2].Parameters[0] = 'X'
	own.Tools[2].Permission = "exec"
	own.Tools[0].Name = "renamed"

	changed := resolve(t, smallReg(t, 2, 5, "exec"), defaultSession())
	if changed.ContractHash == res.ContractHash {
		t.Fatal("test registries do not differ in contract")
	}
	if after := string(resolver.RenderAnthropic(turn.Tools())); after != before {
		t.Errorf("frozen tools changed:\n%s\n%s", before, after)
	}
	if b, _ := turn.Lookup("browser"); b.Permission != "network" || b.Parameters[0] != '{' {
		t.Errorf("frozen browser changed: %+v", b)
	}
	if res := turn.Load("browser"); !slices.Equal(res.Loaded, []string{"browser"}) {
		t.Errorf("Search on frozen turn: %+v", res)
	}
	if turn.ContractHash() != res.ContractHash || turn.RegistryVersion() != res.RegistryVersion {
		t.Errorf("turn contract = %s/%s, want %s/%s", turn.RegistryVersion(), turn.ContractHash(), res.RegistryVersion, res.ContractHash)
	}
}

// Only tools of this turn's frozen set may be loaded; other
// names are a soft "not found" (no error), valid names of the call still
// load, and the note names the missing ones.
func TestSearchReportsNamesNotFound(t *testing.T) {
	reg := smallReg(t, 1, 100, "network")
	// browser is disabled in this session, so it is not in the turn.
	on := true
	res := resolve(t, reg, resolver.Request{Session: intent.Intent{Enabled: &on, Disabled: []string{"browser"}}})
	turn := Freeze(1, res, nil)
	got, err := turn.Search(SearchRequest{Names: []string{"nope", "send_message", "browser", "send_message"}})
	if err != nil {
		t.Fatalf("Search with unknown names: %v, want a soft result", err)
	}
	for _, name := range []string{`"nope"`, `"browser"`} {
		if !strings.Contains(got.Note, name) {
			t.Errorf("note %q does not name %s", got.Note, name)
		}
	}
	if !slices.Equal(got.NotFound, []string{"nope", "browser"}) {
		t.Errorf("NotFound = %v", got.NotFound)
	}
	if !slices.Equal(got.Loaded, []string{"send_message"}) || !slices.Equal(names(got.Tools), []string{"send_message"}) {
		t.Errorf("valid name not loaded: %+v", got)
	}
	if s := turn.Request(); slices.Contains(names(s.Provider), "browser") || slices.Contains(s.Catalog, "browser") {
		t.Errorf("disabled tool reached the request: %v / %v", names(s.Provider), s.Catalog)
	}
	// All names unknown: still a successful, empty result.
	got, err = turn.Search(SearchRequest{Names: []string{"ghost"}})
	if err != nil || len(got.Tools)+len(got.Loaded) != 0 || !slices.Equal(got.NotFound, []string{"ghost"}) {
		t.Errorf("all unknown = %+v, %v", got, err)
	}
}

// Searching a resident or already loaded tool is a no-op that still
// returns the schema; an empty search does nothing.
func TestSearchIsIdempotent(t *testing.T) {
	turn := Freeze(1, resolve(t, smallReg(t, 1, 100, "network"), defaultSession()), []string{"browser"})
	got := turn.Load("browser", "read_file", "tool_search")
	if len(got.Loaded) != 0 || !slices.Equal(names(got.Tools), []string{"browser", "read_file", "tool_search"}) {
		t.Errorf("Search = %+v", got)
	}
	if d := turn.Discovered(); len(d) != 0 {
		t.Errorf("Discovered = %v, want none (browser came loaded)", d)
	}
	if got, err := turn.Search(SearchRequest{}); err != nil || len(got.Tools)+len(got.Loaded)+len(got.NotFound) != 0 || got.Note == "" {
		t.Errorf("empty Search = %+v, %v; want nothing loaded and a note", got, err)
	}
	if l := turn.Loaded(); !slices.Equal(l, []string{"browser"}) {
		t.Errorf("Loaded = %v", l)
	}
}

// Freeze keeps only loaded names that are deferred tools of the
// frozen set; Loaded is a sorted copy.
func TestFreezeFiltersLoaded(t *testing.T) {
	turn := Freeze(1, resolve(t, smallReg(t, 1, 100, "network"), defaultSession()),
		[]string{"send_message", "gone_tool", "read_file", "browser", "tool_search"})
	l := turn.Loaded()
	if !slices.Equal(l, []string{"browser", "send_message"}) {
		t.Fatalf("Loaded = %v, want [browser send_message]", l)
	}
	l[0] = "mutated"
	if turn.Loaded()[0] != "browser" {
		t.Errorf("Loaded aliases the turn's set")
	}
	if s := turn.Request(); len(s.Catalog) != 0 || len(s.Provider) != 5 {
		t.Errorf("all loaded: Provider %v Catalog %v", names(s.Provider), s.Catalog)
	}
}

// A nil resolution freezes an empty turn without panicking.
func TestFreezeNilResolution(t *testing.T) {
	turn := Freeze(1, nil, []string{"browser"})
	if s := turn.Request(); len(s.Provider)+len(s.Catalog) != 0 {
		t.Errorf("empty turn Request = %+v", s)
	}
	if res := turn.Load("browser"); !slices.Equal(res.NotFound, []string{"browser"}) {
		t.Errorf("Search on empty turn: %+v", res)
	}
	if _, ok := turn.Lookup("browser"); ok || len(turn.Loaded()) != 0 || len(turn.Tools()) != 0 {
		t.Errorf("empty turn not empty")
	}
}

// §7.4: the loaded set is shared in place between a tool goroutine
// (Search) and the provider goroutine (Request); run with -race.
func TestTurnConcurrentSearchAndRequest(t *testing.T) {
	turn := Freeze(1, resolve(t, smallReg(t, 1, 100, "network"), defaultSession()), nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i%2 == 0 {
					_ = turn.Load("browser", "send_message")
				} else {
					s := turn.Request()
					if len(s.Provider)+len(s.Catalog) != 5 {
						t.Errorf("tool lost under concurrency: %v / %v", names(s.Provider), s.Catalog)
						return
					}
					_ = turn.Loaded()
					_ = turn.Discovered()
					_, _ = turn.Lookup("browser")
				}
			}
		})
	}
	wg.Wait()
	if d := turn.Discovered(); !slices.Equal(d, []string{"browser", "send_message"}) {
		t.Errorf("Discovered = %v, want each name once", d)
	}
}
