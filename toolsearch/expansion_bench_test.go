package toolsearch_test

import (
	"testing"

	"github.com/toolintent/engine/toolsearch"
	"github.com/toolintent/engine/toolsearch/searcheval"
)

// ablationSets are the query sets ranking changes are judged on: the
// first corpus, the mcp2 tuning queries, and the dev splits of the fourth
// and fifth blind sets (their final splits are never used here).
func ablationSets(b *testing.B) []struct {
	docs []toolsearch.Doc
	qs   []searcheval.Query
} {
	b.Helper()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	d1, err := searcheval.Docs()
	must(err)
	q1, err := searcheval.Queries()
	must(err)
	d2, err := searcheval.HeldOutDocs()
	must(err)
	q2, err := searcheval.TuningQueries()
	must(err)
	d4, err := searcheval.HeldOut4.Docs()
	must(err)
	q4, err := searcheval.HeldOut4.Queries()
	must(err)
	d5, err := searcheval.HeldOut5.Docs()
	must(err)
	q5, err := searcheval.HeldOut5.Queries()
	must(err)
	dev := func(qs []searcheval.Query) []searcheval.Query {
		var out []searcheval.Query
		for _, q := range qs {
			if q.Split == "dev" {
				out = append(out, q)
			}
		}
		return out
	}
	return []struct {
		docs []toolsearch.Doc
		qs   []searcheval.Query
	}{{d1, q1}, {d2, q2}, {d4, dev(q4)}, {d5, dev(q5)}}
}

// BenchmarkExpansionCost measures each expansion of a keyword query
// against what it costs: with all on, then with each off, the mean
// recall@5, paraphrase recall@5 and MRR over the tuning sets and dev
// splits (reported as metrics), the postings one query scores over
// 10,000 tools (its work, a figure the machine's load does not move) and
// the time of one such query (ns/op, the 171 labelled queries in turn):
//
//	go test -run XXX -bench ExpansionCost -count 5 ./toolsearch
func BenchmarkExpansionCost(b *testing.B) {
	sets := ablationSets(b)
	big, err := searcheval.Scaled(10_000)
	if err != nil {
		b.Fatal(err)
	}
	qs, err := searcheval.Queries()
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B) {
		var r5, para, mrr float64
		nPara := 0
		for _, s := range sets {
			ix := toolsearch.BuildForAblation(s.docs)
			q := searcheval.Evaluate(searcheval.KeywordSearch(ix), s.qs, "")
			r5 += q.Recall / float64(len(sets))
			mrr += q.MRR / float64(len(sets))
			if p := searcheval.OfKind(s.qs, "paraphrase"); len(p) > 0 {
				para += searcheval.Evaluate(searcheval.KeywordSearch(ix), p, "").Recall
				nPara++
			}
		}
		ix := toolsearch.BuildForAblation(big)
		postings := 0
		toolsearch.CountPostings(&postings)
		for _, q := range qs {
			ix.Keyword(q.Query, 5, nil)
		}
		toolsearch.CountPostings(nil)
		b.ResetTimer()
		i := 0
		for b.Loop() {
			ix.Keyword(qs[i%len(qs)].Query, 5, nil)
			i++
		}
		b.ReportMetric(float64(postings)/float64(len(qs)), "postings/query")
		b.ReportMetric(r5, "recall@5")
		b.ReportMetric(para/float64(nPara), "para-recall@5")
		b.ReportMetric(mrr, "MRR")
	}
	b.Run("all", run)
	for _, e := range toolsearch.Expansions {
		b.Run("without "+e.Name, func(b *testing.B) {
			on := e.Off()
			defer on()
			run(b)
		})
	}
}
