package deferral

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/internal/registrytest"
	"github.com/toolintent/engine/resolver"
)

// semanticVectors are fixed 4-dimensional tool embeddings, as an
// operator's model might give: the four deferred defaults of the default
// registry, and a resident tool (never returned by a query).
var semanticVectors = map[string][]float32{
	"playwright_browser": {1, 0, 0, 0},
	"enter_plan_mode":    {0, 1, 0, 0},
	"exit_plan_mode":     {0, 0.8, 0.2, 0},
	"send_message":       {0, 0, 0.1, 1},
	"read_file":          {0.05, 0, 0, 1},
}

// messageVector embeds a paraphrase of "send a message": nearest to
// send_message.
var messageVector = []float32{0.05, 0, 0.2, 1}

// embeddedRegistry is the default registry with vecs as tool embeddings.
func embeddedRegistry(t testing.TB, vecs map[string][]float32) *resolver.Registry {
	t.Helper()
	data := registrytest.DefaultWithEmbeddings(t, vecs)
	reg, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// paraphrase stands for a query that shares no word with any tool: its
// words are in no vocabulary, so that no lexicon the keyword index may
// learn makes them match (a real one, "ping a coworker", matches nothing
// today either).
const paraphrase = "blorft zmiv quuxify"

// A query whose words match no tool finds, with the query's vector,
// the tool whose fixed vector is nearest, and loads only it (the other
// vector-ranked tools are listed as weak); the same registry, query and
// vector give the same result every time, with the registry's index or
// the turn's own.
func TestSemanticSearchParaphrase(t *testing.T) {
	reg := embeddedRegistry(t, semanticVectors)
	for _, idx := range []*Index{nil, IndexFor(reg)} {
		turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, idx)
		kw, err := turn.Search(SearchRequest{Query: paraphrase})
		if err != nil || len(kw.Matches) != 0 || len(kw.Loaded) != 0 {
			t.Fatalf("index %v: keywords alone: %+v, %v; want no match (the test needs a paraphrase)", idx != nil, kw, err)
		}
		req := SearchRequest{Query: paraphrase, QueryVector: messageVector}
		first, err := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, idx).Search(req)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(first.Loaded, []string{"send_message"}) || len(first.Matches) == 0 || first.Matches[0].Name != "send_message" {
			t.Fatalf("index %v: vector search loaded %v, matches %+v; want send_message", idx != nil, first.Loaded, first.Matches)
		}
		for _, m := range first.Matches[1:] {
			if !m.Weak || m.Name == "read_file" {
				t.Errorf("index %v: match %+v: want only weak deferred tools after the nearest", idx != nil, m)
			}
		}
		for range 20 {
			again, err := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, idx).Search(req)
			if err != nil || !reflect.DeepEqual(again, first) || !bytes.Equal(again.Output(), first.Output()) {
				t.Fatalf("index %v: not deterministic:\n%+v\n%+v", idx != nil, first, again)
			}
		}
	}
}

// With a vector, a confident keyword match still loads beside the
// nearest tool by vector: the two rankings are fused, not replaced.
func TestSemanticSearchFusesKeywords(t *testing.T) {
	reg := embeddedRegistry(t, semanticVectors)
	turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg))
	res, err := turn.Search(SearchRequest{Query: "take a screenshot of the web page", QueryVector: messageVector})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Loaded, "playwright_browser") || !slices.Contains(res.Loaded, "send_message") {
		t.Errorf("fused search loaded %v, want playwright_browser (keywords) and send_message (vector)", res.Loaded)
	}
}

