package searcheval

import (
	"strings"
	"testing"

	"github.com/toolintent/engine/toolsearch"
)

// The keyword mode finds the tool a user or model asks for
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

// On the held-out set (161 MCP tools the first corpus lacks,
// 177 queries of five kinds written before the ranking changes and
// never tuned on) the keyword mode keeps the quality it reached, a little
// below it so that a regression fails, and stays ahead of plain BM25.
// Measured when this test was written: recall@5 0.890 overall, 0.759 on
// paraphrases, MRR 0.822; keyword and parameter queries 1.000. After the
// derivational families and the general lexicon (measured once): recall@1
// 0.780, recall@5 0.890, MRR 0.832; paraphrases 0.582, 0.759, 0.663;
// ambiguous MRR 0.944; the MRR floors were raised to match. After the
// WordNet expansion of words nothing else reaches (measured once):
// recall@5 0.907, MRR 0.835; paraphrases 0.797 (MRR 0.669); the recall
// floors were raised to match. The targets (recall@5 >= 0.93,
// paraphrase >= 0.80, MRR >= 0.85) are not met yet; keyword and
// parameter queries meet theirs (>= 0.98). After the idf cap, joined
// query words, WordNet's reverse map and definitions and the
// Chinese–English lexicon (measured once): recall@1 0.802, recall@5
// 0.915, MRR 0.850; paraphrases 0.608, 0.810, 0.690; cjk recall@1 0.909;
// the floors were raised to match. Recall@5 overall (>= 0.93) is still
// short.
func TestHeldOutQuality(t *testing.T) {
	docs, err := HeldOutDocs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := HeldOutQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 150 || len(qs) < 150 || len(OfKind(qs, "paraphrase")) < 60 {
		t.Fatalf("held-out set has %d tools, %d queries, %d paraphrases; want at least 150, 150 and 60", len(docs), len(qs), len(OfKind(qs, "paraphrase")))
	}
	engine := KeywordSearch(toolsearch.Build(docs, nil))
	base := NewBaseline(docs).Search
	floors := []struct {
		kind        string
		recall, mrr float64
	}{
		{"", 0.90, 0.84},
		{"keyword", 0.98, 0.95},
		{"paraphrase", 0.79, 0.67},
		{"parameter", 0.98, 0.95},
		{"cjk", 0.95, 0.93},
		{"ambiguous", 0.95, 0.95},
	}
	for _, f := range floors {
		sub := OfKind(qs, f.kind)
		e, b := Evaluate(engine, sub, ""), Evaluate(base, sub, "")
		name := f.kind
		if name == "" {
			name = "all"
		}
		t.Logf("%-10s %3d queries: engine recall@1 %.3f recall@5 %.3f MRR %.3f; BM25 %.3f %.3f %.3f", name, e.Queries, e.Recall1, e.Recall, e.MRR, b.Recall1, b.Recall, b.MRR)
		if e.Recall < f.recall || e.MRR < f.mrr {
			t.Errorf("%s: recall@5 %.3f, MRR %.3f; want at least %.2f and %.2f", name, e.Recall, e.MRR, f.recall, f.mrr)
		}
	}
	e, b := Evaluate(engine, qs, ""), Evaluate(base, qs, "")
	if e.Recall < b.Recall+0.08 || e.MRR < b.MRR+0.08 {
		t.Errorf("engine recall@5 %.3f MRR %.3f against plain BM25 %.3f %.3f: want at least 0.08 ahead on both", e.Recall, e.MRR, b.Recall, b.MRR)
	}
}

// The tuning queries over the held-out set's tools keep their
// quality too (they are the ones ranking changes were judged on).
func TestTuningQuality(t *testing.T) {
	docs, err := HeldOutDocs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := TuningQueries()
	if err != nil {
		t.Fatal(err)
	}
	q := Evaluate(KeywordSearch(toolsearch.Build(docs, nil)), qs, "")
	p := Evaluate(KeywordSearch(toolsearch.Build(docs, nil)), OfKind(qs, "paraphrase"), "")
	t.Logf("tuning %d queries: recall@5 %.3f, MRR %.3f; paraphrase %d: recall@5 %.3f", q.Queries, q.Recall, q.MRR, p.Queries, p.Recall)
	if q.Recall < 0.89 || q.MRR < 0.74 || p.Recall < 0.85 {
		t.Errorf("tuning recall@5 %.3f, MRR %.3f, paraphrase recall@5 %.3f; want at least 0.89, 0.74 and 0.85", q.Recall, q.MRR, p.Recall)
	}
}

// ofSplit returns the queries of one split.
func ofSplit(qs []Query, split string) []Query {
	var out []Query
	for _, q := range qs {
		if q.Split == split {
			out = append(out, q)
		}
	}
	return out
}

// The dev queries of the fourth blind set (mcp4, written by a
// session that read no ranking code and ran no search) keep their
// quality. Measured when the set arrived: recall@5 0.720, MRR 0.667 (cjk
// 0.449 / 0.369); after CC-CEDICT and WordNet's verbs of two words
// 0.766 / 0.703 (cjk 0.782 / 0.667, paraphrase recall@5 0.620); the
// floors hold those. Its final split is judged, never tuned on
// (TestReportBlindSet).
func TestHeldOut4DevQuality(t *testing.T) {
	docs, err := HeldOut4.Docs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := HeldOut4.Queries()
	if err != nil {
		t.Fatal(err)
	}
	dev := ofSplit(qs, "dev")
	engine := KeywordSearch(toolsearch.Build(docs, nil))
	floors := []struct {
		kind        string
		recall, mrr float64
	}{
		{"", 0.76, 0.70},
		{"keyword", 0.98, 0.98},
		{"paraphrase", 0.61, 0.48},
		{"parameter", 0.98, 0.98},
		{"cjk", 0.78, 0.66},
	}
	for _, f := range floors {
		e := Evaluate(engine, OfKind(dev, f.kind), "")
		if e.Recall < f.recall || e.MRR < f.mrr {
			t.Errorf("mcp4 dev %q: recall@5 %.3f, MRR %.3f; want at least %.2f and %.2f", f.kind, e.Recall, e.MRR, f.recall, f.mrr)
		}
	}
}

// The dev queries of the fifth blind set (mcp5) keep their quality.
// Measured when the set arrived, before any ranking change: recall@5
// 0.763, MRR 0.703 (paraphrase 0.615 / 0.484); with the three-letter
// plural 0.767 / 0.706 (paraphrase 0.624). The floors hold those. Its
// final split is judged, never tuned on (TestReportBlindSet).
func TestHeldOut5DevQuality(t *testing.T) {
	docs, err := HeldOut5.Docs()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := HeldOut5.Queries()
	if err != nil {
		t.Fatal(err)
	}
	dev := ofSplit(qs, "dev")
	if len(dev) < 200 {
		t.Fatalf("mcp5 has %d dev queries; want at least 200", len(dev))
	}
	engine := KeywordSearch(toolsearch.Build(docs, nil))
	floors := []struct {
		kind        string
		recall, mrr float64
	}{
		{"", 0.76, 0.70},
		{"keyword", 0.98, 0.95},
		{"paraphrase", 0.62, 0.48},
		{"parameter", 0.98, 0.98},
		{"cjk", 0.78, 0.78},
	}
	for _, f := range floors {
		e := Evaluate(engine, OfKind(dev, f.kind), "")
		if e.Recall < f.recall || e.MRR < f.mrr {
			t.Errorf("mcp5 dev %q: recall@5 %.3f, MRR %.3f; want at least %.2f and %.2f", f.kind, e.Recall, e.MRR, f.recall, f.mrr)
		}
	}
}
