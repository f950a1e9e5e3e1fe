package toolsearch_test

import (
	"math/rand/v2"
	"testing"

	"github.com/toolintent/engine/toolsearch"
	"github.com/toolintent/engine/toolsearch/searcheval"
)

// The cost of a query with a vector (Fused) against keywords alone,
// at 10k tools with 768-dimensional embeddings (seeded random vectors:
// the cost does not depend on their values).
func BenchmarkFused10k(b *testing.B) {
	docs, err := searcheval.Scaled(10000)
	if err != nil {
		b.Fatal(err)
	}
	const dim = 768
	rng := rand.New(rand.NewPCG(27, 1))
	vec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for i := range docs {
		docs[i].Vector = vec()
	}
	ix := toolsearch.Build(docs, nil)
	q := vec()
	b.Run("keyword", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ix.Keyword("create a github issue", 5, nil)
		}
	})
	b.Run("fused", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ix.Fused("create a github issue", q, 5, nil)
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			_ = toolsearch.Build(docs, nil)
		}
	})
}

// BenchmarkBuild10kNoVectors is BenchmarkFused10k/build without vectors,
// for comparison.
func BenchmarkBuild10kNoVectors(b *testing.B) {
	docs, err := searcheval.Scaled(10000)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = toolsearch.Build(docs, nil)
	}
}
