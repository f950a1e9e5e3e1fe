package aggregate

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

func decideOK(t *testing.T, s State, reg *resolver.Registry, cmd Command) []events.Payload {
	t.Helper()
	out, err := Decide(s, reg, cmd, Limits{})
	if err != nil {
		t.Fatalf("Decide(%+v): %v", cmd, err)
	}
	return out
}

func decideErr(t *testing.T, s State, reg *resolver.Registry, cmd Command, lim Limits, want error, texts ...string) {
	t.Helper()
	out, err := Decide(s, reg, cmd, lim)
	if !errors.Is(err, want) {
		t.Fatalf("Decide(%+v) = %v, %v; want %v", cmd, out, err, want)
	}
	for _, txt := range texts {
		if !strings.Contains(err.Error(), txt) {
			t.Errorf("error %q does not contain %q", err, txt)
		}
	}
}

// A picked list that is an expansion is refused, and the error says
// which intent to store instead.
func TestDecideMaterializationGuard(t *testing.T) {
	def := resolver.Default()
	small := smallRegistry(t)
	var s State

	// Equal to a whole preset (order does not matter).
	minimal, ok := def.Preset("minimal")
	if !ok {
		t.Fatal("default registry has no minimal preset")
	}
	rev := append([]string(nil), minimal...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	decideErr(t, s, def, events.ToolsPicked{Names: rev}, Limits{}, ErrMaterialized,
		"store the intent instead", `PresetChosen{preset:"minimal"}`, "docs/semantics.md#picked-lists")

	// Equal to the preset plus the web_search overlay: store both intents.
	decideErr(t, s, small, events.ToolsPicked{Names: []string{"tool_search", "read_file", "web_search"}}, Limits{}, ErrMaterialized,
		"store the intent instead", `PresetChosen{preset:"tiny"}`, "WebSearchSet{enabled:true}")

	// Equal to the preset's available tools (gpu_run is unavailable).
	decideErr(t, s, small, events.ToolsPicked{Names: []string{"bash", "grep", "tool_search"}}, Limits{}, ErrMaterialized,
		`PresetChosen{preset:"ops"}`)

	// Equal to DEFAULT_TOOLS.
	decideErr(t, s, small, events.ToolsPicked{Names: small.DefaultTools()}, Limits{}, ErrMaterialized,
		"store the intent instead", "ToolsToggled{enabled:true}", "DEFAULT_TOOLS")

	// Longer than MaxPicked: the whole default list of the default
	// registry, and a long list that is no preset.
	decideErr(t, s, def, events.ToolsPicked{Names: def.DefaultTools()}, Limits{}, ErrMaterialized,
		"store the intent instead", "ToolsToggled{enabled:true}")
	var long []string
	for _, tl := range def.Tools() {
		if len(long) == DefaultMaxPicked+1 {
			break
		}
		if tl.Name != resolver.ToolSearch {
			long = append(long, tl.Name)
		}
	}
	decideErr(t, s, def, events.ToolsPicked{Names: long}, Limits{}, ErrMaterialized,
		"17 names, at most 16", "store the intent instead", "ToolsToggled{enabled:true} / PresetChosen{preset:")
	decideErr(t, s, def, events.ToolsPicked{Names: []string{"read_file", "grep", "bash"}}, Limits{MaxPicked: 2}, ErrMaterialized, "at most 2")

	// A short curated list is fine.
	out := decideOK(t, s, def, events.ToolsPicked{Names: []string{"grep", "read_file"}})
	if !reflect.DeepEqual(out, []events.Payload{events.ToolsPicked{Names: []string{"grep", "read_file"}}}) {
		t.Fatalf("out = %+v", out)
	}
}

// The picked list's other validations.
func TestDecidePicked(t *testing.T) {
	def := resolver.Default()
	var s State
	decideErr(t, s, def, events.ToolsPicked{Names: []string{}}, Limits{}, ErrInvalidCommand, "ToolsToggled{enabled:false}")
	decideErr(t, s, def, events.ToolsPicked{Names: []string{"grep", "grep"}}, Limits{}, ErrInvalidCommand, `"grep" is picked twice`)
	decideErr(t, s, def, events.ToolsPicked{Names: []string{"grep", "no_such", "zz"}}, Limits{}, ErrUnknownTool, "no_such, zz", def.Version())
	decideErr(t, s, def, events.ToolsPicked{Names: []string{"Bad Name"}}, Limits{}, ErrInvalidCommand, "Bad Name")
	// nil unsets; a no-op when already unset or unchanged.
	if out := decideOK(t, s, def, events.ToolsPicked{}); len(out) != 0 {
		t.Fatalf("unset of unset = %+v", out)
	}
	s = Fold(testSession, stored(events.ToolsPicked{Names: []string{"grep"}}))
	if out := decideOK(t, s, def, &events.ToolsPicked{}); !reflect.DeepEqual(out, []events.Payload{events.ToolsPicked{}}) {
		t.Fatalf("unset = %+v", out)
	}
	if out := decideOK(t, s, def, events.ToolsPicked{Names: []string{"grep"}}); len(out) != 0 {
		t.Fatalf("same pick = %+v", out)
	}
}

// Switch, overlay and preset commands.
func TestDecideIntent(t *testing.T) {
	def := resolver.Default()
	var s State
	if out := decideOK(t, s, def, events.ToolsToggled{Enabled: bp(true)}); len(out) != 1 || !*out[0].(events.ToolsToggled).Enabled {
		t.Fatalf("toggle = %+v", out)
	}
	if out := decideOK(t, s, def, events.ToolsToggled{}); len(out) != 0 {
		t.Fatalf("unset of unset = %+v", out)
	}
	if out := decideOK(t, s, def, events.WebSearchSet{Enabled: bp(true)}); len(out) != 1 {
		t.Fatalf("web search = %+v", out)
	}
	out, err := Decide(s, def, events.PresetChosen{Preset: "research"}, Limits{})
	if err != nil || !reflect.DeepEqual(out, []events.Payload{events.PresetChosen{Preset: "research"}}) {
		t.Fatalf("preset = %+v, %v", out, err)
	}
	_, err = Decide(s, def, events.PresetChosen{Preset: "everything"}, Limits{})
	if !errors.Is(err, resolver.ErrUnknownPreset) || !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("unknown preset = %v", err)
	}
	for _, name := range append([]string{`"everything"`}, def.PresetNames()...) {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	s = Fold(testSession, stored(events.PresetChosen{Preset: "research"}))
	if out := decideOK(t, s, def, events.PresetChosen{Preset: "research"}); len(out) != 0 {
		t.Fatalf("same preset = %+v", out)
	}
	if out := decideOK(t, s, def, events.PresetChosen{}); len(out) != 1 {
		t.Fatalf("unset preset = %+v", out)
	}
}

// The web_search overlay needs a web_search tool.
func TestDecideWebSearchNeedsTool(t *testing.T) {
	reg, err := resolver.Load([]byte(`{"version":"t","tools":[{"name":"tool_search","description":"t","parameters":{"type":"object"},"available":true}],"default_tools":["tool_search"]}`))
	if err != nil {
		t.Fatal(err)
	}
	decideErr(t, State{}, reg, events.WebSearchSet{Enabled: bp(true)}, Limits{}, ErrUnknownTool, "web_search")
	if out := decideOK(t, State{}, reg, events.WebSearchSet{Enabled: bp(false)}); len(out) != 1 {
		t.Fatalf("off = %+v", out)
	}
}

// Disabled list rules.
func TestDecideDisabled(t *testing.T) {
	def := resolver.Default()
	var s State
	if out := decideOK(t, s, def, events.ToolDisabled{Name: "bash"}); len(out) != 1 {
		t.Fatalf("disable = %+v", out)
	}
	decideErr(t, s, def, events.ToolDisabled{Name: "nope"}, Limits{}, ErrUnknownTool, `"nope"`)
	decideErr(t, s, def, events.ToolDisabled{Name: ""}, Limits{}, ErrInvalidCommand)
	s = Fold(testSession, stored(events.ToolDisabled{Name: "bash"}, events.ToolDisabled{Name: "grep"}))
	if out := decideOK(t, s, def, events.ToolDisabled{Name: "bash"}); len(out) != 0 {
		t.Fatalf("disable twice = %+v", out)
	}
	decideErr(t, s, def, events.ToolDisabled{Name: "glob"}, Limits{MaxDisabled: 2}, ErrInvalidCommand, "at most 2")
	if out := decideOK(t, s, def, events.ToolEnabled{Name: "bash"}); len(out) != 1 {
		t.Fatalf("enable = %+v", out)
	}
	// Enabling a tool that is not disabled is a no-op, even an unknown one
	// (a removed tool can still be cleaned up).
	if out := decideOK(t, s, def, events.ToolEnabled{Name: "glob"}); len(out) != 0 {
		t.Fatalf("enable not disabled = %+v", out)
	}
	decideErr(t, s, def, events.ToolEnabled{Name: "a b"}, Limits{}, ErrInvalidCommand)
}

// DeferredLoaded names deferred tools of the current turn;
// already-loaded names are dropped.
func TestDecideDeferredLoaded(t *testing.T) {
	def := resolver.Default()
	s := Fold(testSession, stored(events.TurnStarted{Turn: 1}))
	out := decideOK(t, s, def, events.DeferredLoaded{Names: []string{"playwright_browser", "send_message", "playwright_browser"}})
	want := []events.Payload{events.DeferredLoaded{Names: []string{"playwright_browser", "send_message"}, Turn: 1}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("out = %+v", out)
	}
	decideErr(t, s, def, events.DeferredLoaded{Names: []string{"read_file"}}, Limits{}, ErrInvalidCommand, `"read_file" is resident`)
	decideErr(t, s, def, events.DeferredLoaded{Names: []string{"tool_search"}}, Limits{}, ErrInvalidCommand, "resident")
	decideErr(t, s, def, events.DeferredLoaded{Names: []string{"nope"}}, Limits{}, ErrUnknownTool)
	decideErr(t, s, def, events.DeferredLoaded{}, Limits{}, ErrInvalidCommand, "no names")
	decideErr(t, s, def, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 2}, Limits{}, ErrInvalidCommand, "turn 2, want the current turn 1")
	s.Apply(2, env(want[0]))
	if out := decideOK(t, s, def, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 1}); len(out) != 0 {
		t.Fatalf("reload = %+v", out)
	}
}

