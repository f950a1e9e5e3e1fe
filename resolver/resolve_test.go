package resolver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

var smallDefaults = []string{"read_file", "write_file", "bash", "tool_search", "web_fetch", "send_message"}

func with(list []string, extra ...string) []string {
	return append(append([]string{}, list...), extra...)
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, s := range list {
		keep := true
		for _, d := range drop {
			if s == d {
				keep = false
			}
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

type resolveCase struct {
	name    string
	req     Request
	want    []string
	unknown []string
	source  string
	err     error
}

func resolveCases() []resolveCase {
	coding := []string{"read_file", "write_file", "bash", "tool_search"}
	research := []string{"read_file", "tool_search", "web_search", "web_fetch", "memory_read"}
	full := []string{"read_file", "write_file", "bash", "tool_search", "web_fetch", "send_message", "memory_read", "web_search"}
	return []resolveCase{
		// Priority chain.
		{name: "zero request follows registry defaults", req: Request{}, want: smallDefaults, source: SourceDefaults},
		{name: "zero intent follows profile preset", req: Request{Profile: "coder"}, want: coding, source: SourceProfile},
		{name: "profile explicit tools", req: Request{Profile: "researcher"}, want: []string{"read_file", "web_fetch", "tool_search"}, source: SourceProfile},
		{name: "profile empty tools means none", req: Request{Profile: "silent"}, want: nil, source: SourceProfile},
		{name: "session enabled=true beats profile", req: Request{Profile: "coder", Session: Intent{Enabled: yes}}, want: smallDefaults, source: SourceSessionIntent},
		{name: "session preset beats profile", req: Request{Profile: "researcher", Session: Intent{Preset: "coding"}}, want: coding, source: SourceSessionIntent},
		{name: "session picked beats preset", req: Request{Session: Intent{Preset: "full", Picked: []string{"bash"}}}, want: []string{"bash"}, source: SourceSessionIntent},
		{name: "session overlay keeps following profile", req: Request{Profile: "coder", Session: Intent{WebSearch: yes}}, want: with(coding, "web_search"), source: SourceSessionIntent},
		{name: "override intent beats session intent", req: Request{Session: Intent{Preset: "coding"}, Override: Override{Kind: OverrideIntent, Intent: Intent{Preset: "research"}}}, want: research, source: SourceOverrideIntent},
		{name: "override intent zero follows profile", req: Request{Profile: "coder", Session: Intent{Enabled: no}, Override: Override{Kind: OverrideIntent}}, want: coding, source: SourceOverrideIntent},
		{name: "override names beat session intent", req: Request{Session: Intent{Enabled: yes}, Override: Override{Kind: OverrideNames, Names: []string{"web_fetch"}}}, want: []string{"web_fetch"}, source: SourceOverrideNames},
		{name: "override empty beats session intent", req: Request{Session: Intent{Enabled: yes}, Override: Override{Kind: OverrideEmpty}}, want: nil, source: SourceOverrideEmpty},
		{name: "override none ignores its payload", req: Request{Override: Override{Kind: OverrideNone, Names: []string{"bash"}, Intent: Intent{Enabled: no}}}, want: smallDefaults, source: SourceDefaults},
		{name: "invalid override kind", req: Request{Override: Override{Kind: 9}}, err: ErrInvalidRequest},

		// Override forms.
		{name: "names in user order, unknown and unavailable reported", req: Request{Override: Override{Kind: OverrideNames, Names: []string{"bash", "read_file", "nope", "gpu_run", "bash", "nope"}}}, want: []string{"bash", "read_file"}, unknown: []string{"nope", "gpu_run"}, source: SourceOverrideNames},
		{name: "names ignore the intent and web_search overlay", req: Request{Override: Override{Kind: OverrideNames, Names: []string{"web_search", "memory_read"}, Intent: Intent{WebSearch: no, Disabled: []string{"memory_read"}}}}, want: []string{"web_search", "memory_read", "tool_search"}, source: SourceOverrideNames}, // Both are deferred here
		{name: "empty names list means no tools", req: Request{Override: Override{Kind: OverrideNames, Names: []string{}}}, want: nil, source: SourceOverrideEmpty},
		{name: "empty override", req: Request{Override: Override{Kind: OverrideEmpty, Names: []string{"bash"}}}, want: nil, source: SourceOverrideEmpty},
		{name: "picked in user order with unknown reported", req: Request{Session: Intent{Picked: []string{"web_fetch", "ghost", "read_file", "ghost"}}}, want: []string{"web_fetch", "read_file"}, unknown: []string{"ghost"}, source: SourceSessionIntent},
		{name: "picked only unavailable", req: Request{Session: Intent{Picked: []string{"gpu_run"}}}, want: nil, unknown: []string{"gpu_run"}, source: SourceSessionIntent},
		{name: "empty picked is unset", req: Request{Session: Intent{Picked: []string{}}}, want: smallDefaults, source: SourceDefaults},

		// Enabled=false.
		{name: "enabled=false yields nothing", req: Request{Session: Intent{Enabled: no}}, want: nil, source: SourceSessionIntent},
		{name: "enabled=false with web_search=true yields exactly web_search (and tool_search: web_search is deferred here)", req: Request{Session: Intent{Enabled: no, WebSearch: yes}}, want: []string{"web_search", "tool_search"}, source: SourceSessionIntent},
		{name: "enabled=false wins over preset and picked", req: Request{Profile: "coder", Session: Intent{Enabled: no, WebSearch: yes, Preset: "full", Picked: []string{"bash"}, Disabled: []string{"web_search"}}}, want: []string{"web_search", "tool_search"}, source: SourceSessionIntent},
		{name: "enabled=false with web_search=false", req: Request{Session: Intent{Enabled: no, WebSearch: no}}, want: nil, source: SourceSessionIntent},
		{name: "enabled=false does not need a valid preset", req: Request{Session: Intent{Enabled: no, Preset: "nope"}}, want: nil, source: SourceSessionIntent},
		{name: "override intent enabled=false", req: Request{Session: Intent{Enabled: yes}, Override: Override{Kind: OverrideIntent, Intent: Intent{Enabled: no, WebSearch: yes}}}, want: []string{"web_search", "tool_search"}, source: SourceOverrideIntent},

		// Web_search overlay.
		{name: "defaults never include web_search", req: Request{Session: Intent{Enabled: yes}}, want: smallDefaults, source: SourceSessionIntent},
		{name: "overlay adds web_search to defaults at the end", req: Request{Session: Intent{Enabled: yes, WebSearch: yes}}, want: with(smallDefaults, "web_search"), source: SourceSessionIntent},
		{name: "overlay on unset intent", req: Request{Session: Intent{WebSearch: yes}}, want: with(smallDefaults, "web_search"), source: SourceSessionIntent},
		{name: "overlay adds web_search to a preset", req: Request{Session: Intent{Preset: "coding", WebSearch: yes}}, want: with(coding, "web_search"), source: SourceSessionIntent},
		{name: "overlay keeps web_search where the preset has it", req: Request{Session: Intent{Preset: "research", WebSearch: yes}}, want: research, source: SourceSessionIntent},
		{name: "web_search=false keeps web_search in a preset that lists it", req: Request{Session: Intent{Preset: "research", WebSearch: no}}, want: research, source: SourceSessionIntent},
		{name: "web_search=false adds nothing to the defaults", req: Request{Session: Intent{Enabled: yes, WebSearch: no}}, want: smallDefaults, source: SourceSessionIntent},
		{name: "disabled web_search removes it from a preset", req: Request{Session: Intent{Preset: "research", Disabled: []string{"web_search"}}}, want: without(research, "web_search"), source: SourceSessionIntent},
		{name: "overlay adds web_search to picked names", req: Request{Session: Intent{Picked: []string{"read_file"}, WebSearch: yes}}, want: []string{"read_file", "web_search", "tool_search"}, source: SourceSessionIntent},
		{name: "web_search=false keeps picked web_search", req: Request{Session: Intent{Picked: []string{"web_search", "read_file"}, WebSearch: no}}, want: []string{"web_search", "read_file", "tool_search"}, source: SourceSessionIntent},
		{name: "overlay re-adds a disabled web_search at the end", req: Request{Session: Intent{Preset: "research", WebSearch: yes, Disabled: []string{"web_search"}}}, want: with(without(research, "web_search"), "web_search"), source: SourceSessionIntent},
		{name: "overlay on the empty preset", req: Request{Session: Intent{Preset: "empty", WebSearch: yes}}, want: []string{"web_search", "tool_search"}, source: SourceSessionIntent},

		// Disabled list, availability and de-duplication.
		{name: "disabled removes names, unknown disabled ignored", req: Request{Session: Intent{Enabled: yes, Disabled: []string{"bash", "nope"}}}, want: without(smallDefaults, "bash"), source: SourceSessionIntent},
		{name: "disabled applies to presets", req: Request{Session: Intent{Preset: "full", Disabled: []string{"send_message"}}}, want: without(full, "send_message"), source: SourceSessionIntent},
		{name: "unavailable preset tools dropped silently", req: Request{Session: Intent{Preset: "full"}}, want: full, source: SourceSessionIntent},
		{name: "picked duplicates keep the first", req: Request{Session: Intent{Picked: []string{"bash", "bash", "read_file", "bash"}}}, want: []string{"bash", "read_file"}, source: SourceSessionIntent},
		{name: "unavailable default dropped", req: Request{Session: Intent{Enabled: yes, Disabled: []string{"legacy_tool"}}}, want: smallDefaults, source: SourceSessionIntent},

		// Allowed filters the defaults, not the full set.
		{name: "override allowed filters defaults and adds nothing", req: Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Enabled: yes}, Allowed: []string{"read_file", "bash", "web_search", "memory_read", "ghost"}}}, want: []string{"read_file", "bash"}, source: SourceOverrideIntent},
		{name: "override allowed keeps defaults order", req: Request{Override: Override{Kind: OverrideIntent, Allowed: []string{"tool_search", "read_file"}}}, want: []string{"read_file", "tool_search"}, source: SourceOverrideIntent},
		{name: "override allowed with a preset is refused", req: Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Preset: "research"}, Allowed: []string{"read_file"}}}, err: ErrInvalidRequest},
		{name: "override allowed with picked is refused", req: Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Picked: []string{"memory_read"}}, Allowed: []string{"read_file"}}}, err: ErrInvalidRequest},
		{name: "override allowed with enabled=false is refused", req: Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Enabled: no}, Allowed: []string{"read_file"}}}, err: ErrInvalidRequest},
		{name: "profile allowed filters defaults", req: Request{Profile: "assistant"}, want: []string{"read_file", "tool_search", "send_message"}, source: SourceProfile},
		{name: "profile and override allowed intersect", req: Request{Profile: "assistant", Override: Override{Kind: OverrideIntent, Allowed: []string{"bash", "send_message"}}}, want: []string{"send_message", "tool_search"}, source: SourceOverrideIntent},
		{name: "override allowed with a profile preset is refused", req: Request{Profile: "coder", Override: Override{Kind: OverrideIntent, Allowed: []string{"read_file"}}}, err: ErrInvalidRequest},
		{name: "override allowed with profile tools is refused", req: Request{Profile: "researcher", Override: Override{Kind: OverrideIntent, Allowed: []string{"read_file"}}}, err: ErrInvalidRequest},
		{name: "override allowed with enabled=true beats a profile preset", req: Request{Profile: "coder", Override: Override{Kind: OverrideIntent, Intent: Intent{Enabled: yes}, Allowed: []string{"read_file"}}}, want: []string{"read_file"}, source: SourceOverrideIntent},
		{name: "enabled=true ignores profile allowed", req: Request{Profile: "assistant", Session: Intent{Enabled: yes}}, want: smallDefaults, source: SourceSessionIntent},
		{name: "disabled after allowed", req: Request{Profile: "assistant", Session: Intent{Disabled: []string{"read_file"}}}, want: []string{"tool_search", "send_message"}, source: SourceSessionIntent},

		// No tool becomes unreachable. In this registry web_search,
		// memory_read and send_message are deferred.
		{name: "picked deferred tool brings tool_search", req: Request{Session: Intent{Picked: []string{"send_message", "bash"}}}, want: []string{"send_message", "bash", "tool_search"}, source: SourceSessionIntent},
		{name: "preset without tool_search gets it", req: Request{Session: Intent{Preset: "no_search"}}, want: []string{"bash", "send_message", "tool_search"}, source: SourceSessionIntent},
		{name: "override names of deferred tools get tool_search", req: Request{Override: Override{Kind: OverrideNames, Names: []string{"memory_read"}}}, want: []string{"memory_read", "tool_search"}, source: SourceOverrideNames},
		{name: "resident-only picks get no tool_search", req: Request{Session: Intent{Picked: []string{"bash"}}}, want: []string{"bash"}, source: SourceSessionIntent},
		{name: "disabled tool_search drops deferred tools", req: Request{Session: Intent{Enabled: yes, Disabled: []string{"tool_search"}}}, want: without(smallDefaults, "tool_search", "send_message"), source: SourceSessionIntent},
		{name: "disabled tool_search drops picked deferred tools", req: Request{Session: Intent{Picked: []string{"send_message", "bash", "tool_search"}, Disabled: []string{"tool_search"}}}, want: []string{"bash"}, source: SourceSessionIntent},
		{name: "override intent disabling tool_search", req: Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Preset: "full", Disabled: []string{"tool_search"}}}}, want: []string{"read_file", "write_file", "bash", "web_fetch"}, source: SourceOverrideIntent},

		// Errors.
		{name: "unknown session preset", req: Request{Session: Intent{Preset: "nope"}}, err: ErrUnknownPreset},
		{name: "unknown override preset", req: Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Preset: "nope"}}}, err: ErrUnknownPreset},
		{name: "unknown profile when followed", req: Request{Profile: "nope"}, err: ErrUnknownProfile},
		{name: "unknown profile not consulted", req: Request{Profile: "nope", Session: Intent{Enabled: yes}}, want: smallDefaults, source: SourceSessionIntent},
	}
}

