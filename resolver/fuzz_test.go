package resolver

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// FuzzLoad: the registry parser never panics; it either returns
// ErrInvalidRegistry or a registry whose schemas are canonical, whose
// canonical encoding round-trips byte for byte, where tool_search is never
// deferred and whose renderings are valid JSON. Seed corpus in
// testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Add(DefaultRegistryJSON())
	if native, err := os.ReadFile("testdata/native_web_search_registry.json"); err == nil {
		f.Add(native) // tools with provider-native forms: the hash's optional part
	} else {
		f.Fatal(err)
	}
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
		// The contract hash equals an independent implementation of
		// its documented byte layout (refContractHash), not itself.
		if want := refContractHash(r.Version(), res.Tools); res.ContractHash != want {
			t.Fatalf("contract hash %s, the documented layout gives %s", res.ContractHash, want)
		}
		for _, tool := range res.Tools {
			if got, want := ToolHash(tool), refToolHash(tool); got != want {
				t.Fatalf("%s: tool hash %s, the documented layout gives %s", tool.Name, got, want)
			}
		}
		all := r.Tools()
		if !json.Valid(RenderAnthropic(all)) || !json.Valid(RenderOpenAI(all)) {
			t.Fatal("rendering is not valid JSON")
		}
	})
}

// refToolHash is the tool hash written out from its documented layout
// (toolDigest's comment), sharing no code with it: the reference the fuzz
// oracle compares against.
func refToolHash(t Tool) string {
	var b bytes.Buffer
	field := func(s string) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		b.Write(n[:])
		b.WriteString(s)
	}
	flag := func(v bool) {
		if v {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
	}
	b.WriteString("toolintent/tool/v1\x00")
	field(t.Name)
	field(t.Description)
	field(string(t.Parameters))
	field(t.Permission)
	flag(t.Available)
	flag(t.Deferred)
	if len(t.Native.Anthropic) > 0 || len(t.Native.OpenAI) > 0 {
		b.WriteString("native")
		field(string(t.Native.Anthropic))
		field(string(t.Native.OpenAI))
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// refContractHash is the contract hash written out from its documented
// layout (ContractHash's comment): domain, version, tool count, then each
// tool's digest in order.
func refContractHash(version string, tools []Tool) string {
	var b bytes.Buffer
	b.WriteString("toolintent/contract/v1\x00")
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(version)))
	b.Write(n[:])
	b.WriteString(version)
	binary.BigEndian.PutUint32(n[:], uint32(len(tools)))
	b.Write(n[:])
	for _, t := range tools {
		d, err := hex.DecodeString(refToolHash(t))
		if err != nil {
			panic(err)
		}
		b.Write(d)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}