// Turn boundaries are numbered consecutively.
func TestDecideTurns(t *testing.T) {
	def := resolver.Default()
	var s State
	decideErr(t, s, def, events.TurnEnded{}, Limits{}, ErrInvalidCommand, "no turn has started")
	decideErr(t, s, def, events.TurnStarted{Turn: 2}, Limits{}, ErrInvalidCommand, "turn 2, want 1")
	if out := decideOK(t, s, def, events.TurnStarted{}); !reflect.DeepEqual(out, []events.Payload{events.TurnStarted{Turn: 1}}) {
		t.Fatalf("start = %+v", out)
	}
	s = Fold(testSession, stored(events.TurnStarted{Turn: 1}))
	// Starting the next turn while one is open closes it first.
	if out := decideOK(t, s, def, events.TurnStarted{Turn: 2}); !reflect.DeepEqual(out, []events.Payload{events.TurnEnded{Turn: 1}, events.TurnStarted{Turn: 2}}) {
		t.Fatalf("start while open = %+v", out)
	}
	decideErr(t, s, def, events.TurnEnded{Turn: 3}, Limits{}, ErrInvalidCommand, "want the current turn 1")
	if out := decideOK(t, s, def, events.TurnEnded{Turn: 1}); !reflect.DeepEqual(out, []events.Payload{events.TurnEnded{Turn: 1}}) {
		t.Fatalf("end = %+v", out)
	}
	s.Apply(2, env(events.TurnEnded{Turn: 1}))
	if out := decideOK(t, s, def, events.TurnEnded{}); len(out) != 0 {
		t.Fatalf("end twice = %+v", out)
	}
}

