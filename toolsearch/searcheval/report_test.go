package searcheval

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/toolintent/engine/toolsearch"
)

// table formats recall@1, recall@5 and MRR per kind of the engine and the
// plain BM25 baseline on one query set.
func table(name string, docs []toolsearch.Doc, qs []Query) string {
	engine := KeywordSearch(toolsearch.Build(docs, nil))
	base := NewBaseline(docs).Search
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d tools)\n%-11s %4s  %-20s  %-20s\n", name, len(docs), "kind", "n", "engine r@1 r@5 MRR", "BM25 r@1 r@5 MRR")
	kinds := append([]string{""}, Kinds...)
	for _, k := range kinds {
		sub := OfKind(qs, k)
		if len(sub) == 0 {
			continue
		}
		e, p := Evaluate(engine, sub, ""), Evaluate(base, sub, "")
		label := k
		if k == "" {
			label = "all"
		}
		fmt.Fprintf(&b, "%-11s %4d  %.3f %.3f %.3f   %.3f %.3f %.3f\n", label, len(sub), e.Recall1, e.Recall, e.MRR, p.Recall1, p.Recall, p.MRR)
	}
	return b.String()
}

// The per-kind table of the engine beside plain BM25 on the tuning
// sets, logged with -v; the held-out set's table too when
// SEARCHEVAL_HELDOUT is set, so that tuning does not look at it by
// accident. The floors are asserted in quality_test.go.
func TestReport(t *testing.T) {
	first, err := Docs()
	if err != nil {
		t.Fatal(err)
	}
	firstQs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := HeldOutDocs()
	if err != nil {
		t.Fatal(err)
	}
	tun, err := TuningQueries()
	if err != nil {
		t.Fatal(err)
	}
	held, err := HeldOutQueries()
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table("tuning: first corpus", first, firstQs))
	t.Log("\n" + table("tuning: mcp2 tuning queries", docs, tun))
	d4, err := HeldOut4.Docs()
	if err != nil {
		t.Fatal(err)
	}
	q4, err := HeldOut4.Queries()
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table("tuning: mcp4 dev queries", d4, ofSplit(q4, "dev")))
	d5, err := HeldOut5.Docs()
	if err != nil {
		t.Fatal(err)
	}
	q5, err := HeldOut5.Queries()
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table("tuning: mcp5 dev queries", d5, ofSplit(q5, "dev")))
	if os.Getenv("SEARCHEVAL_HELDOUT") != "" {
		t.Log("\n" + table("held-out: mcp2 held-out queries", docs, held))
	}
}