// Each case names its requirement; the cached
// and uncached paths agree, and every resolution carries its contract hash
// and the registry's deferral marks.
func TestResolveRules(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	for _, tc := range resolveCases() {
		t.Run(tc.name, func(t *testing.T) {
			for _, resolve := range []func(Request) (*Resolution, error){reg.Resolve, reg.ResolveUncached} {
				res, err := resolve(tc.req)
				if tc.err != nil {
					if !errors.Is(err, tc.err) || res != nil {
						t.Fatalf("got %v, %v; want error %v", res, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := toolNames(res.Tools); !eqNames(got, tc.want) {
					t.Errorf("tools = %q; want %q", got, tc.want)
				}
				if !eqNames(res.Unknown, tc.unknown) {
					t.Errorf("unknown = %q; want %q", res.Unknown, tc.unknown)
				}
				if res.Source != tc.source {
					t.Errorf("source = %q; want %q", res.Source, tc.source)
				}
				if res.RegistryVersion != "test-1" {
					t.Errorf("version = %q", res.RegistryVersion)
				}
				if res.Tools == nil {
					t.Errorf("Tools is nil; want an empty, non-nil slice")
				}
				if h := ContractHash(reg.Version(), res.Tools); res.ContractHash != h {
					t.Errorf("contract hash %s; want ContractHash(...) = %s", res.ContractHash, h)
				}
				for _, tool := range res.Tools {
					want, _ := reg.Tool(tool.Name)
					if tool.Deferred != want.Deferred || !tool.Available {
						t.Errorf("tool %s: deferred=%v available=%v; want deferred=%v available", tool.Name, tool.Deferred, tool.Available, want.Deferred)
					}
				}
			}
		})
	}
}

// Error messages name the bad value and the fix.
func TestResolveErrorMessages(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	_, err := reg.Resolve(Request{Session: Intent{Preset: "nope"}})
	if msg := fmt.Sprint(err); !strings.Contains(msg, `"nope"`) || !strings.Contains(msg, "coding, empty, full, no_search, research") {
		t.Errorf("preset error %q does not name the value and the choices", msg)
	}
	_, err = reg.Resolve(Request{Profile: "ghost"})
	if msg := fmt.Sprint(err); !strings.Contains(msg, `"ghost"`) || !strings.Contains(msg, "assistant, coder, researcher, silent") {
		t.Errorf("profile error %q does not name the value and the choices", msg)
	}
	_, err = reg.Resolve(Request{Override: Override{Kind: 7}})
	if msg := fmt.Sprint(err); !strings.Contains(msg, "kind 7") {
		t.Errorf("override error %q does not name the kind", msg)
	}
}

// A tool added to the registry's defaults reaches every {enabled:true}
// session (and every session following the defaults) on the next
// resolution, with no write to the session.
func TestResolveNewDefaultVisible(t *testing.T) {
	base := readTestdata(t, "small_registry.json")
	old, err := Load(base)
	if err != nil {
		t.Fatal(err)
	}
	grown := strings.Replace(string(base), `"tools": [`, `"tools": [
    {"name": "list_sessions", "description": "List sessions.", "parameters": {"type": "object"}},`, 1)
	grown = strings.Replace(grown, `"default_tools": ["read_file",`, `"default_tools": ["list_sessions", "read_file",`, 1)
	grown = strings.Replace(grown, `"version": "test-1"`, `"version": "test-2"`, 1)
	reg, err := Load([]byte(grown))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Intent{{Enabled: yes}, {}, {WebSearch: yes}, {Disabled: []string{"bash"}}} {
		req := Request{Session: in}
		before, err1 := old.Resolve(req)
		after, err2 := reg.Resolve(req)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if contains(toolNames(before.Tools), "list_sessions") || !contains(toolNames(after.Tools), "list_sessions") {
			t.Errorf("intent %+v: before %q, after %q; want list_sessions only after", in, toolNames(before.Tools), toolNames(after.Tools))
		}
		if before.ContractHash == after.ContractHash {
			t.Errorf("contract hash did not change with the registry")
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Enabled=false with web_search=true in a registry without web_search
// (or with it unavailable) yields no tools rather than an error.
func TestResolveNoWebSearchTool(t *testing.T) {
	data := strings.Replace(string(readTestdata(t, "small_registry.json")), `"name": "web_search", "description": "Search the web.", "permission": "network", "available": true`, `"name": "web_search", "description": "Search the web.", "permission": "network", "available": false`, 1)
	reg, err := Load([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Intent{{Enabled: no, WebSearch: yes}, {Enabled: yes, WebSearch: yes}} {
		res, err := reg.Resolve(Request{Session: in})
		if err != nil {
			t.Fatal(err)
		}
		if contains(toolNames(res.Tools), WebSearch) {
			t.Errorf("intent %+v: unavailable web_search resolved: %q", in, toolNames(res.Tools))
		}
	}
}

// A repeated request returns the same immutable *Resolution from the
// cache, equal to an uncached resolution.
func TestResolveCacheReturnsSameResolution(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	req := Request{Session: Intent{Enabled: bp(true), WebSearch: bp(true), Disabled: []string{"bash"}}, Profile: "coder"}
	a, err := reg.Resolve(req)
	if err != nil {
		t.Fatal(err)
	}
	// An equal request built from fresh values hits the same entry.
	req2 := Request{Session: Intent{Enabled: bp(true), WebSearch: bp(true), Disabled: []string{"bash"}}, Profile: "coder"}
	b, _ := reg.Resolve(req2)
	if a != b {
		t.Fatalf("equal requests returned different pointers")
	}
	// Mutating the caller's request afterwards does not corrupt the cache.
	req.Session.Disabled[0] = "read_file"
	*req.Session.WebSearch = false
	c, _ := reg.Resolve(req2)
	if c != a || contains(toolNames(c.Tools), "bash") {
		t.Fatalf("cache entry changed after the caller mutated its request")
	}
	u, _ := reg.ResolveUncached(req2)
	if u == a || fmt.Sprint(*u) != fmt.Sprint(*a) {
		t.Fatalf("uncached resolution differs: %+v vs %+v", u, a)
	}
}

// The cached path allocates nothing.
func TestResolveCachedZeroAllocs(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	req := Request{Session: Intent{Enabled: yes, WebSearch: yes, Disabled: []string{"bash"}, Picked: []string{"read_file"}}, Profile: "coder",
		Override: Override{Kind: OverrideIntent, Intent: Intent{Enabled: yes, Disabled: []string{"bash"}}, Allowed: []string{"read_file"}}}
	if _, err := reg.Resolve(req); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = reg.Resolve(req) }); n != 0 {
		t.Fatalf("cached Resolve allocates %v times; want 0", n)
	}
}

// The cache is bounded and stays correct across eviction; requests that
// differ only in tri-state or list contents never share an entry.
func TestResolveCacheBoundedAndExact(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	for i := 0; i < cacheSize+100; i++ {
		req := Request{Session: Intent{Picked: []string{"read_file", fmt.Sprintf("ghost%d", i)}}}
		res, err := reg.Resolve(req)
		if err != nil || len(res.Unknown) != 1 || res.Unknown[0] != fmt.Sprintf("ghost%d", i) {
			t.Fatalf("request %d: %+v %v", i, res, err)
		}
	}
	if n := reg.cache.len(); n != cacheSize {
		t.Fatalf("cache holds %d entries; want %d", n, cacheSize)
	}
	distinct := []Request{
		{},
		{Session: Intent{Enabled: yes}},
		{Session: Intent{Enabled: no}},
		{Session: Intent{WebSearch: yes}},
		{Session: Intent{Disabled: []string{"ab"}}},
		{Session: Intent{Disabled: []string{"a", "b"}}},
		{Session: Intent{Picked: []string{"ab"}}},
		{Override: Override{Kind: OverrideIntent}},
		{Override: Override{Kind: OverrideIntent, Allowed: []string{"bash"}}},
		{Override: Override{Kind: OverrideNames, Names: []string{"bash"}}},
		{Profile: "coder"},
	}
	for i := range distinct {
		for j := range distinct {
			if (i == j) != requestEqual(&distinct[i], &distinct[j]) {
				t.Errorf("requestEqual(%d, %d) = %v", i, j, !(i == j))
			}
		}
	}
	// Nil and empty lists are the same request (Resolve treats them alike).
	a, b := Request{Session: Intent{Disabled: nil}}, Request{Session: Intent{Disabled: []string{}}}
	if !requestEqual(&a, &b) || fingerprint(&a) != fingerprint(&b) {
		t.Errorf("nil and empty lists differ in the cache key")
	}
	// Huge requests are resolved but not cached.
	big := Request{Session: Intent{Picked: make([]string, maxCachedNames+1)}}
	for i := range big.Session.Picked {
		big.Session.Picked[i] = "read_file"
	}
	r1, _ := reg.Resolve(big)
	r2, _ := reg.Resolve(big)
	if r1 == r2 || len(r1.Tools) != 1 {
		t.Errorf("oversized request was cached or resolved wrongly")
	}
}

// Concurrent resolutions of the same and different requests agree.
func TestResolveConcurrent(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	cases := resolveCases()
	want := make([]string, len(cases))
	for i, tc := range cases {
		want[i] = resolutionKey(reg.ResolveUncached(tc.req))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(cases))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				for i, tc := range cases {
					if got := resolutionKey(reg.Resolve(tc.req)); got != want[i] {
						errs <- tc.name
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("concurrent resolve of %q disagreed", name)
	}
}

// resolutionKey summarizes a resolution cheaply: the contract hash covers
// the tools, their order and the version.
func resolutionKey(res *Resolution, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return res.ContractHash + " " + res.Source + " " + strings.Join(res.Unknown, ",")
}

// A zero Registry resolves to nothing without panicking.
func TestResolveZeroRegistry(t *testing.T) {
	var reg Registry
	res, err := reg.Resolve(Request{Session: Intent{Enabled: no, WebSearch: yes}})
	if err != nil || len(res.Tools) != 0 || res.ContractHash != ContractHash("", nil) {
		t.Fatalf("got %+v, %v", res, err)
	}
	if _, err := reg.Resolve(Request{Session: Intent{Preset: "x"}}); !errors.Is(err, ErrUnknownPreset) {
		t.Fatalf("got %v", err)
	}
	if ex := reg.Explain(Request{}, "x"); ex.Rule != "unknown-tool" {
		t.Fatalf("got %+v", ex)
	}
}

// Override kinds encode as names in JSON, and unknown names are refused.
func TestOverrideKindText(t *testing.T) {
	req := Request{Override: Override{Kind: OverrideNames, Names: []string{"bash"}}, Profile: "coder"}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"override":{"kind":"names","names":["bash"]},"profile":"coder"}`; string(b) != want {
		t.Fatalf("got %s; want %s", b, want)
	}
	var back Request
	if err := json.Unmarshal(b, &back); err != nil || !requestEqual(&back, &req) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for k, name := range map[OverrideKind]string{OverrideNone: "none", OverrideEmpty: "empty", OverrideIntent: "intent", OverrideNames: "names", 9: "OverrideKind(9)"} {
		if k.String() != name {
			t.Errorf("%d.String() = %q", k, k.String())
		}
	}
	var k OverrideKind
	if err := k.UnmarshalText([]byte("all")); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("accepted kind %q", "all")
	}
	if err := k.UnmarshalText(nil); err != nil || k != OverrideNone {
		t.Errorf("empty kind: %v %v", k, err)
	}
	if _, err := OverrideKind(9).MarshalText(); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("marshalled kind 9")
	}
}

// The cache also bounds the number of resolved tools it holds, and
// stays correct when it evicts by that budget.
func TestResolveCacheToolBudget(t *testing.T) {
	reg, err := Load(bigRegistryJSON(500))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ {
		req := Request{Session: Intent{Disabled: []string{fmt.Sprintf("tool_%03d", i%250), fmt.Sprintf("x%d", i)}}}
		res, err := reg.Resolve(req)
		if err != nil || len(res.Tools) != 499 {
			t.Fatalf("request %d: %v, %d tools", i, err, len(res.Tools))
		}
	}
	reg.cache.mu.RLock()
	n, tools := reg.cache.n, reg.cache.tools
	reg.cache.mu.RUnlock()
	if tools > maxCachedTools || n != maxCachedTools/499 || tools != n*499 {
		t.Fatalf("cache holds %d entries, %d tools; want %d entries within %d tools", n, tools, maxCachedTools/499, maxCachedTools)
	}
	// The newest entries are still served from the cache.
	req := Request{Session: Intent{Disabled: []string{"tool_099", "x599"}}}
	a, _ := reg.Resolve(req)
	b, _ := reg.Resolve(req)
	if a != b {
		t.Fatal("newest entry was evicted")
	}
}

// The web_search overlay only adds. With the embedded registry, the
// research preset (which lists web_search) and the researcher profile
// (whose tools list it) resolve to the same tools whether web_search is
// false or unset; only a ToolDisabled removes it. A UI that saves "off"
// as its default must not break presets.
func TestWebSearchFalseAddsAndRemovesNothing(t *testing.T) {
	reg := Default()
	cases := []struct {
		name    string
		session Intent
		profile string
	}{
		{"research preset", Intent{Preset: "research"}, ""},
		{"researcher profile", Intent{}, "researcher"},
		{"picked web_search", Intent{Picked: []string{"web_search", "read_file"}}, ""},
		{"defaults", Intent{Enabled: yes}, ""},
		{"enabled=false", Intent{Enabled: no}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			unset, err := reg.Resolve(Request{Session: tc.session, Profile: tc.profile})
			if err != nil {
				t.Fatal(err)
			}
			off := tc.session
			off.WebSearch = no
			got, err := reg.Resolve(Request{Session: off, Profile: tc.profile})
			if err != nil {
				t.Fatal(err)
			}
			if !eqNames(toolNames(got.Tools), toolNames(unset.Tools)) {
				t.Fatalf("web_search=false resolves to %q; unset resolves to %q: false must add and remove nothing", toolNames(got.Tools), toolNames(unset.Tools))
			}
		})
	}
	research, _ := reg.Resolve(Request{Session: Intent{Preset: "research", WebSearch: no}})
	if n := len(research.Tools); n != 11 || !contains(toolNames(research.Tools), WebSearch) {
		t.Fatalf("research with web_search=false has %d tools %q; want the preset's 11, web_search included", n, toolNames(research.Tools))
	}
	researcher, _ := reg.Resolve(Request{Session: Intent{WebSearch: no}, Profile: "researcher"})
	if n := len(researcher.Tools); n != 7 || !contains(toolNames(researcher.Tools), WebSearch) {
		t.Fatalf("researcher profile with web_search=false has %d tools %q; want its 7, web_search included", n, toolNames(researcher.Tools))
	}
	disabled, _ := reg.Resolve(Request{Session: Intent{Preset: "research", Disabled: []string{WebSearch}}})
	if contains(toolNames(disabled.Tools), WebSearch) || len(disabled.Tools) != 10 {
		t.Fatalf("research with web_search disabled = %q; want the preset without web_search", toolNames(disabled.Tools))
	}
}

// An override's allowed list filters the defaults; where the
// expansion does not use the defaults (a preset, a picked list,
// enabled=false, a profile's own list) it is refused with a message that
// names the base and the fix, never silently ignored.
func TestOverrideAllowedNeverIgnored(t *testing.T) {
	reg := Default()
	_, err := reg.Resolve(Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Preset: "research"}, Allowed: []string{"read_file"}}})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("allowed with a preset: err = %v; want ErrInvalidRequest", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `preset "research"`) || !strings.Contains(msg, "drop allowed") {
		t.Fatalf("error %q does not name the preset and the fix", msg)
	}
	if ex := reg.Explain(Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Preset: "research"}, Allowed: []string{"read_file"}}}, "grep"); ex.Rule != "error" {
		t.Fatalf("explain of a refused request: %+v; want rule error", ex)
	}
	// Where the defaults are the base, allowed applies.
	res, err := reg.Resolve(Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Enabled: yes}, Allowed: []string{"grep", "read_file", "memory_read"}}})
	if err != nil || !eqNames(toolNames(res.Tools), []string{"read_file", "grep"}) {
		t.Fatalf("allowed over the defaults = %v, %v; want [read_file grep]", res, err)
	}
}