// realContract is the contract of a resolution of reg, as the engine
// records it.
func realContract(t *testing.T, reg *resolver.Registry) (string, []events.ContractEntry) {
	t.Helper()
	res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: bp(true)}})
	if err != nil {
		t.Fatal(err)
	}
	var c []events.ContractEntry
	for _, tl := range res.Tools {
		c = append(c, events.ContractEntry{Name: tl.Name, Hash: resolver.ToolHash(tl)})
	}
	return res.ContractHash, c
}

// A checkpoint records deferred tools of its contract, with a
// well-formed hash the contract adds up to.
func TestDecideCheckpoint(t *testing.T) {
	def := resolver.Default()
	s := Fold(testSession, stored(events.TurnStarted{Turn: 1}, events.TurnStarted{Turn: 2}))
	sum, contract := realContract(t, def)
	good := events.CheckpointRecorded{Loaded: []string{"send_message", "playwright_browser", "send_message"}, ContractHash: sum, RegistryVersion: def.Version(), Contract: contract}
	out := decideOK(t, s, def, good)
	got := out[0].(events.CheckpointRecorded)
	if !reflect.DeepEqual(got.Loaded, []string{"playwright_browser", "send_message"}) || got.Turn != 2 {
		t.Fatalf("checkpoint = %+v", got)
	}
	if good.Loaded[0] != "send_message" {
		t.Fatal("Decide modified the command")
	}
	if out := decideOK(t, s, def, events.CheckpointRecorded{ContractHash: hash(1), RegistryVersion: "v"}); out[0].(events.CheckpointRecorded).Loaded == nil {
		t.Fatal("empty loaded set should be written explicitly")
	}
	bad := good
	bad.ContractHash = ""
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, "contract_hash")
	bad.ContractHash = "x"
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, `contract_hash "x" is not a SHA-256`)
	bad.ContractHash = hash(3)
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, "add up to")
	bad = good
	bad.RegistryVersion = ""
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, "registry_version is empty")
	bad = good
	bad.Turn = 3
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, "turn 3")
	bad = good
	bad.Loaded = []string{"nope"}
	decideErr(t, s, def, bad, Limits{}, ErrUnknownTool)
	bad = good
	bad.Contract = nil
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, `"send_message" is not in the recorded contract`)
	// The API gap: a resident tool is never loaded.
	bad = good
	bad.Loaded = []string{"read_file"}
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, `"read_file" is resident`)
	bad.Loaded = []string{"tool_search"}
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, `"tool_search" is resident`)
	bad = good
	bad.Contract = slices.Clone(good.Contract)
	bad.Contract[0].Hash = "1"
	decideErr(t, s, def, bad, Limits{}, ErrInvalidCommand, "is not a SHA-256")
	// A checkpoint of a frozen turn under an older registry: its contract
	// adds up, and the live registry cannot say what was deferred then.
	old := good
	old.RegistryVersion = "builtin-2025.1"
	old.ContractHash, _ = resolver.ContractHashFromToolHashes(old.RegistryVersion, hashesOf(old.Contract))
	decideOK(t, s, def, old)
}

