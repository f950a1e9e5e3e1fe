package legacy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// thenDefaults is DEFAULT_TOOLS of the embedded registry before
// list_sessions and send_message were added (the seed's story, §1.3).
func thenDefaults(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, n := range resolver.Default().DefaultTools() {
		if n != "list_sessions" && n != "send_message" {
			out = append(out, n)
		}
	}
	return out
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = `"` + x + `"`
	}
	return "[" + strings.Join(q, ",") + "]"
}

func planOne(t *testing.T, file string) Decision {
	t.Helper()
	f, err := Parse([]byte(file))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	rep := Plan(resolver.Default(), f, Options{})
	if len(rep.Decisions) != 1 {
		t.Fatalf("%d decisions", len(rep.Decisions))
	}
	return rep.Decisions[0]
}

func types(ps []events.Payload) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.EventType()))
	}
	return out
}

// The seed's original failure: a session saved with the whole default
// list (of that time) plus web_search, because web_search was on, imports
// as {enabled: true} with the web_search overlay; today it gains the tools
// added to the defaults since, and nothing is lost.
func TestImportMaterializedDefaultsWithWebSearch(t *testing.T) {
	then := thenDefaults(t)
	d := planOne(t, `{"defaults": `+quoteList(then)+`, "sessions": [{"session": "s1", "web_search": true, "tools": `+quoteList(append(then, "web_search"))+`}]}`)
	if d.Kind != KindEnabled || !slices.Equal(types(d.Events), []string{"ToolsToggled", "WebSearchSet"}) || !d.Faithful {
		t.Fatalf("decision %+v events %v; want enabled + web_search, faithful", d, types(d.Events))
	}
	if !slices.Equal(d.Gained, []string{"list_sessions", "send_message"}) || d.Lost != nil {
		t.Fatalf("today gains %v loses %v; want list_sessions, send_message and nothing lost", d.Gained, d.Lost)
	}
	if d.Intent.Picked != nil || d.Intent.Enabled == nil || !*d.Intent.Enabled || d.Intent.WebSearch == nil || !*d.Intent.WebSearch {
		t.Fatalf("intent %+v", d.Intent)
	}
}

