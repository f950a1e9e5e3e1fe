package deferral

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"pgregory.net/rapid"

	"github.com/toolintent/engine/resolver"
)

// Appending tools keeps the cached prefix (the moved cache breakpoint
// aside); sorting a tool into the array, or changing one, breaks it.
func TestPrefixCompare(t *testing.T) {
	a := resolver.Tool{Name: "a", Description: "A.", Parameters: []byte(`{"type":"object"}`)}
	b := resolver.Tool{Name: "b", Description: "B.", Parameters: []byte(`{"type":"object"}`)}
	c := resolver.Tool{Name: "c", Description: "C.", Parameters: []byte(`{"type":"object"}`)}
	for _, render := range []func([]resolver.Tool) []byte{resolver.RenderAnthropic, resolver.RenderOpenAI} {
		p := PrefixOf(render([]resolver.Tool{a, c}))
		cases := []struct {
			tools []resolver.Tool
			want  PrefixChange
		}{
			{[]resolver.Tool{a, c}, PrefixSame},
			{[]resolver.Tool{a, c, b}, PrefixExtended},
			{[]resolver.Tool{a, b, c}, PrefixBroken},
			{[]resolver.Tool{a}, PrefixBroken},
			{[]resolver.Tool{c, a}, PrefixBroken},
		}
		for _, tc := range cases {
			if got := p.Compare(render(tc.tools)); got != tc.want {
				t.Errorf("%s after [a c]: %s, want %s", render(tc.tools), got, tc.want)
			}
		}
		if got := PrefixOf(render(nil)).Compare(render([]resolver.Tool{a})); got != PrefixExtended {
			t.Errorf("from an empty array: %s, want extended", got)
		}
	}
	if got := (Prefix{}).Compare([]byte("[]")); got != PrefixBroken {
		t.Errorf("no previous request: %s", got)
	}
	// A description that contains the marker text is escaped and left alone.
	tricky := resolver.Tool{Name: "x", Description: `,"cache_control":{"type":"ephemeral"}`}
	p := PrefixOf(resolver.RenderAnthropic([]resolver.Tool{tricky}))
	if got := p.Compare(resolver.RenderAnthropic([]resolver.Tool{tricky, a})); got != PrefixExtended {
		t.Errorf("tricky description: %s", got)
	}
}

// refCompare is the copying form PrefixOf and Compare had before they
// addressed the rendering in place: strip the marker into a new
// slice, then hash it.
func refCompare(prev, next []byte) PrefixChange {
	strip := func(b []byte) []byte {
		return bytes.Replace(b, []byte(resolver.CacheMarker), nil, 1)
	}
	p, s := strip(prev), strip(next)
	if sha256.Sum256(p) == sha256.Sum256(s) {
		return PrefixSame
	}
	if len(p) == 0 || p[len(p)-1] != ']' || len(s) <= len(p)-1 {
		return PrefixBroken
	}
	stem := len(p) - 1
	if c := s[stem]; !(c == ',' || stem == 1 && c == '{') {
		return PrefixBroken
	}
	if sha256.Sum256(s[:stem]) != sha256.Sum256(p[:stem]) {
		return PrefixBroken
	}
	return PrefixExtended
}

// PrefixOf and Compare, which read a rendering in place around
// its cache marker, answer as stripping the marker into a copy did, for
// random arrays with the marker anywhere (or nowhere) in either.
func TestPrefixInPlaceMatchesCopy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tool := rapid.SampledFrom([]string{`{"name":"a"}`, `{"name":"b"}`, `{"name":"c","x":1}`, `{}`})
		array := func(label string) []byte {
			n := rapid.IntRange(0, 4).Draw(t, label+" tools")
			b := []byte("[")
			for i := range n {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, tool.Draw(t, label+" tool")...)
			}
			b = append(b, ']')
			if len(b) > 2 && rapid.Bool().Draw(t, label+" marked") {
				at := rapid.IntRange(0, len(b)).Draw(t, label+" marker at")
				b = append(b[:at:at], append([]byte(resolver.CacheMarker), b[at:]...)...)
			}
			return b
		}
		prev, next := array("prev"), array("next")
		if got, want := PrefixOf(prev).Compare(next), refCompare(prev, next); got != want {
			t.Fatalf("Compare(%s -> %s) = %v, want %v", prev, next, got, want)
		}
		if (PrefixOf(prev) == PrefixOf(next)) != (refCompare(prev, next) == PrefixSame) {
			t.Fatalf("equal Prefixes of %s and %s disagree with Compare", prev, next)
		}
	})
}