// A checkpoint whose contract lists exactly its loaded tools,
// with their hashes, is decided without the rest of the contract, however
// large the registry; a list that is neither that nor a whole contract
// adding up to the hash is refused, naming both forms.
func TestDecideCheckpointLoadedOnly(t *testing.T) {
	def := resolver.Default()
	s := Fold(testSession, stored(events.TurnStarted{Turn: 1}))
	sum, contract := realContract(t, def)
	var loaded []events.ContractEntry
	for _, e := range contract {
		if e.Name == "send_message" || e.Name == "playwright_browser" {
			loaded = append(loaded, e)
		}
	}
	good := events.CheckpointRecorded{Loaded: []string{"send_message", "playwright_browser"}, ContractHash: sum, RegistryVersion: def.Version(), Contract: loaded}
	out := decideOK(t, s, def, good)
	if got := out[0].(events.CheckpointRecorded); !slices.Equal(got.Contract, loaded) {
		t.Fatalf("checkpoint = %+v, want its loaded entries kept", got)
	}
	empty := events.CheckpointRecorded{Loaded: []string{}, ContractHash: sum, RegistryVersion: def.Version(), Contract: []events.ContractEntry{}}
	decideOK(t, s, def, empty)

	extra := good
	extra.Contract = append(slices.Clone(loaded), contract[0])
	decideErr(t, s, def, extra, Limits{}, ErrInvalidCommand, "list exactly the loaded tools")
	dup := good
	dup.Contract = []events.ContractEntry{loaded[0], loaded[1], loaded[0]}
	decideErr(t, s, def, dup, Limits{}, ErrInvalidCommand, "list exactly the loaded tools")
	badHash := good
	badHash.Contract = slices.Clone(loaded)
	badHash.Contract[1].Hash = "1"
	decideErr(t, s, def, badHash, Limits{}, ErrInvalidCommand, "is not a SHA-256")
}

// Limits looser than the wire bounds are lowered to them, so
// Decide never writes what the fold rejects.
func TestDecideLimitsClampedToWireBounds(t *testing.T) {
	def := resolver.Default()
	var names []string
	for _, tl := range def.Tools() {
		if len(names) < events.MaxPicked+1 && tl.Name != resolver.WebSearch {
			names = append(names, tl.Name)
		}
	}
	if len(names) != events.MaxPicked+1 {
		t.Fatalf("default registry has %d tools, want more than %d", len(names), events.MaxPicked)
	}
	var s State
	decideErr(t, s, def, events.ToolsPicked{Names: names}, Limits{MaxPicked: 100}, ErrMaterialized, fmt.Sprintf("at most %d", events.MaxPicked))
	if out, err := Decide(s, def, events.ToolsPicked{Names: names[:3]}, Limits{MaxPicked: 100}); err != nil || len(out) != 1 {
		t.Fatalf("a short list: %v, %v", out, err)
	}
}

// Tool_search loads only inside an open turn.
func TestDecideLoadOutsideTurn(t *testing.T) {
	def := resolver.Default()
	decideErr(t, State{}, def, events.DeferredLoaded{Names: []string{"send_message"}}, Limits{}, ErrInvalidCommand, "no turn is open")
	ended := Fold(testSession, stored(events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1}))
	decideErr(t, ended, def, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 1}, Limits{}, ErrInvalidCommand, "no turn is open")
}

