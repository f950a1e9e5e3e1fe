package resolver

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type tTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Available   *bool           `json:"available,omitempty"`
	Permission  string          `json:"permission,omitempty"`
}

type tDoc struct {
	Version      string                    `json:"version"`
	Tools        []tTool                   `json:"tools"`
	DefaultTools []string                  `json:"default_tools"`
	Resident     *[]string                 `json:"resident_tools,omitempty"`
	Deferred     []string                  `json:"deferred_default_tools,omitempty"`
	Presets      map[string][]string       `json:"presets,omitempty"`
	Profiles     map[string]map[string]any `json:"profiles,omitempty"`
}

func obj() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }

func baseDoc() *tDoc {
	return &tDoc{
		Version: "v1",
		Tools: []tTool{
			{Name: "read_file", Description: "Read.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Permission: "read"},
			{Name: "tool_search", Description: "Search tools.", Parameters: obj()},
			{Name: "web_search", Description: "Search the web.", Parameters: obj()},
			{Name: "send_message", Description: "Send.", Parameters: obj()},
		},
		DefaultTools: []string{"read_file", "tool_search", "send_message"},
		Deferred:     []string{"send_message"},
		Presets:      map[string][]string{"full": {"read_file", "tool_search", "web_search", "send_message"}},
		Profiles:     map[string]map[string]any{"coder": {"preset": "full"}},
	}
}

func (d *tDoc) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The registry is data loaded from a file; "available" defaults to
// true.
func TestLoadBaseDoc(t *testing.T) {
	r, err := Load(baseDoc().bytes(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != "v1" || r.Len() != 4 {
		t.Fatalf("version %q len %d", r.Version(), r.Len())
	}
	tool, ok := r.Tool("web_search")
	if !ok || !tool.Available {
		t.Fatalf("available must default to true: %+v", tool)
	}
}

// Every bad-input class is rejected with
// ErrInvalidRegistry and a message naming the bad value.
func TestLoadRejects(t *testing.T) {
	f := false
	cases := []struct {
		name string
		raw  string
		mod  func(d *tDoc)
		want []string
	}{
		{name: "not JSON", raw: `{"version":`, want: []string{"invalid JSON"}},
		{name: "trailing data", raw: string(baseDoc().bytes(t)) + ` {}`, want: []string{"trailing data"}},
		{name: "top level array", raw: `[]`, want: []string{"want an object"}},
		{name: "deep nesting", raw: strings.Repeat("[", 200) + strings.Repeat("]", 200), want: []string{"nesting deeper"}},
		{name: "duplicate top-level key", raw: `{"version":"a","version":"b"}`, want: []string{`duplicate key "version"`}},
		{name: "unknown top-level key", raw: strings.Replace(string(baseDoc().bytes(t)), `"version"`, `"defaults":[],"version"`, 1), want: []string{`unknown key "defaults"`}},
		{name: "missing version", mod: func(d *tDoc) { d.Version = "" }, want: []string{`version "": want 1 to 128`}},
		{name: "bad version", mod: func(d *tDoc) { d.Version = "has space" }, want: []string{`version "has space"`}},
		{name: "duplicate tool names", mod: func(d *tDoc) { d.Tools = append(d.Tools, d.Tools[0]) }, want: []string{`tools[4] "read_file": duplicate tool name (first at tools[0])`}},
		{name: "bad tool name", mod: func(d *tDoc) {
			d.Tools[0].Name = "read.file"
			d.DefaultTools[0] = "read.file"
			d.Presets["full"][0] = "read.file"
		}, want: []string{`name "read.file" must match`}},
		{name: "long tool name", mod: func(d *tDoc) { d.Tools[2].Name = strings.Repeat("a", 65); d.Presets = nil }, want: []string{"must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$"}},
		{name: "empty tool name", mod: func(d *tDoc) { d.Tools[2].Name = ""; d.Presets = nil }, want: []string{`name "" must match`}},
		{name: "parameters string", mod: func(d *tDoc) { d.Tools[0].Parameters = json.RawMessage(`"{"`) }, want: []string{`tools[0] "read_file".parameters: is a string`}},
		{name: "parameters array", mod: func(d *tDoc) { d.Tools[0].Parameters = json.RawMessage(`[]`) }, want: []string{"parameters: is an array"}},
		{name: "parameters missing", mod: func(d *tDoc) { d.Tools[0].Parameters = nil }, want: []string{"parameters missing"}},
		{name: "parameters type array", mod: func(d *tDoc) { d.Tools[0].Parameters = json.RawMessage(`{"type":"array"}`) }, want: []string{`parameters.type: is "array"; want "object"`}},
		{name: "parameters no type", mod: func(d *tDoc) { d.Tools[0].Parameters = json.RawMessage(`{"properties":{}}`) }, want: []string{`"type" missing`}},
		{name: "parameters duplicate key", raw: strings.Replace(string(baseDoc().bytes(t)), `{"type":"object"}`, `{"type":"object","type":"object"}`, 1), want: []string{`parameters: duplicate key "type"`}},
		{name: "parameters invalid JSON", raw: strings.Replace(string(baseDoc().bytes(t)), `{"type":"object"}`, `{"type":"object",}`, 1), want: []string{"invalid JSON"}},
		{name: "properties not object", mod: func(d *tDoc) { d.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":[]}`) }, want: []string{"parameters.properties: is an array"}},
		{name: "property not schema", mod: func(d *tDoc) {
			d.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":{"p":"string"}}`)
		}, want: []string{"parameters.properties.p: is a string"}},
		{name: "required unknown property", mod: func(d *tDoc) {
			d.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":{"a":{}},"required":["b"]}`)
		}, want: []string{`required[0]: "b" is not in properties`}},
		{name: "required not array", mod: func(d *tDoc) { d.Tools[0].Parameters = json.RawMessage(`{"type":"object","required":"a"}`) }, want: []string{"required: is a string"}},
		{name: "empty description", mod: func(d *tDoc) { d.Tools[1].Description = " " }, want: []string{`tools[1] "tool_search": description is empty`}},
		{name: "available not bool", raw: strings.Replace(string(baseDoc().bytes(t)), `"name":"web_search",`, `"name":"web_search","available":"yes",`, 1), want: []string{"available: is a string; want true or false"}},
		{name: "unknown tool key", raw: strings.Replace(string(baseDoc().bytes(t)), `"name":"web_search",`, `"name":"web_search","avail":true,`, 1), want: []string{`tools[2]: unknown key "avail"`}},
		{name: "bad permission", mod: func(d *tDoc) { d.Tools[0].Permission = "Read Only" }, want: []string{`permission "Read Only"`}},
		{name: "tools not array", raw: `{"version":"v","tools":{},"default_tools":[]}`, want: []string{"tools: is an object"}},
		{name: "tool not object", raw: `{"version":"v","tools":[1],"default_tools":[]}`, want: []string{"tools[0]: is a number"}},
		{name: "preset unknown tool", mod: func(d *tDoc) { d.Presets["full"] = append(d.Presets["full"], "ghost") }, want: []string{`presets.full[4]: unknown tool "ghost"`}},
		{name: "preset duplicate", mod: func(d *tDoc) { d.Presets["full"] = append(d.Presets["full"], "read_file") }, want: []string{`presets.full[4]: "read_file" repeats presets.full[0]`}},
		{name: "preset bad name", mod: func(d *tDoc) { d.Presets["Full set"] = []string{} }, want: []string{`presets: name "Full set"`}},
		{name: "preset null", raw: strings.Replace(string(baseDoc().bytes(t)), `"presets":{`, `"presets":{"none":null,`, 1), want: []string{"presets.none: is null"}},
		{name: "preset not list", raw: strings.Replace(string(baseDoc().bytes(t)), `"presets":{`, `"presets":{"none":"read_file",`, 1), want: []string{"presets.none: is a string"}},
		{name: "preset element not string", raw: strings.Replace(string(baseDoc().bytes(t)), `"presets":{`, `"presets":{"none":[1],`, 1), want: []string{"presets.none[0]: is a number"}},
		{name: "presets not object", raw: strings.Replace(string(baseDoc().bytes(t)), `"presets":{"full":["read_file","tool_search","web_search","send_message"]}`, `"presets":[]`, 1), want: []string{"presets: is an array"}},
		{name: "default unknown tool", mod: func(d *tDoc) { d.DefaultTools = append(d.DefaultTools, "ghost") }, want: []string{`default_tools[3]: unknown tool "ghost"`}},
		{name: "default duplicate", mod: func(d *tDoc) { d.DefaultTools = append(d.DefaultTools, "read_file") }, want: []string{`default_tools[3]: "read_file" repeats`}},
		{name: "web_search in defaults", mod: func(d *tDoc) { d.DefaultTools = append(d.DefaultTools, "web_search") }, want: []string{`default_tools: contains "web_search"`}},
		{name: "tool_search missing from tools", mod: func(d *tDoc) {
			d.Tools = slices.Delete(d.Tools, 1, 2)
			d.DefaultTools = []string{"read_file", "send_message"}
			d.Presets = nil
		}, want: []string{`no tool named "tool_search"`, `default_tools: "tool_search" is missing`}},
		{name: "tool_search missing from defaults", mod: func(d *tDoc) { d.DefaultTools = []string{"read_file", "send_message"} }, want: []string{`default_tools: "tool_search" is missing`}},
		{name: "tool_search unavailable", mod: func(d *tDoc) { d.Tools[1].Available = &f }, want: []string{`"tool_search" has available=false`}},
		{name: "missing default_tools", raw: `{"version":"v","tools":[{"name":"tool_search","description":"d","parameters":{"type":"object"}}]}`, want: []string{"default_tools: missing"}},
		{name: "missing tools", raw: `{"version":"v","default_tools":["tool_search"]}`, want: []string{"tools: missing"}},
		{name: "resident and deferred", mod: func(d *tDoc) { d.Resident = &[]string{"read_file", "send_message"} }, want: []string{`resident_tools[1]: "send_message" is also in deferred_default_tools`}},
		{name: "resident unknown tool", mod: func(d *tDoc) { d.Resident = &[]string{"ghost"} }, want: []string{`resident_tools[0]: unknown tool "ghost"`}},
		{name: "deferred not in defaults", mod: func(d *tDoc) { d.Deferred = []string{"web_search"} }, want: []string{`deferred_default_tools[0]: "web_search" is not in default_tools`}},
		{name: "tool_search deferred", mod: func(d *tDoc) { d.Deferred = []string{"tool_search"} }, want: []string{`deferred_default_tools[0]: "tool_search" can never be deferred`}},
		{name: "profile unknown preset", mod: func(d *tDoc) { d.Profiles["coder"] = map[string]any{"preset": "codng"} }, want: []string{`profiles.coder.preset "codng": unknown preset; use one of full`}},
		{name: "profile unknown tool", mod: func(d *tDoc) { d.Profiles["x"] = map[string]any{"tools": []string{"ghost"}} }, want: []string{`profiles.x.tools[0]: unknown tool "ghost"`}},
		{name: "profile tools and preset", mod: func(d *tDoc) { d.Profiles["x"] = map[string]any{"tools": []string{}, "preset": "full"} }, want: []string{`profiles.x: sets both "tools" and "preset"`}},
		{name: "profile allowed with preset", mod: func(d *tDoc) { d.Profiles["x"] = map[string]any{"allowed": []string{"read_file"}, "preset": "full"} }, want: []string{`profiles.x: "allowed" filters the defaults and has no effect`}},
		{name: "profile allowed not a default", mod: func(d *tDoc) { d.Profiles["x"] = map[string]any{"allowed": []string{"web_search"}} }, want: []string{`profiles.x.allowed[0]: "web_search" is not in default_tools`}},
		{name: "profile unknown key", mod: func(d *tDoc) { d.Profiles["x"] = map[string]any{"toolset": "full"} }, want: []string{`profiles.x: unknown key "toolset"`}},
		{name: "profile bad name", mod: func(d *tDoc) { d.Profiles["x.y"] = map[string]any{} }, want: []string{`profiles: name "x.y"`}},
		{name: "profile not object", mod: func(d *tDoc) { d.Profiles["x"] = nil }, want: []string{"profiles.x: is null"}},
		{name: "profile preset not string", mod: func(d *tDoc) { d.Profiles["x"] = map[string]any{"preset": 3} }, want: []string{"profiles.x.preset: is a number; want a string"}},
		{name: "every problem is reported", mod: func(d *tDoc) {
			d.Version = ""
			d.Tools[0].Description = ""
			d.DefaultTools = append(d.DefaultTools, "ghost", "web_search")
			d.Presets["full"] = append(d.Presets["full"], "phantom")
		}, want: []string{"version", "description is empty", `unknown tool "ghost"`, `contains "web_search"`, `unknown tool "phantom"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.mod != nil {
				d := baseDoc()
				tc.mod(d)
				data = d.bytes(t)
			}
			r, err := Load(data)
			if err == nil {
				t.Fatalf("loaded %s; want an error", data)
			}
			if r != nil || !errors.Is(err, ErrInvalidRegistry) {
				t.Fatalf("got %v, %v; want nil and ErrInvalidRegistry", r, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			// Messages are deterministic (no map order reaches them).
			_, err2 := Load(data)
			if err.Error() != err2.Error() {
				t.Errorf("error message changed between loads:\n%s\n%s", err, err2)
			}
		})
	}
}

// Parameter schemas are stored canonical, so formatting and key
// order of the file never reach bytes or hashes.
func TestLoadCanonicalParameters(t *testing.T) {
	a := baseDoc()
	a.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":{"b":{"type":"string","description":"x <y> & \u00e9"},"a":{"enum":[3,1.50,"\n"]}},"required":["a"]}`)
	b := baseDoc()
	b.Tools[0].Parameters = json.RawMessage("{\n  \"required\" : [ \"a\" ],\n  \"properties\": {\"a\": {\"enum\": [3, 1.50, \"\\n\"]},\n \"b\":{\"description\":\"x \\u003cy> &amp; é\"   ,\"type\":\"string\"}},\"type\":\"object\"}")
	b.Tools[0].Parameters = bytes.ReplaceAll(b.Tools[0].Parameters, []byte("&amp;"), []byte("&"))
	ra, err := Load(a.bytes(t))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Load(b.bytes(t))
	if err != nil {
		t.Fatal(err)
	}
	ta, _ := ra.Tool("read_file")
	tb, _ := rb.Tool("read_file")
	want := `{"properties":{"a":{"enum":[3,1.50,"\n"]},"b":{"description":"x <y> & é","type":"string"}},"required":["a"],"type":"object"}`
	if string(ta.Parameters) != want || string(tb.Parameters) != want {
		t.Fatalf("canonical parameters:\n%s\n%s\nwant\n%s", ta.Parameters, tb.Parameters, want)
	}
	if ToolHash(ta) != ToolHash(tb) || ContractHash(ra.Version(), ra.Tools()) != ContractHash(rb.Version(), rb.Tools()) {
		t.Fatalf("hashes depend on formatting")
	}
	ma, _ := ra.MarshalJSON()
	mb, _ := rb.MarshalJSON()
	if !bytes.Equal(ma, mb) {
		t.Fatalf("MarshalJSON depends on formatting")
	}
}

// Canonicalize sorts keys recursively, compacts, and is idempotent.
func TestCanonicalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":{"d":[1, {"z":null,"y":true}],"c":false}}`, `{"a":{"c":false,"d":[1,{"y":true,"z":null}]},"b":1}`},
		{` "\u2028\u0001\t" `, `"\u2028\u0001\t"`},
		{`[1e3, -0, 0.10]`, `[1e3,-0,0.10]`},
		{`{"é":1,"e":2,"E":3}`, `{"E":3,"e":2,"é":1}`},
	}
	for _, tc := range cases {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		again, _ := Canonicalize(got)
		if !bytes.Equal(again, got) {
			t.Errorf("Canonicalize is not idempotent on %s", got)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1,"a":2}`, `[1,]`, `1 2`} {
		if _, err := Canonicalize([]byte(bad)); err == nil {
			t.Errorf("Canonicalize(%q) succeeded", bad)
		}
	}
}

// Deferral marks come from RESIDENT_TOOLS (derived when absent),
// deferred defaults stay in the defaults, tool_search is never deferred.
func TestLoadDeferralMarks(t *testing.T) {
	r, err := Load(baseDoc().bytes(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"read_file": false, "tool_search": false, "web_search": true, "send_message": true}
	for name, deferred := range want {
		tool, _ := r.Tool(name)
		if tool.Deferred != deferred || r.IsResident(name) == deferred {
			t.Errorf("%s: deferred=%v resident=%v; want deferred=%v", name, tool.Deferred, r.IsResident(name), deferred)
		}
	}
	if got := r.ResidentTools(); !slices.Equal(got, []string{"read_file", "tool_search"}) {
		t.Errorf("derived resident tools = %q", got)
	}
	if got := r.DefaultTools(); !slices.Contains(got, "send_message") {
		t.Errorf("deferred default left the defaults: %q", got)
	}
	// Guard 2: an explicit resident list without tool_search.
	d := baseDoc()
	d.Resident = &[]string{"read_file"}
	r, err = Load(d.bytes(t))
	if err != nil {
		t.Fatal(err)
	}
	if tool, _ := r.Tool(ToolSearch); tool.Deferred || !r.IsResident(ToolSearch) {
		t.Errorf("tool_search deferred with an explicit resident list")
	}
	if r.IsResident("ghost") {
		t.Errorf("unknown name reported resident")
	}
	// Marking is idempotent: loading the marshalled registry again
	// yields the same marks and bytes.
	m1, _ := r.MarshalJSON()
	r2, err := Load(m1)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := r2.MarshalJSON()
	if !bytes.Equal(m1, m2) || !slices.EqualFunc(r.Tools(), r2.Tools(), func(a, b Tool) bool { return ToolHash(a) == ToolHash(b) }) {
		t.Errorf("re-marking changed the registry")
	}
}

// Accessors return copies; the registry cannot be changed through them.
func TestRegistryAccessorsCopy(t *testing.T) {
	r := mustLoadFile(t, "small_registry.json")
	r.Tools()[0].Name = "x"
	r.DefaultTools()[0] = "x"
	r.ResidentTools()[0] = "x"
	p, _ := r.Preset("coding")
	p[0] = "x"
	r.PresetNames()[0] = "x"
	prof, _ := r.Profile("researcher")
	prof.Tools[0] = "x"
	r.ProfileNames()[0] = "x"
	if r.Tools()[0].Name != "read_file" || r.DefaultTools()[0] != "read_file" || r.ResidentTools()[0] != "read_file" ||
		r.PresetNames()[0] != "coding" || r.ProfileNames()[0] != "assistant" {
		t.Fatal("accessor result aliases the registry")
	}
	if p, _ := r.Preset("coding"); p[0] != "read_file" {
		t.Fatal("Preset aliases the registry")
	}
	if prof, _ := r.Profile("researcher"); prof.Tools[0] != "read_file" || prof.Name != "researcher" {
		t.Fatal("Profile aliases the registry")
	}
	if prof, _ := r.Profile("silent"); prof.Tools == nil || len(prof.Tools) != 0 {
		t.Fatalf("empty profile tools must stay non-nil: %#v", prof.Tools)
	}
	if _, ok := r.Preset("ghost"); ok {
		t.Fatal("unknown preset found")
	}
	if _, ok := r.Profile("ghost"); ok {
		t.Fatal("unknown profile found")
	}
	if _, ok := r.Tool("ghost"); ok {
		t.Fatal("unknown tool found")
	}
	if got := r.DefaultTools(); slices.Contains(got, "legacy_tool") {
		t.Fatalf("DefaultTools lists an unavailable tool: %q", got)
	}
	if got := r.DeferredDefaultTools(); !slices.Equal(got, []string{"send_message"}) {
		t.Fatalf("DeferredDefaultTools = %q", got)
	}
}

// LoadFile wraps the path into its errors.
func TestLoadFile(t *testing.T) {
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v; want not-exist", err)
	}
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); !errors.Is(err, ErrInvalidRegistry) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v", err)
	}
}

// MarshalJSON is canonical: loading its output and marshalling again
// gives the same bytes, and resolutions agree.
func TestMarshalRoundTrip(t *testing.T) {
	for _, r := range []*Registry{mustLoadFile(t, "small_registry.json"), Default()} {
		m1, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Load(m1)
		if err != nil {
			t.Fatal(err)
		}
		m2, _ := r2.MarshalJSON()
		if !bytes.Equal(m1, m2) {
			t.Fatalf("round trip changed bytes")
		}
		if !json.Valid(m1) {
			t.Fatalf("MarshalJSON output is not JSON")
		}
		a, _ := r.Resolve(Request{Session: Intent{WebSearch: yes}})
		b, _ := r2.Resolve(Request{Session: Intent{WebSearch: yes}})
		if a.ContractHash != b.ContractHash {
			t.Fatalf("round trip changed resolution")
		}
	}
}

// The embedded default registry loads, keeps the seed's
// DEFERRED_DEFAULT_TOOLS in the defaults but not resident, and never defers
// tool_search.
func TestDefaultRegistry(t *testing.T) {
	r := Default()
	if r != Default() {
		t.Fatal("Default is not shared")
	}
	if !bytes.Equal(DefaultRegistryJSON(), defaultRegistryJSON) {
		t.Fatal("DefaultRegistryJSON differs from the embedded file")
	}
	if _, err := Load(DefaultRegistryJSON()); err != nil {
		t.Fatal(err)
	}
	if tool, ok := r.Tool(ToolSearch); !ok || tool.Deferred || !r.IsResident(ToolSearch) {
		t.Fatalf("tool_search missing or deferred")
	}
	defaults := r.DefaultTools()
	if slices.Contains(defaults, WebSearch) || !slices.Contains(defaults, ToolSearch) {
		t.Fatalf("defaults %q", defaults)
	}
	for _, name := range r.DeferredDefaultTools() {
		tool, _ := r.Tool(name)
		if !tool.Deferred || r.IsResident(name) {
			t.Errorf("%s: deferred default is resident", name)
		}
	}
	res, err := r.Resolve(Request{Session: Intent{Enabled: yes}})
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("resolve defaults: %v", err)
	}
}