// Without a query vector the ranking is the keyword one: a registry
// with embeddings answers every query byte for byte as the same registry
// without them; a query vector against a registry without embeddings is
// unused, with a note, and otherwise changes nothing.
func TestSemanticSearchOffByDefault(t *testing.T) {
	plain := resolver.Default()
	withVec := embeddedRegistry(t, semanticVectors)
	for _, q := range []string{"take a screenshot of the web page", "plan mode", paraphrase, "send a message to the user", "send_message"} {
		for _, idx := range []bool{false, true} {
			search := func(reg *resolver.Registry, req SearchRequest) SearchResult {
				var ix *Index
				if idx {
					ix = IndexFor(reg)
				}
				res, err := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, ix).Search(req)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			want := search(plain, SearchRequest{Query: q})
			if got := search(withVec, SearchRequest{Query: q}); !reflect.DeepEqual(got.Matches, want.Matches) || !bytes.Equal(got.Output(), want.Output()) {
				t.Errorf("%q (index %v): embeddings change a search without a vector:\n%s\n%s", q, idx, got.Output(), want.Output())
			}
			got := search(plain, SearchRequest{Query: q, QueryVector: messageVector})
			if !reflect.DeepEqual(got.Matches, want.Matches) || !slices.Equal(got.Loaded, want.Loaded) || !strings.Contains(got.Note, "this registry carries no tool embeddings; ranked by keywords") {
				t.Errorf("%q (index %v): a vector without tool embeddings: %+v, want the keyword result %+v and a note", q, idx, got, want)
			}
		}
	}
}

// A query vector is checked against the tools' embeddings: another
// dimension (named with the registry's), a non-finite number or all zeros
// is an invalid search that loads nothing; the model's own tool_search
// input cannot carry a vector.
func TestSemanticSearchRefusesBadVectors(t *testing.T) {
	reg := embeddedRegistry(t, semanticVectors)
	turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg))
	for _, c := range []struct {
		vec  []float32
		want string
	}{
		{[]float32{1, 0, 0}, "query_vector has 3 numbers, but this registry's tool embeddings have 4"},
		{[]float32{1, 0, 0, 0, 0}, "query_vector has 5 numbers, but this registry's tool embeddings have 4"},
		{[]float32{1, float32(math.NaN()), 0, 0}, "query_vector[1] is NaN"},
		{[]float32{float32(math.Inf(-1)), 0, 0, 0}, "query_vector[0] is -Inf"},
		{[]float32{0, 0, 0, 0}, "all zeros"},
		{make([]float32, resolver.MaxEmbeddingDim+1), "at most 4096"},
	} {
		res, err := turn.Search(SearchRequest{Query: paraphrase, QueryVector: c.vec})
		if !errors.Is(err, ErrInvalidSearch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("vector of %d: %v, want ErrInvalidSearch saying %q", len(c.vec), err, c.want)
		}
		if len(res.Loaded) != 0 {
			t.Errorf("a refused search loaded %v", res.Loaded)
		}
	}
	if len(turn.Discovered()) != 0 {
		t.Errorf("refused searches loaded %v", turn.Discovered())
	}
	// A vector without a query is unused, with a note.
	res, err := turn.Search(SearchRequest{Names: []string{"send_message"}, QueryVector: messageVector})
	if err != nil || !slices.Equal(res.Loaded, []string{"send_message"}) || !strings.Contains(res.Note, "query_vector ranks a query only") {
		t.Errorf("names with a vector: %+v, %v", res, err)
	}
	if _, err := ParseSearchInput([]byte(`{"query":"x","query_vector":[1,0,0,0]}`)); !errors.Is(err, ErrInvalidSearch) || !strings.Contains(err.Error(), `"query_vector"`) {
		t.Errorf("model input with a vector: %v, want it refused as an unknown field", err)
	}
}

// A query that is exactly a tool's name ranks it first, fused or
// not, and its match encodes as JSON (the index scores it +Inf).
func TestExactNameMatchEncodes(t *testing.T) {
	reg := embeddedRegistry(t, semanticVectors)
	for _, vec := range [][]float32{nil, messageVector} {
		res, err := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg)).Search(SearchRequest{Query: "enter_plan_mode", QueryVector: vec})
		if err != nil || len(res.Matches) == 0 || res.Matches[0].Name != "enter_plan_mode" || res.Loaded[0] != "enter_plan_mode" {
			t.Fatalf("vector %v: %+v, %v", vec, res, err)
		}
		if _, err := json.Marshal(res.Matches); err != nil {
			t.Errorf("vector %v: matches do not encode: %v", vec, err)
		}
	}
}

