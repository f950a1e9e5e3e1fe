package resolver

import (
	"bytes"
	"encoding/json"
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

// R9: rendered bytes are exactly these for this input.
func TestRenderAnthropicGolden(t *testing.T) {
	got := RenderAnthropic(smallTools(t, "read_file", "bash"))
	want := `[{"name":"read_file","description":"Read a file.","input_schema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},` +
		`{"name":"bash","description":"Run a shell command.","input_schema":{"properties":{"command":{"type":"string"}},"type":"object"},"cache_control":{"type":"ephemeral"}}]`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// R9: OpenAI Responses rendering is exactly this for this input.
func TestRenderOpenAIGolden(t *testing.T) {
	got := RenderOpenAI(smallTools(t, "read_file", "bash"))
	want := `[{"type":"function","name":"read_file","description":"Read a file.","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"strict":false},` +
		`{"type":"function","name":"bash","description":"Run a shell command.","parameters":{"properties":{"command":{"type":"string"}},"type":"object"},"strict":false}]`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// R9: no tools render as an empty array; a tool without parameters gets an
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

// R9: identical input gives byte-identical, valid output, with the cache
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
