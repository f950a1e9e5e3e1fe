package searcheval

import (
	"strings"
	"testing"

	"github.com/toolintent/engine/toolsearch"
)

// Issue #15, R29: the keyword mode finds the tool a user or model asks for
// among 1,065 MCP tools: recall@5 >= 0.95 and MRR >= 0.8 over the 171
// labelled queries. The dev and holdout halves are reported apart: ranking
// changes were judged on dev only.
func TestKeywordQuality(t *testing.T) {
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 1000 || len(qs) < 100 {
		t.Fatalf("corpus has %d tools and %d queries; want at least 1,000 and 100", len(docs), len(qs))
	}
	ix := toolsearch.Build(docs, nil)
	all := Evaluate(KeywordSearch(ix), qs, "")
	for _, split := range []string{"dev", "holdout"} {
		q := Evaluate(KeywordSearch(ix), qs, split)
		t.Logf("%-7s %3d queries: recall@5 %.3f, MRR %.3f, %d misses", split, q.Queries, q.Recall, q.MRR, len(q.Misses))
	}
	t.Logf("all     %3d queries: recall@5 %.3f, MRR %.3f", all.Queries, all.Recall, all.MRR)
	for _, m := range all.Misses {
		t.Logf("miss %s %q: want %s, top 5 %s", m.ID, m.Query, strings.Join(m.Want, " "), strings.Join(m.Got, " "))
	}
	if all.Recall < 0.95 || all.MRR < 0.8 {
		t.Errorf("recall@5 %.3f, MRR %.3f; want at least 0.95 and 0.8", all.Recall, all.MRR)
	}
}

// The corpus is well formed: every relevant tool exists, names are unique,
// splits are dev or holdout, and Scaled repeats it with distinct names.
func TestCorpus(t *testing.T) {
	docs, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Name] {
			t.Errorf("duplicate tool %s", d.Name)
		}
		seen[d.Name] = true
		if d.Context == "" || d.Description == "" || len(d.Parameters) == 0 {
			t.Errorf("%s lacks a server description, a description or a schema", d.Name)
		}
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Split != "dev" && q.Split != "holdout" {
			t.Errorf("%s: split %q", q.ID, q.Split)
		}
		for _, r := range q.Relevant {
			if !seen[r] {
				t.Errorf("%s: relevant tool %s is not in the corpus", q.ID, r)
			}
		}
	}
	big, err := Scaled(10_000)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range big {
		names[d.Name] = true
	}
	if len(big) != 10_000 || len(names) != 10_000 {
		t.Errorf("Scaled(10000): %d docs, %d distinct names", len(big), len(names))
	}
}