// A fused search never returns or loads an excluded
// (disabled) tool; the nearest tool by vector among the others loads.
func TestSemanticSearchSkipsExcluded(t *testing.T) {
	reg := embeddedRegistry(t, semanticVectors)
	for _, idx := range []*Index{nil, IndexFor(reg)} {
		turn := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, idx)
		res, err := turn.SearchExcluding(SearchRequest{Query: paraphrase, QueryVector: []float32{0.3, 0, 0.2, 1}}, []string{"send_message"})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Matches {
			if m.Name == "send_message" {
				t.Errorf("index %v: excluded send_message matched: %+v", idx != nil, res.Matches)
			}
		}
		if !slices.Equal(res.Loaded, []string{"playwright_browser"}) {
			t.Errorf("index %v: loaded %v, want playwright_browser, the nearest not excluded", idx != nil, res.Loaded)
		}
	}
}

// Vectors the engine computed itself (Embedded) rank a query as the
// registry's own embeddings do with a caller's vector: same loads, same
// matches. A caller's query_vector ranks instead when both are given;
// vectors of another index, or a query vector of another dimension, leave
// the keyword ranking with a note; a turn without the registry's index
// has nothing they are of.
func TestSearchEmbeddedByEngine(t *testing.T) {
	plain := resolver.Default()
	idx := IndexFor(plain)
	vs := idx.Search().NewVectors(4, func(i int) []float32 { return semanticVectors[idx.Search().Name(i)] })
	turn := func(x *Index) *Turn { return FreezeIndexed(1, resolve(t, plain, defaultSession()), nil, x) }
	if turn(idx).Index() != idx || turn(nil).Index() != nil {
		t.Fatal("Turn.Index is not the index the turn was frozen with")
	}
	got, err := turn(idx).Search(SearchRequest{Query: paraphrase, Embedded: &Embedded{Query: messageVector, Vectors: vs}})
	if err != nil {
		t.Fatal(err)
	}
	reg := embeddedRegistry(t, semanticVectors)
	want, err := FreezeIndexed(1, resolve(t, reg, defaultSession()), nil, IndexFor(reg)).Search(SearchRequest{Query: paraphrase, QueryVector: messageVector})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Loaded, []string{"send_message"}) || !reflect.DeepEqual(got.Matches, want.Matches) || got.Note != want.Note {
		t.Fatalf("engine vectors: loaded %v, matches %+v, note %q; want %v, %+v, %q", got.Loaded, got.Matches, got.Note, want.Loaded, want.Matches, want.Note)
	}
	// A caller's vector ranks by the registry's embeddings, not the engine's.
	both, err := turn(idx).Search(SearchRequest{Query: paraphrase, QueryVector: messageVector, Embedded: &Embedded{Query: messageVector, Vectors: vs}})
	if err != nil || len(both.Loaded) != 0 || !strings.Contains(both.Note, "this registry carries no tool embeddings") {
		t.Errorf("caller's vector beside the engine's: %+v, %v; want the caller's path (no registry embeddings: keywords, said so)", both, err)
	}
	other := NewIndex(plain.Tools(), nil)
	for name, em := range map[string]*Embedded{
		"another index's vectors": {Query: messageVector, Vectors: other.Search().NewVectors(4, func(i int) []float32 { return semanticVectors[other.Search().Name(i)] })},
		"a query of dimension 3":  {Query: messageVector[:3], Vectors: vs},
		"no vectors":              {Query: messageVector},
	} {
		r, err := turn(idx).Search(SearchRequest{Query: "send a message", Embedded: em})
		kw, _ := turn(idx).Search(SearchRequest{Query: "send a message"})
		if err != nil || !reflect.DeepEqual(r.Matches, kw.Matches) || !strings.Contains(r.Note, "the engine's tool embeddings do not cover this turn's tools; ranked by keywords") {
			t.Errorf("%s: matches %+v, note %q, %v; want the keyword matches %+v with a note", name, r.Matches, r.Note, err, kw.Matches)
		}
	}
	if r, err := turn(nil).Search(SearchRequest{Query: "send a message", Embedded: &Embedded{Query: messageVector, Vectors: vs}}); err != nil || !strings.Contains(r.Note, "do not cover") {
		t.Errorf("a turn without the registry's index: note %q, %v", r.Note, err)
	}
}
