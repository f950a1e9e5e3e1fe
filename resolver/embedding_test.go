package resolver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// embedded returns the default registry file with "embedding" set on the
// named tools (a value of nil removes it), re-encoded; version, when not
// "", replaces the registry version.
func embedded(t testing.TB, version string, vecs map[string]any) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(DefaultRegistryJSON()))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if version != "" {
		doc["version"] = version
	}
	for _, tv := range doc["tools"].([]any) {
		tool := tv.(map[string]any)
		if v, ok := vecs[tool["name"].(string)]; ok {
			if v == nil {
				delete(tool, "embedding")
			} else {
				tool["embedding"] = v
			}
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixedVectors are 4-dimensional embeddings of four default tools.
var fixedVectors = map[string]any{
	"send_message":       []any{0, 0, 0.1, 1},
	"playwright_browser": []any{1, 0, 0, 0},
	"enter_plan_mode":    []any{0, 1, 0.25, 0},
	"memory_read":        []any{json.Number("0.1"), json.Number("-2.5e-3"), json.Number("1E2"), json.Number("0.30000001")},
}

// A tool's embedding loads as float32 numbers and stays in the
// canonical registry file: load, marshal, load, marshal is a fixed point,
// with each number in its shortest float32 form.
func TestEmbeddingLoadMarshalFixedPoint(t *testing.T) {
	reg, err := Load(embedded(t, "", fixedVectors))
	if err != nil {
		t.Fatal(err)
	}
	if reg.EmbeddingDim() != 4 || Default().EmbeddingDim() != 0 {
		t.Fatalf("EmbeddingDim = %d, default %d; want 4 and 0", reg.EmbeddingDim(), Default().EmbeddingDim())
	}
	mr, _ := reg.Tool("memory_read")
	if want := []float32{0.1, -0.0025, 100, 0.30000001}; !slices.Equal(mr.Embedding, want) {
		t.Errorf("memory_read embedding = %v, want %v", mr.Embedding, want)
	}
	if rf, _ := reg.Tool("read_file"); rf.Embedding != nil {
		t.Errorf("read_file has embedding %v, want none", rf.Embedding)
	}
	b1, err := reg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b1, []byte(`"embedding":[0.1,-0.0025,100,0.3]`)) || !bytes.Contains(b1, []byte(`"embedding":[0,0,0.1,1]`)) {
		t.Errorf("canonical form lacks the embeddings in shortest float32 form:\n%s", b1)
	}
	reg2, err := Load(b1)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	b2, _ := reg2.MarshalJSON()
	if !bytes.Equal(b1, b2) {
		t.Errorf("marshal is not a fixed point:\n%s\n%s", b1, b2)
	}
	for _, tool := range reg.Tools() {
		t2, _ := reg2.Tool(tool.Name)
		if !slices.Equal(tool.Embedding, t2.Embedding) {
			t.Errorf("%s: embedding %v reloads as %v", tool.Name, tool.Embedding, t2.Embedding)
		}
	}
	// A null embedding is an absent one.
	if r, err := Load(embedded(t, "", map[string]any{"send_message": nil, "grep": json.RawMessage("null")})); err != nil || r.EmbeddingDim() != 0 {
		t.Errorf("null embedding: dim %v, %v", r, err)
	}
}

// An embedding is not part of the contract: the same registry with
// and without embeddings gives the same tool hashes, contract hashes and
// provider renderings, and a tool encodes without it.
func TestEmbeddingNotInContract(t *testing.T) {
	with, err := Load(embedded(t, "", fixedVectors))
	if err != nil {
		t.Fatal(err)
	}
	plain := Default()
	for _, tool := range plain.Tools() {
		w, _ := with.Tool(tool.Name)
		if ToolHash(w) != ToolHash(tool) {
			t.Errorf("%s: tool hash changes with an embedding", tool.Name)
		}
	}
	reqs := []Request{{}, {Session: Intent{Preset: "full"}}, {Profile: "researcher"}, {Override: Override{Kind: OverrideNames, Names: []string{"send_message", "memory_read", "playwright_browser"}}}}
	for _, req := range reqs {
		a, err := plain.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := with.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		if a.ContractHash != b.ContractHash {
			t.Errorf("%+v: contract hash %s without embeddings, %s with", req, a.ContractHash, b.ContractHash)
		}
		for name, render := range map[string]func([]Tool) []byte{
			"anthropic": RenderAnthropic, "openai": RenderOpenAI,
			"anthropic-native": func(ts []Tool) []byte { return RenderAnthropicNative(ts, "") },
			"openai-native":    func(ts []Tool) []byte { return RenderOpenAINative(ts, b.Namespaces) },
		} {
			ra, rb := render(a.Tools), render(b.Tools)
			if !bytes.Equal(ra, rb) || bytes.Contains(rb, []byte("embedding")) {
				t.Errorf("%+v: %s rendering changes with embeddings", req, name)
			}
		}
		if j, _ := json.Marshal(b); bytes.Contains(j, []byte("embedding")) {
			t.Errorf("a resolution encodes the embeddings: %s", j)
		}
	}
}

// A bad embedding fails the load with an error that names the tool
// and says what to do.
func TestEmbeddingLoadErrors(t *testing.T) {
	long := make([]any, MaxEmbeddingDim+1)
	for i := range long {
		long[i] = 1
	}
	for _, c := range []struct {
		name string
		vecs map[string]any
		tool string
		want string
	}{
		{"dimension", map[string]any{"send_message": []any{1, 0, 0, 0}, "grep": []any{1, 0, 0}}, "send_message", `has 4 numbers, but the registry's embeddings have 3 (the first is "grep"'s); embed every tool with the same model`},
		{"empty", map[string]any{"grep": []any{}}, "grep", "has 0 numbers; want 1 to 4096"},
		{"too long", map[string]any{"grep": long}, "grep", "has 4097 numbers; want 1 to 4096"},
		{"not an array", map[string]any{"grep": "0.1,0.2"}, "grep", "want an array of numbers"},
		{"not a number", map[string]any{"grep": []any{1, "2"}}, "grep", "embedding[1]: is a string; want a number"},
		{"overflow", map[string]any{"grep": []any{1, json.Number("1e39")}}, "grep", "1e39 is not a finite 32-bit number"},
		{"all zeros", map[string]any{"grep": []any{0, 0, json.Number("0.0")}}, "grep", "all zeros"},
	} {
		_, err := Load(embedded(t, "", c.vecs))
		if err == nil {
			t.Errorf("%s: loads", c.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("%q.embedding", c.tool)) || !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q does not name %q and say %q", c.name, msg, c.tool, c.want)
		}
	}
}

// Diff reports an embedding change as a change of the registry that
// changes no contract: the tools are listed in Embeddings, not Changed,
// and no preset, profile or defaults expansion changes.
func TestDiffEmbeddings(t *testing.T) {
	cur, err := Load(embedded(t, "", fixedVectors))
	if err != nil {
		t.Fatal(err)
	}
	vecs := map[string]any{
		"send_message":       []any{0, 0, 0.2, 1}, // changed
		"playwright_browser": nil,                 // removed
		"grep":               []any{0, 1, 0, 1},   // added
	}
	cand, err := Load(embedded(t, "", mergeVecs(fixedVectors, vecs)))
	if err != nil {
		t.Fatal(err)
	}
	d := Diff(cur, cand)
	if !slices.Equal(d.Embeddings, []string{"grep", "playwright_browser", "send_message"}) {
		t.Errorf("Embeddings = %v, want grep, playwright_browser, send_message (registry order)", d.Embeddings)
	}
	if d.Changed != nil || d.Added != nil || d.Removed != nil || d.AllHashesChange || d.DefaultsChange || d.Presets != nil || d.Profiles != nil {
		t.Errorf("an embedding change changes the contract: %+v", d)
	}
	if d := Diff(cur, cur); d.Embeddings != nil {
		t.Errorf("identical registries: Embeddings %v", d.Embeddings)
	}
	if d := Diff(Default(), cur); !slices.Equal(d.Embeddings, []string{"playwright_browser", "enter_plan_mode", "send_message", "memory_read"}) || d.Changed != nil {
		t.Errorf("embeddings added to the default: %v", d.Embeddings)
	}
}

func mergeVecs(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Any embedding text either fails the load with ErrInvalidRegistry
// or loads as 1 to 4096 finite numbers, not all zero, whose canonical
// form is a load/marshal fixed point.
func FuzzEmbedding(f *testing.F) {
	for _, s := range []string{`[1,0,0]`, `[0.1,-2.5e-3,1E2,0.30000001]`, `[]`, `[0,0]`, `[1e39]`, `[1e-46,1]`, `[-0,1]`, `"x"`, `null`, `[1,"a"]`, `[[1]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, emb string) {
		doc := `{"version":"v1","tools":[{"name":"tool_search","description":"Loads tools.","parameters":{"type":"object"},"embedding":` + emb +
			`},{"name":"grep","description":"Greps.","parameters":{"type":"object"},"embedding":[1,2]}],"default_tools":["tool_search","grep"]}`
		r, err := Load([]byte(doc))
		if err != nil {
			if !errors.Is(err, ErrInvalidRegistry) {
				t.Fatalf("error %v is not ErrInvalidRegistry", err)
			}
			return
		}
		ts, _ := r.Tool(ToolSearch)
		zero := true
		for _, x := range ts.Embedding {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("loaded a non-finite number: %v", ts.Embedding)
			}
			zero = zero && x == 0
		}
		if ts.Embedding != nil && (zero || len(ts.Embedding) > MaxEmbeddingDim) {
			t.Fatalf("loaded embedding %v", ts.Embedding)
		}
		m1, _ := r.MarshalJSON()
		r2, err := Load(m1)
		if err != nil {
			t.Fatalf("canonical form does not load: %v\n%s", err, m1)
		}
		if m2, _ := r2.MarshalJSON(); !bytes.Equal(m1, m2) {
			t.Fatalf("not a fixed point:\n%s\n%s", m1, m2)
		}
	})
}
