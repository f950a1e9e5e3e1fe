package toolsearch

import (
	"slices"
	"testing"
)

// The optional semantic path. With fixed tool and query vectors,
// Semantic ranks by cosine similarity and Fused merges it with the
// keyword ranking by reciprocal rank fusion, deterministically; without a
// usable vector Fused is Keyword; vectors of another dimension or all
// zeros are ignored.
func TestSemanticAndFused(t *testing.T) {
	obj := []byte(`{"type":"object"}`)
	docs := []Doc{
		{Name: "set_status", Description: "Set the user's status.", Parameters: obj, Vector: []float32{1, 0, 0}},
		{Name: "status_page", Description: "Read the status page of a service.", Parameters: obj, Vector: []float32{0, 1, 0}},
		{Name: "request_time_off", Description: "Request days off.", Parameters: obj, Vector: []float32{0.9, 0.1, 0}},
		{Name: "odd_dimension", Description: "Status of something.", Parameters: obj, Vector: []float32{1, 0}},
		{Name: "zero_vector", Description: "Nothing.", Parameters: obj, Vector: []float32{0, 0, 0}},
		{Name: "no_vector", Description: "Service status history.", Parameters: obj},
	}
	ix := Build(docs, nil)
	if !ix.HasVectors() {
		t.Fatal("HasVectors = false")
	}
	vacation := []float32{2, 0.1, 0} // "I'm on vacation", embedded by the operator's model
	if got := hitNames(ix.Semantic(vacation, 5, nil)); !slices.Equal(got, []string{"set_status", "request_time_off", "status_page"}) {
		t.Errorf("Semantic = %v, want set_status, request_time_off, status_page (no odd_dimension, zero_vector, no_vector)", got)
	}
	// Keyword alone finds neither vacation tool; fused, both rank first.
	kw := hitNames(ix.Keyword("service status", 5, nil))
	fused := hitNames(ix.Fused("service status", vacation, 5, nil))
	if len(fused) < 3 || fused[0] != "set_status" || !slices.Contains(fused, "request_time_off") {
		t.Errorf("Fused = %v (keyword %v): want set_status first and request_time_off in", fused, kw)
	}
	for range 10 {
		if again := hitNames(ix.Fused("service status", vacation, 5, nil)); !slices.Equal(again, fused) {
			t.Fatalf("Fused not deterministic: %v then %v", fused, again)
		}
	}
	for _, v := range [][]float32{nil, {1, 0}, {0, 0, 0}} {
		if got := hitNames(ix.Fused("service status", v, 5, nil)); !slices.Equal(got, kw) {
			t.Errorf("Fused with vector %v = %v, want the keyword ranking %v", v, got, kw)
		}
	}
	if got := hitNames(ix.Fused("status_page", vacation, 5, nil)); len(got) == 0 || got[0] != "status_page" {
		t.Errorf("Fused with an exact name = %v, want status_page first", got)
	}
	f := ix.NewFilter([]string{"status_page", "request_time_off"})
	if got := hitNames(ix.Fused("service status", vacation, 5, f)); slices.Contains(got, "set_status") {
		t.Errorf("Fused ignored the filter: %v", got)
	}
	if Build(testDocs(), nil).HasVectors() {
		t.Errorf("an index without vectors reports HasVectors")
	}
}

// Vectors computed apart from an index (an embedding endpoint's) rank its
// documents as its own would: FusedRankedWith by NewVectors equals
// FusedRanked by the same vectors given as Doc.Vector; vectors of another
// index, or a query of another dimension, leave the keyword ranking.
func TestVectorsComputedApart(t *testing.T) {
	obj := []byte(`{"type":"object"}`)
	vecs := map[string][]float32{
		"set_status":       {1, 0, 0},
		"status_page":      {0, 1, 0},
		"request_time_off": {0.9, 0.1, 0},
		"no_vector":        nil,
		"bad_dimension":    {1, 0},
	}
	names := []string{"set_status", "status_page", "request_time_off", "no_vector", "bad_dimension"}
	var plain, own []Doc
	for _, n := range names {
		d := Doc{Name: n, Description: "Status of " + n + ".", Parameters: obj}
		plain = append(plain, d)
		if len(vecs[n]) == 3 {
			d.Vector = vecs[n]
		}
		own = append(own, d)
	}
	ix := Build(plain, nil)
	if ix.HasVectors() {
		t.Fatal("an index built without vectors has some")
	}
	vs := ix.NewVectors(3, func(i int) []float32 { return vecs[ix.Name(i)] })
	if vs.Dim() != 3 || vs.Len() != 3 || !vs.Of(ix) {
		t.Fatalf("NewVectors: dim %d, %d vectors, of ix %v; want 3, 3, true", vs.Dim(), vs.Len(), vs.Of(ix))
	}
	q := []float32{2, 0.1, 0}
	ref := Build(own, nil)
	want := ref.FusedRanked("status", q, 5, nil)
	got := ix.FusedRankedWith("status", q, vs, 5, nil)
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("FusedRankedWith = %v, want %v", got, want)
	}
	for i := range got {
		if got[i].Name != want[i].Name || got[i].SemanticRank != want[i].SemanticRank || got[i].KeywordRank != want[i].KeywordRank {
			t.Errorf("hit %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	kw := hitNames(ix.Keyword("status", 5, nil))
	other := Build(plain, nil).NewVectors(3, func(i int) []float32 { return vecs[names[i]] })
	for name, r := range map[string][]FusedHit{
		"another index's vectors": ix.FusedRankedWith("status", q, other, 5, nil),
		"a query of dimension 2":  ix.FusedRankedWith("status", []float32{1, 0}, vs, 5, nil),
		"no vectors":              ix.FusedRankedWith("status", q, nil, 5, nil),
	} {
		names := make([]string, len(r))
		for i := range r {
			names[i] = r[i].Name
		}
		if !slices.Equal(names, kw) {
			t.Errorf("%s: %v, want the keyword ranking %v", name, names, kw)
		}
	}
	if ix.NewVectors(0, func(int) []float32 { return nil }) != nil {
		t.Error("NewVectors of dimension 0 is not nil")
	}
}