// Each stored form imports as the intent that reproduces it, with
// the shortest faithful intent where no whole list matches.
func TestImportDecisions(t *testing.T) {
	reg := resolver.Default()
	defaults := reg.DefaultTools()
	research, _ := reg.Preset("research")
	coding, _ := reg.Preset("coding")
	cases := []struct {
		name   string
		tools  string
		extra  string
		kind   string
		preset string
		events []string
		check  func(d Decision) bool
	}{
		{"defaults of today", quoteList(defaults), "", KindEnabled, "", []string{"ToolsToggled"}, nil},
		{"a materialized preset", quoteList(research), "", KindPreset, "research", []string{"PresetChosen"}, nil},
		{"a preset plus web_search", quoteList(append(slices.Clone(coding), "web_search")), "", KindPreset, "coding", []string{"PresetChosen", "WebSearchSet"}, nil},
		{"defaults minus two", quoteList(without(without(defaults, "bash"), "grep")), "", KindDefaultsMinus, "", []string{"ToolsToggled", "ToolDisabled", "ToolDisabled"},
			func(d Decision) bool { return slices.Equal(d.Intent.Disabled, []string{"bash", "grep"}) }},
		{"preset minus web_search is a ToolDisabled", quoteList(without(research, "web_search")), "", KindPresetMinus, "research", []string{"PresetChosen", "ToolDisabled"},
			func(d Decision) bool { return slices.Equal(d.Intent.Disabled, []string{"web_search"}) }},
		{"a short curated list keeps its order", `["grep", "read_file", "memory_read"]`, "", KindPicked, "", []string{"ToolsPicked"},
			func(d Decision) bool {
				return slices.Equal(d.Intent.Picked, []string{"grep", "read_file", "memory_read"})
			}},
		{"empty list is all off", `[]`, "", KindOff, "", []string{"ToolsToggled"}, func(d Decision) bool { return !*d.Intent.Enabled }},
		{"only web_search is off with the overlay", `["web_search"]`, "", KindOffWebSearch, "", []string{"ToolsToggled", "WebSearchSet"}, nil},
		{"web_search flag on an empty list", `[]`, `, "web_search": true`, KindOffWebSearch, "", []string{"ToolsToggled", "WebSearchSet"}, nil},
		{"no list follows the profile", `null`, "", KindFollow, "", nil, nil},
		{"true is all on", `true`, "", KindEnabled, "", []string{"ToolsToggled"}, nil},
		{"false with web_search", `false`, `, "web_search": true`, KindOffWebSearch, "", []string{"ToolsToggled", "WebSearchSet"}, nil},
		// A dict changes the defaults (opencode's form): grep and
		// read_file are defaults already, bash is taken out.
		{"dict form changes the defaults", `{"grep": true, "bash": false, "read_file": true}`, "", KindDefaultsMinus, "", []string{"ToolsToggled", "ToolDisabled"},
			func(d Decision) bool { return slices.Equal(d.Intent.Disabled, []string{"bash"}) }},
		{"unknown names reported and left out", `["read_file", "ghost_tool", "grep", "Bad Name"]`, "", KindPicked, "", []string{"ToolsPicked"},
			func(d Decision) bool {
				return slices.Equal(d.Unknown, []string{"ghost_tool", "Bad Name"}) && slices.Equal(d.Intent.Picked, []string{"read_file", "grep"})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := planOne(t, `[{"session": "s1", "tools": `+tc.tools+tc.extra+`}]`)
			if d.Kind != tc.kind || d.Preset != tc.preset || !slices.Equal(types(d.Events), tc.events) {
				t.Fatalf("decision %s %q events %v (%s); want %s %q %v", d.Kind, d.Preset, types(d.Events), d.Note, tc.kind, tc.preset, tc.events)
			}
			if !d.Faithful || d.Note == "" {
				t.Fatalf("not faithful or no note: %+v", d)
			}
			if tc.check != nil && !tc.check(d) {
				t.Fatalf("intent %+v", d.Intent)
			}
			// Tool_search comes with any deferred tool of the set, so
			// a stored list with one (memory_read) gains it today, and only it.
			gained := slices.DeleteFunc(slices.Clone(d.Gained), func(n string) bool { return n == resolver.ToolSearch })
			if d.Kind != KindFollow && tc.tools != "true" && tc.tools != "false" && (len(gained) > 0 || len(d.Lost) > 0) {
				t.Fatalf("today differs from the stored list against today's registry: +%v -%v", d.Gained, d.Lost)
			}
		})
	}
}

// An import never stores an expanded list: a list that matches no
// whole list and is longer than the picked bound is imported as a preset
// or the defaults minus a few names, or skipped with the reason; the
// bound is the engine's (Options.Limits).
func TestImportRespectsBounds(t *testing.T) {
	reg := resolver.Default()
	full, _ := reg.Preset("full")
	// full minus three, plus nothing else: preset-minus.
	list := without(without(without(full, "bash"), "grep"), "glob")
	d := planOne(t, `[{"session": "s1", "tools": `+quoteList(list)+`}]`)
	if d.Kind != KindPresetMinus || d.Preset != "full" || len(d.Intent.Disabled) != 3 || d.Intent.Picked != nil {
		t.Fatalf("decision %+v", d)
	}
	// With at most one disabled name and 4 picked, a 6-name curated list
	// that is no preset minus one fits nothing: skipped, with the reason.
	f, _ := Parse([]byte(`[{"session": "s2", "tools": ["read_file", "grep", "glob", "memory_read", "image_generate", "web_fetch"]}]`))
	rep := Plan(reg, f, Options{Limits: aggregate.Limits{MaxPicked: 4, MaxDisabled: 1}})
	if d := rep.Decisions[0]; d.Kind != KindSkip || len(d.Events) != 0 || !strings.Contains(d.Note, "picked bound 4") {
		t.Fatalf("decision %+v; want a skip naming the bound", d)
	}
}

