package resolver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func smallTools(t *testing.T, names ...string) []Tool {
	t.Helper()
	reg := mustLoadFile(t, "small_registry.json")
	res, err := reg.Resolve(Request{Override: Override{Kind: OverrideNames, Names: names}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// Rendered bytes are exactly these for this input.
func TestRenderAnthropicGolden(t *testing.T) {
	got := RenderAnthropic(smallTools(t, "read_file", "bash"))
	want := `[{"name":"read_file","description":"Read a file.","input_schema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},` +
		`{"name":"bash","description":"Run a shell command.","input_schema":{"properties":{"command":{"type":"string"}},"type":"object"},"cache_control":{"type":"ephemeral"}}]`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// OpenAI Responses rendering is exactly this for this input.
func TestRenderOpenAIGolden(t *testing.T) {
	got := RenderOpenAI(smallTools(t, "read_file", "bash"))
	want := `[{"type":"function","name":"read_file","description":"Read a file.","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"strict":false},` +
		`{"type":"function","name":"bash","description":"Run a shell command.","parameters":{"properties":{"command":{"type":"string"}},"type":"object"},"strict":false}]`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// No tools render as an empty array; a tool without parameters gets an
// empty object schema; a single tool carries the cache breakpoint.
func TestRenderEdges(t *testing.T) {
	if got := RenderAnthropic(nil); string(got) != "[]" {
		t.Errorf("Anthropic(nil) = %s", got)
	}
	if got := RenderOpenAI([]Tool{}); string(got) != "[]" {
		t.Errorf("OpenAI([]) = %s", got)
	}
	one := []Tool{{Name: "x", Description: "say \"hi\" <now>\n"}}
	if got, want := string(RenderAnthropic(one)), `[{"name":"x","description":"say \"hi\" <now>\n","input_schema":{"properties":{},"type":"object"},"cache_control":{"type":"ephemeral"}}]`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if got, want := string(RenderOpenAI(one)), `[{"type":"function","name":"x","description":"say \"hi\" <now>\n","parameters":{"properties":{},"type":"object"},"strict":false}]`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// Identical input gives byte-identical, valid output, with the cache
// breakpoint on the last tool only.
func TestRenderByteIdentity(t *testing.T) {
	for _, reg := range []*Registry{Default(), mustLoadFile(t, "small_registry.json")} {
		res, err := reg.Resolve(Request{Session: Intent{Preset: "full"}})
		if err != nil {
			t.Fatal(err)
		}
		again, _ := reg.ResolveUncached(Request{Session: Intent{Preset: "full"}})
		a1, a2 := RenderAnthropic(res.Tools), RenderAnthropic(again.Tools)
		o1, o2 := RenderOpenAI(res.Tools), RenderOpenAI(again.Tools)
		if !bytes.Equal(a1, a2) || !bytes.Equal(o1, o2) {
			t.Fatal("rendering is not byte-identical")
		}
		var anth []map[string]json.RawMessage
		if err := json.Unmarshal(a1, &anth); err != nil {
			t.Fatalf("Anthropic output is not JSON: %v", err)
		}
		if len(anth) != len(res.Tools) {
			t.Fatalf("rendered %d tools; want %d", len(anth), len(res.Tools))
		}
		for i, m := range anth {
			_, cc := m["cache_control"]
			if cc != (i == len(anth)-1) {
				t.Errorf("tool %d: cache_control present=%v", i, cc)
			}
			if !bytes.Equal(m["input_schema"], res.Tools[i].Parameters) {
				t.Errorf("tool %d: schema bytes are not the canonical parameters", i)
			}
		}
		var oa []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
			Strict     *bool           `json:"strict"`
		}
		if err := json.Unmarshal(o1, &oa); err != nil {
			t.Fatalf("OpenAI output is not JSON: %v", err)
		}
		for i, x := range oa {
			if x.Type != "function" || x.Name != res.Tools[i].Name || x.Strict == nil || *x.Strict {
				t.Errorf("OpenAI tool %d: %+v", i, x)
			}
		}
	}
}

// Seed §8: a registry that opts in renders web_search as each
// provider's built-in tool instead of a function: Anthropic's server tool
// (with the cache breakpoint when it is last) and OpenAI's web_search; the
// bytes are fixed, and the same registry without the native forms renders
// functions.
func TestNativeWebSearchRendering(t *testing.T) {
	reg := mustLoadFile(t, "native_web_search_registry.json")
	res, err := reg.Resolve(Request{Session: Intent{Enabled: yes, WebSearch: yes}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(res.Tools); !eqNames(got, []string{"read_file", "tool_search", "web_search"}) {
		t.Fatalf("tools %q", got)
	}
	wantA := `[{"name":"read_file","description":"Read a file.","input_schema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},` +
		`{"name":"tool_search","description":"Load deferred tools by name.","input_schema":{"properties":{"names":{"items":{"type":"string"},"type":"array"}},"type":"object"}},` +
		`{"max_uses":5,"name":"web_search","type":"web_search_20250305","cache_control":{"type":"ephemeral"}}]`
	if got := string(RenderAnthropic(res.Tools)); got != wantA {
		t.Fatalf("anthropic:\n%s\nwant\n%s", got, wantA)
	}
	wantO := `[{"type":"function","name":"read_file","description":"Read a file.","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"strict":false},` +
		`{"type":"function","name":"tool_search","description":"Load deferred tools by name.","parameters":{"properties":{"names":{"items":{"type":"string"},"type":"array"}},"type":"object"},"strict":false},` +
		`{"type":"web_search"}]`
	if got := string(RenderOpenAI(res.Tools)); got != wantO {
		t.Fatalf("openai:\n%s\nwant\n%s", got, wantO)
	}
	// Not last: no breakpoint on the server tool; still valid JSON.
	research, _ := reg.Resolve(Request{Session: Intent{Preset: "research"}})
	b := RenderAnthropic(research.Tools)
	if !bytes.Contains(b, []byte(`{"max_uses":5,"name":"web_search","type":"web_search_20250305"},`)) || !json.Valid(b) {
		t.Fatalf("research rendering %s", b)
	}
	// The native form is part of the tool's contract; MarshalJSON
	// keeps it, so a registry pushed to KV renders the same.
	data, err := reg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	res2, _ := again.Resolve(Request{Session: Intent{Enabled: yes, WebSearch: yes}})
	if res2.ContractHash != res.ContractHash || !bytes.Equal(RenderAnthropic(res2.Tools), RenderAnthropic(res.Tools)) {
		t.Fatalf("registry round trip changed the native rendering or the contract")
	}
	plain, err := Load(bytes.Replace(readTestdata(t, "native_web_search_registry.json"), []byte(`"native"`), []byte(`"x_native"`), 1))
	if err == nil {
		t.Fatalf("an unknown tool key loaded: %v", plain)
	}
	ws, _ := reg.Tool(WebSearch)
	ws.Native = Native{}
	if ToolHash(ws) == ToolHash(mustTool(t, reg, WebSearch)) {
		t.Fatalf("the native form does not reach the tool hash")
	}
	if got := string(RenderOpenAI([]Tool{ws})); got != `[{"type":"function","name":"web_search","description":"Search the web.","parameters":{"properties":{"query":{"type":"string"}},"type":"object"},"strict":false}]` {
		t.Fatalf("without a native form web_search renders %s", got)
	}
}

func mustTool(t *testing.T, reg *Registry, name string) Tool {
	t.Helper()
	tool, ok := reg.Tool(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	return tool
}

// seed §8: a native form is refused when it is not a provider tool object
// the engine can place: no type, type "function", an Anthropic form that
// does not name the tool, a cache_control of its own, an unknown provider.
func TestNativeFormRefused(t *testing.T) {
	base := string(readTestdata(t, "native_web_search_registry.json"))
	cases := []struct{ from, to, want string }{
		{`"type": "web_search"}`, `"kind": "web_search"}`, `native.openai: "type" missing`},
		{`{"type": "web_search"}`, `{"type": "function"}`, `"function" is the default rendering`},
		{`"name": "web_search", "max_uses": 5`, `"name": "search", "max_uses": 5`, `native.anthropic.name: want "web_search"`},
		{`"max_uses": 5}`, `"max_uses": 5, "cache_control": {"type": "ephemeral"}}`, `remove "cache_control"`},
		{`"openai": {"type": "web_search"}`, `"gemini": {"type": "google_search"}`, `unknown key "gemini"`},
	}
	for _, tc := range cases {
		if !strings.Contains(base, tc.from) {
			t.Fatalf("test data lacks %q", tc.from)
		}
		_, err := Load([]byte(strings.Replace(base, tc.from, tc.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: err %v; want %q", tc.from, tc.to, err, tc.want)
		}
	}
}
