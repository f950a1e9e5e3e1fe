package toolsearch

import (
	"math"
)

// Vectors are vectors of an index's documents, each of unit length and
// all of one dimension, by which a query ranks by meaning (Semantic,
// FusedRanked): the documents' own vectors (Doc.Vector, kept by Build) or
// vectors computed apart from the index for its documents (NewVectors),
// such as an embedding endpoint's. They are stored in one block, row i
// for document i, so that a scan reads memory in order. Vectors are
// immutable and safe for concurrent use.
type Vectors struct {
	ix   *Index
	flat []float32 // row i at [i*dim, (i+1)*dim); zeros for a document without a vector
	has  []bool
	dim  int
	n    int // documents with a vector
}

// docVectors keeps the docs' own vectors: those of the first vector's
// dimension that are not all zeros and finite; nil when no doc has one.
func (ix *Index) docVectors(docs []Doc) *Vectors {
	dim := 0
	for i := range docs {
		if len(docs[i].Vector) > 0 {
			dim = len(docs[i].Vector)
			break
		}
	}
	if dim == 0 {
		return nil
	}
	return newVectors(ix, len(docs), dim, func(i int) []float32 { return docs[i].Vector })
}

// NewVectors returns vectors of dimension dim for ix's documents: vec(i)
// is document i's vector, or nil for none (vec is called once per
// document, in order). A vector of another length, all zeros or with a
// number that is not finite counts as none. The vectors are scaled to
// unit length and copied: vec's slices are not kept.
func (ix *Index) NewVectors(dim int, vec func(i int) []float32) *Vectors {
	if dim <= 0 {
		return nil
	}
	return newVectors(ix, len(ix.names), dim, vec)
}

func newVectors(ix *Index, n, dim int, vec func(i int) []float32) *Vectors {
	vs := &Vectors{ix: ix, flat: make([]float32, n*dim), has: make([]bool, n), dim: dim}
	for i := range n {
		v := vec(i)
		if len(v) != dim {
			continue
		}
		if unitInto(vs.flat[i*dim:(i+1)*dim], v) {
			vs.has[i] = true
			vs.n++
		}
	}
	return vs
}

// Dim returns the vectors' dimension.
func (vs *Vectors) Dim() int { return vs.dim }

// Len returns the number of documents that have a vector.
func (vs *Vectors) Len() int { return vs.n }

// Of reports whether vs are vectors of ix's documents (made by
// ix.NewVectors, or ix's own): only then may a search of ix use them.
func (vs *Vectors) Of(ix *Index) bool { return vs != nil && vs.ix == ix }

// unitInto writes v scaled to length 1 into dst (of v's length); false,
// with dst untouched, for a zero or non-finite vector.
func unitInto(dst, v []float32) bool {
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	norm := math.Sqrt(sq)
	if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return false
	}
	for j, x := range v {
		dst[j] = float32(float64(x) / norm)
	}
	return true
}

// unit returns v scaled to length 1, or false for a zero or non-finite
// vector.
func unit(v []float32) ([]float32, bool) {
	u := make([]float32, len(v))
	return u, unitInto(u, v)
}

// HasVectors reports whether any indexed tool carries a vector of its own
// (Doc.Vector), that is whether Semantic and Fused have anything to rank
// by meaning.
func (ix *Index) HasVectors() bool { return ix.emb != nil }

// OwnVectors returns the index's own vectors (Doc.Vector), or nil when no
// document has one.
func (ix *Index) OwnVectors() *Vectors { return ix.emb }

// Semantic returns the best k documents admitted by f by the cosine
// similarity of their own vector to vec (the query's embedding, from the
// same model as the tools'), best first, ties broken by name. Documents
// without a vector are not ranked; a vec of another dimension than the
// index's, or all zeros, returns no hits.
func (ix *Index) Semantic(vec []float32, k int, f *Filter) []Hit {
	return ix.SemanticWith(ix.emb, vec, k, f)
}

// SemanticWith is Semantic by the vectors vs (which must be vectors of
// ix's documents, Vectors.Of, or nothing is returned) instead of the
// index's own.
func (ix *Index) SemanticWith(vs *Vectors, vec []float32, k int, f *Filter) []Hit {
	if k <= 0 || !vs.Of(ix) || len(vec) != vs.dim {
		return nil
	}
	q, ok := unit(vec)
	if !ok {
		return nil
	}
	dim := vs.dim
	var top []Hit
	for i, has := range vs.has {
		if !has || !f.Has(i) {
			continue
		}
		h := Hit{Name: ix.names[i], Score: float64(dot32(vs.flat[i*dim:(i+1)*dim], q)), doc: int32(i)}
		if len(top) == k && !better(h, top[k-1]) {
			continue // not in the best k: skip offer's scan
		}
		top = ix.offer(top, k, h)
	}
	return top
}

