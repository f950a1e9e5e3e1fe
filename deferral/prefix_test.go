package deferral

import (
	"testing"

	"github.com/toolintent/engine/resolver"
)

// R30: appending tools keeps the cached prefix (the moved cache breakpoint
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