// Decide never panics on bad input.
func TestDecideBadInput(t *testing.T) {
	def := resolver.Default()
	decideErr(t, State{}, nil, events.TurnStarted{}, Limits{}, ErrInvalidCommand, "registry is nil")
	decideErr(t, State{}, def, nil, Limits{}, ErrInvalidCommand)
	decideErr(t, State{}, def, foreign{}, Limits{}, ErrInvalidCommand)
	decideErr(t, State{}, def, (*events.TurnStarted)(nil), Limits{}, ErrInvalidCommand)
}

// "all on" after a picked list is the user's new choice. ToolsToggled
// clears the picked list in the fold (for every replay), so pick
// read_file,grep then enable resolves to the whole defaults, not 2 tools;
// and Decide does not treat ToolsToggled{true} as a no-op while a picked
// list is set, even when enabled is already true.
func TestAllOnClearsPicked(t *testing.T) {
	reg := resolver.Default()
	var s State
	seq := uint64(0)
	apply := func(cmd Command) []events.Payload {
		t.Helper()
		out := decideOK(t, s, reg, cmd)
		for _, p := range out {
			seq++
			s.Apply(seq, env(p))
		}
		return out
	}
	apply(events.ToolsToggled{Enabled: bp(true)})
	apply(events.ToolsPicked{Names: []string{"read_file", "grep"}})
	res, err := reg.Resolve(resolver.Request{Session: s.Intent})
	if err != nil || len(res.Tools) != 2 {
		t.Fatalf("picked: %v %v; want 2 tools", res, err)
	}
	if out := apply(events.ToolsToggled{Enabled: bp(true)}); len(out) != 1 {
		t.Fatalf("ToolsToggled{true} with enabled already true and a picked list: Decide = %v; want the event (it clears picked)", out)
	}
	if s.Intent.Picked != nil {
		t.Fatalf("picked list survived all on: %s", describeIntent(s.Intent))
	}
	res, err = reg.Resolve(resolver.Request{Session: s.Intent})
	if err != nil || len(res.Tools) != len(reg.DefaultTools()) {
		t.Fatalf("after all on: %d tools, %v; want the %d defaults", len(res.Tools), err, len(reg.DefaultTools()))
	}
	if out := apply(events.ToolsToggled{Enabled: bp(true)}); len(out) != 0 {
		t.Fatalf("ToolsToggled{true} again with nothing to clear: %v; want a no-op", out)
	}
	// "Follow profile" after a picked list follows the profile.
	apply(events.ToolsPicked{Names: []string{"read_file", "grep"}})
	apply(events.ToolsToggled{})
	res, err = reg.Resolve(resolver.Request{Session: s.Intent, Profile: "coder"})
	coding, _ := reg.Preset("coding")
	if err != nil || len(res.Tools) != len(coding) {
		t.Fatalf("follow profile after a picked list: %d tools, %v; want the coder profile's %d", len(res.Tools), err, len(coding))
	}
}

// Disabled and picked lists take name patterns that match
// registry tools; a pattern that matches none is an unknown tool, a
// malformed one an invalid command.
func TestDecidePatterns(t *testing.T) {
	def := resolver.Default()
	s := State{Session: "s"}
	if got := decideOK(t, s, def, events.ToolDisabled{Name: "*_plan_mode"}); len(got) != 1 {
		t.Errorf("disable a pattern: %v", got)
	}
	decideErr(t, s, def, events.ToolDisabled{Name: "mcp__nope__*"}, Limits{}, ErrUnknownTool, "matches no tool")
	decideErr(t, s, def, events.ToolDisabled{Name: "mcp.*"}, Limits{}, ErrInvalidCommand)
	if got := decideOK(t, s, def, events.ToolsPicked{Names: []string{"read_file", "*_plan_mode"}}); len(got) != 1 {
		t.Errorf("pick a pattern: %v", got)
	}
	decideErr(t, s, def, events.ToolsPicked{Names: []string{"read_file", "ghost_*"}}, Limits{}, ErrUnknownTool, "ghost_*")
}

// An overlay switch adds the tool of its own name: the intent key of
// WebSearchSet's switch is the web_search tool.
func TestOverlayKeyIsItsTool(t *testing.T) {
	key, _, _, ok := events.Overlay(events.WebSearchSet{})
	if !ok || key != resolver.WebSearch {
		t.Fatalf("Overlay(WebSearchSet) = %q, %v; want %q", key, ok, resolver.WebSearch)
	}
}