// The file is strict: duplicate sessions, bad ids, unknown keys and
// wrong types are refused or skipped with a message naming them.
func TestImportFileErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"sessions": [{"session": "a", "tools": [], "model": "x"}]}`, `unknown key "model"`},
		{`[{"session": "a", "tools": [1]}]`, "tools[0]"},
		{`[{"session": "a", "tools": {"grep": "yes"}}]`, "want true (on) or false (off)"},
		{`[{"tools": []}]`, `no "session" id`},
		{`{"defaults": ["a", "a"], "sessions": []}`, "twice"},
		{`{"sessions": []} []`, "data after the document"},
		{`"x"`, "want a JSON array"},
		{`{"defaults": []}`, `no "sessions" key`},
	} {
		_, err := Parse([]byte(tc.file))
		if !errors.Is(err, ErrInvalidFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v; want ErrInvalidFile with %q", tc.file, err, tc.want)
		}
	}
	f, err := Parse([]byte(`[{"session": "a", "tools": ["grep"]}, {"session": "a", "tools": ["bash"]}, {"session": "b.c", "tools": []}]`))
	if err != nil {
		t.Fatal(err)
	}
	rep := Plan(resolver.Default(), f, Options{})
	if rep.Decisions[1].Kind != KindSkip || !strings.Contains(rep.Decisions[1].Note, "appears twice") {
		t.Errorf("duplicate session: %+v", rep.Decisions[1])
	}
	if rep.Decisions[2].Kind != KindSkip || !strings.Contains(rep.Decisions[2].Note, `"b.c"`) {
		t.Errorf("bad session id: %+v", rep.Decisions[2])
	}
}

// The plan is deterministic, and every decision's events, folded
// through the engine's rules, give the reported intent.
func TestImportDeterministicAndFolds(t *testing.T) {
	reg := resolver.Default()
	file := `{"defaults": ` + quoteList(thenDefaults(t)) + `, "presets": {"research": ["read_file", "web_search", "grep"]}, "sessions": [
	  {"session": "a", "tools": ["read_file", "web_search", "grep"]},
	  {"session": "b", "tools": ["read_file", "grep"]},
	  {"session": "c", "tools": ` + quoteList(without(thenDefaults(t), "bash")) + `}]}`
	f, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	one, two := Plan(reg, f, Options{}), Plan(reg, f, Options{})
	for i := range one.Decisions {
		a, b := one.Decisions[i], two.Decisions[i]
		if a.Kind != b.Kind || a.Note != b.Note || !slices.Equal(types(a.Events), types(b.Events)) {
			t.Fatalf("plan not deterministic: %+v vs %+v", a, b)
		}
		st := aggregate.State{Session: a.Session}
		for j, p := range a.Events {
			st.Apply(uint64(j+1), events.Envelope{Session: a.Session, Type: p.EventType(), Payload: p})
		}
		if !intentEqual(st.Intent, a.Intent) {
			t.Fatalf("%s: events fold to %+v, report says %+v", a.Session, st.Intent, a.Intent)
		}
	}
	// The legacy research preset of that time: a imports as it, and today
	// gains what research gained since.
	if d := one.Decisions[0]; d.Kind != KindPreset || d.Preset != "research" || len(d.Gained) == 0 {
		t.Fatalf("a: %+v", d)
	}
	// b is research of that time minus web_search: preset-minus (1 name)
	// beats picked (2 names).
	if d := one.Decisions[1]; d.Kind != KindPresetMinus || !slices.Equal(d.Intent.Disabled, []string{"web_search"}) {
		t.Fatalf("b: %+v", d)
	}
	if d := one.Decisions[2]; d.Kind != KindDefaultsMinus || !slices.Equal(d.Intent.Disabled, []string{"bash"}) || !slices.Equal(d.Gained, []string{"list_sessions", "send_message"}) {
		t.Fatalf("c: %+v", d)
	}
}

func intentEqual(a, b intent.Intent) bool {
	eq := func(x, y *bool) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return eq(a.Enabled, b.Enabled) && eq(a.WebSearch, b.WebSearch) && a.Preset == b.Preset && slices.Equal(a.Disabled, b.Disabled) && slices.Equal(a.Picked, b.Picked)
}
