package toolsearch

import (
	"slices"
	"testing"
)

// Text is put in Unicode form NFKC before it is split, so a
// compatibility form of a word, typed or pasted, finds the tool its plain
// form names: full-width Latin and the ideographic space, ligatures,
// circled and full-width digits, half-width katakana, and an accent
// written as a combining mark.
func TestTermsNFKC(t *testing.T) {
	cases := map[string]string{
		"ｇｉｔｈｕｂ　ＡＰＩ": "github API",
		"ﬁle ﬂow":    "file flow",
		"ec②":        "ec2",
		"ｅｃ２　ｉｎｓｔａｎｃｅｓ": "ec2 instances",
		"ｶﾀｶﾅ":            "カタカナ",
		"cafe\u0301 menu": "café menu",
	}
	for in, plain := range cases {
		if got, want := Terms(in), Terms(plain); !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("Terms(%q) = %q, want %q (the terms of %q)", in, got, want, plain)
		}
	}
	// A search meets the plain form too.
	ix := Build([]Doc{
		{Name: "create_file", Description: "Create a file.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "list_pods", Description: "List pods.", Parameters: []byte(`{"type":"object"}`)},
	}, nil)
	if got := hitNames(ix.Keyword("ﬁle", 5, nil)); !slices.Equal(got, []string{"create_file"}) {
		t.Errorf("Keyword(ligature fi + le) = %v, want [create_file]", got)
	}
	// ASCII and already normal text is returned as it is, unallocated.
	if s := "plain ascii"; nfkc(s) != s || testing.AllocsPerRun(10, func() { nfkc("naïve café 数据") }) != 0 {
		t.Errorf("nfkc allocates for text already in NFKC")
	}
}
