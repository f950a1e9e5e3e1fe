package toolsearch

import (
	"math"
	"slices"
	"testing"
)

// FusedRanked gives Fused's hits in Fused's order, each with its
// rank and score in the keyword and in the vector ranking (0 where it is
// not ranked); without a usable vector only keyword ranks. Dim is the
// dimension of the index's vectors.
func TestFusedRanked(t *testing.T) {
	obj := []byte(`{"type":"object"}`)
	docs := []Doc{
		{Name: "set_status", Description: "Set the user's status.", Parameters: obj, Vector: []float32{1, 0, 0}},
		{Name: "status_page", Description: "Read the status page of a service.", Parameters: obj, Vector: []float32{0, 1, 0}},
		{Name: "request_time_off", Description: "Request days off.", Parameters: obj, Vector: []float32{0.9, 0.1, 0}},
		{Name: "no_vector", Description: "Service status history.", Parameters: obj},
	}
	ix := Build(docs, nil)
	if ix.Dim() != 3 || Build(testDocs(), nil).Dim() != 0 {
		t.Fatalf("Dim = %d, %d; want 3 and 0", ix.Dim(), Build(testDocs(), nil).Dim())
	}
	vec := []float32{2, 0.1, 0}
	fh := ix.FusedRanked("service status", vec, 5, nil)
	if got, want := fusedNames(fh), hitNames(ix.Fused("service status", vec, 5, nil)); !slices.Equal(got, want) {
		t.Fatalf("FusedRanked %v, Fused %v", got, want)
	}
	kw := ix.Keyword("service status", 50, nil)
	sem := ix.Semantic(vec, 50, nil)
	for _, h := range fh {
		kr := slices.IndexFunc(kw, func(x Hit) bool { return x.Name == h.Name }) + 1
		sr := slices.IndexFunc(sem, func(x Hit) bool { return x.Name == h.Name }) + 1
		if h.KeywordRank != kr || h.SemanticRank != sr {
			t.Errorf("%s: ranks keyword %d semantic %d, want %d and %d", h.Name, h.KeywordRank, h.SemanticRank, kr, sr)
		}
		if kr > 0 && h.KeywordScore != kw[kr-1].Score || sr > 0 && h.Similarity != sem[sr-1].Score {
			t.Errorf("%s: scores %v %v", h.Name, h.KeywordScore, h.Similarity)
		}
		if want := 0.0; kr > 0 || sr > 0 {
			if kr > 0 {
				want += 1 / float64(rrfK+kr)
			}
			if sr > 0 {
				want += 1 / float64(rrfK+sr)
			}
			if math.Abs(h.Score-want) > 1e-12 {
				t.Errorf("%s: fused score %v, want %v", h.Name, h.Score, want)
			}
		}
	}
	for _, h := range ix.FusedRanked("service status", nil, 5, nil) {
		if h.KeywordRank == 0 || h.SemanticRank != 0 {
			t.Errorf("without a vector: %+v", h)
		}
	}
}

func fusedNames(hs []FusedHit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}
