package toolsearch

import (
	"slices"
	"strings"
	"testing"
)

// The general lexicon is well formed: every line
// is a group of at least two distinct stems, and it leaves out the words
// that name unrelated concepts (the noisy synonyms). Its
// words weigh below the hand-written groups' and below the query's own.
func TestGeneralLexicon(t *testing.T) {
	ambiguous := []string{"post", "pull", "drop", "run", "set", "get", "make", "put", "go", "do", "take"}
	lines := 0
	for line := range strings.SplitSeq(generalGroups, "\n") {
		g := strings.Fields(line)
		if len(g) == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		lines++
		var stems []string
		for _, w := range g {
			if slices.Contains(ambiguous, w) {
				t.Errorf("general group %q holds the ambiguous word %q", line, w)
			}
			if s := stem(w); !slices.Contains(stems, s) {
				stems = append(stems, s)
			}
		}
		if len(stems) < 2 {
			t.Errorf("general group %q has fewer than two distinct stems", line)
		}
	}
	if lines < 200 {
		t.Errorf("general lexicon has %d groups; want at least 200", lines)
	}
	if !(weightGeneral < weightConcept && weightConcept < 1) {
		t.Errorf("weights: general %v, concept %v; want general < concept < 1", weightGeneral, weightConcept)
	}
	// An everyday word reaches the tool that uses the technical one, and
	// the literal match still ranks first.
	obj := []byte(`{"type":"object"}`)
	ix := Build([]Doc{
		{Name: "set_thermostat", Description: "Set the HVAC target temperature.", Parameters: obj},
		{Name: "list_invoices", Description: "List invoices.", Parameters: obj},
		{Name: "list_bills", Description: "List unpaid bills.", Parameters: obj},
	}, nil)
	if got := hitNames(ix.Keyword("make the heating warmer", 5, nil)); len(got) == 0 || got[0] != "set_thermostat" {
		t.Errorf("Keyword(make the heating warmer) = %v, want set_thermostat first", got)
	}
	if got := hitNames(ix.Keyword("bills", 5, nil)); !slices.Equal(got, []string{"list_bills", "list_invoices"}) {
		t.Errorf("Keyword(bills) = %v, want [list_bills list_invoices]", got)
	}
}
