package resolver

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzLoad: the registry parser never panics; it either returns
// ErrInvalidRegistry or a registry whose schemas are canonical, whose
// canonical encoding round-trips byte for byte, where tool_search is never
// deferred (R14) and whose renderings are valid JSON (R9). Seed corpus in
// testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Add(DefaultRegistryJSON())
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Load(data)
		if err != nil {
			if r != nil || !errors.Is(err, ErrInvalidRegistry) {
				t.Fatalf("got %v, %v; want nil and ErrInvalidRegistry", r, err)
			}
			return
		}
		for _, tool := range r.Tools() {
			c, err := Canonicalize(tool.Parameters)
			if err != nil || !bytes.Equal(c, tool.Parameters) {
				t.Fatalf("%s: parameters not canonical: %s", tool.Name, tool.Parameters)
			}
		}
		if tool, ok := r.Tool(ToolSearch); !ok || tool.Deferred || !r.IsResident(ToolSearch) {
			t.Fatalf("tool_search missing or deferred")
		}
		m1, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Load(m1)
		if err != nil {
			t.Fatalf("canonical encoding does not load: %v\n%s", err, m1)
		}
		if m2, _ := r2.MarshalJSON(); !bytes.Equal(m1, m2) {
			t.Fatalf("canonical encoding does not round-trip:\n%s\n%s", m1, m2)
		}
		res, err := r.Resolve(Request{Session: Intent{Preset: "", WebSearch: yes}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ContractHash != ContractHash(r.Version(), res.Tools) {
			t.Fatal("contract hash mismatch")
		}
		all := r.Tools()
		if !json.Valid(RenderAnthropic(all)) || !json.Valid(RenderOpenAI(all)) {
			t.Fatal("rendering is not valid JSON")
		}
	})
}