// dot32 returns the dot product of two vectors of the same length, summed
// in eight float32 lanes in a fixed order: the same inputs give the same
// result every time, and the lanes keep the processor's adders busy (a
// 10,000 × 768 scan is several times faster than one float64 sum).
func dot32(v, q []float32) float32 {
	q = q[:len(v)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	j := 0
	for ; j+8 <= len(v); j += 8 {
		a, b := v[j:j+8:j+8], q[j:j+8:j+8]
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		s4 += a[4] * b[4]
		s5 += a[5] * b[5]
		s6 += a[6] * b[6]
		s7 += a[7] * b[7]
	}
	for ; j < len(v); j++ {
		s0 += v[j] * q[j]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// Fusion parameters of Fused.
const (
	// rrfK is the constant of reciprocal rank fusion: a document at rank r
	// (from 1) of a ranking adds 1/(rrfK + r).
	rrfK = 60
	// fuseDepth is how deep each ranking is read before fusion, at least
	// k.
	fuseDepth = 50
)

// FusedHit is one result of FusedRanked: the fused hit, with its place in
// each of the two rankings it fuses.
type FusedHit struct {
	Hit
	// KeywordRank is the hit's rank (from 1) in the keyword ranking of
	// the query, read to max(k, 50); 0 when it is not in it.
	KeywordRank int
	// KeywordScore is the hit's keyword score (+Inf for an exact name); 0
	// when KeywordRank is 0.
	KeywordScore float64
	// SemanticRank is the hit's rank (from 1) by the cosine similarity of
	// its vector to the query vector, read to max(k, 50); 0 when it is
	// not in that ranking.
	SemanticRank int
	// Similarity is that cosine similarity; 0 when SemanticRank is 0.
	Similarity float64
}

// Fused ranks the documents admitted by f by reciprocal rank fusion of
// the keyword ranking of query and the semantic ranking of vec by the
// index's own vectors (the optional semantic path, for operators who
// have an embedding model): each ranking, read to max(k, 50), adds
// 1/(60 + rank) to a document's score. Ties are broken by name, so the
// result is deterministic for the same index, query and vector. Without
// a usable vec (nil, another dimension, or an index without vectors)
// Fused is Keyword; a query that is exactly a document's name still ranks
// it first.
func (ix *Index) Fused(query string, vec []float32, k int, f *Filter) []Hit {
	fh := ix.FusedRanked(query, vec, k, f)
	if fh == nil {
		return nil
	}
	out := make([]Hit, len(fh))
	for i := range fh {
		out[i] = fh[i].Hit
	}
	return out
}

// FusedRanked is Fused that also says where each hit stood in the keyword
// and the semantic ranking, for callers that judge a hit's confidence by
// either ranking. The hits and their order are Fused's.
func (ix *Index) FusedRanked(query string, vec []float32, k int, f *Filter) []FusedHit {
	return ix.FusedRankedWith(query, vec, ix.emb, k, f)
}

// FusedRankedWith is FusedRanked by the vectors vs (vectors of ix's
// documents, Vectors.Of) instead of the index's own: vectors an embedding
// endpoint computed for an index built without them. With vs nil or not
// ix's it is the keyword ranking.
func (ix *Index) FusedRankedWith(query string, vec []float32, vs *Vectors, k int, f *Filter) []FusedHit {
	sem := ix.SemanticWith(vs, vec, max(k, fuseDepth), f)
	if len(sem) == 0 {
		kw := ix.Keyword(query, k, f)
		if kw == nil {
			return nil
		}
		out := make([]FusedHit, len(kw))
		for r, h := range kw {
			out[r] = FusedHit{Hit: h, KeywordRank: r + 1, KeywordScore: h.Score}
		}
		return out
	}
	kw := ix.Keyword(query, max(k, fuseDepth), f)
	type parts struct {
		score float64
		kw    int // index in kw + 1
		sem   int // index in sem + 1
	}
	at := make(map[int32]*parts, len(kw)+len(sem))
	get := func(d int32) *parts {
		p := at[d]
		if p == nil {
			p = &parts{}
			at[d] = p
		}
		return p
	}
	exact := int32(-1)
	for r, h := range kw {
		if math.IsInf(h.Score, 1) {
			exact = h.doc
		}
		p := get(h.doc)
		p.score += 1 / float64(rrfK+r+1)
		p.kw = r + 1
	}
	for r, h := range sem {
		p := get(h.doc)
		p.score += 1 / float64(rrfK+r+1)
		p.sem = r + 1
	}
	var top []Hit
	for d, p := range at {
		sc := p.score
		if d == exact {
			sc = math.Inf(1)
		}
		top = ix.offer(top, k, Hit{Name: ix.names[d], Score: sc, doc: d})
	}
	out := make([]FusedHit, len(top))
	for i, h := range top {
		p := at[h.doc]
		out[i] = FusedHit{Hit: h, KeywordRank: p.kw, SemanticRank: p.sem}
		if p.kw > 0 {
			out[i].KeywordScore = kw[p.kw-1].Score
		}
		if p.sem > 0 {
			out[i].Similarity = sem[p.sem-1].Score
		}
	}
	return out
}

// Dim returns the dimension of the index's own vectors (that of the
// first document with one), or 0 when no document has a vector.
func (ix *Index) Dim() int {
	if ix.emb == nil {
		return 0
	}
	return ix.emb.dim
}
