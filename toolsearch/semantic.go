package toolsearch

import (
	"math"
)

// addVector stores doc i's vector at unit length when it has the index's
// dimension (that of the first vector) and is not all zeros.
func (ix *Index) addVector(i int, v []float32, n int) {
	if len(v) == 0 {
		return
	}
	if ix.vecs == nil {
		ix.vecs = make([][]float32, n)
		ix.dim = len(v)
	}
	if len(v) != ix.dim {
		return
	}
	u, ok := unit(v)
	if ok {
		ix.vecs[i] = u
	}
}

// unit returns v scaled to length 1, or false for a zero or non-finite
// vector.
func unit(v []float32) ([]float32, bool) {
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	norm := math.Sqrt(sq)
	if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return nil, false
	}
	u := make([]float32, len(v))
	for j, x := range v {
		u[j] = float32(float64(x) / norm)
	}
	return u, true
}

// HasVectors reports whether any indexed tool carries a vector, that is
// whether Semantic and Fused have anything to rank by meaning.
func (ix *Index) HasVectors() bool { return ix.vecs != nil }

// Semantic returns the best k documents admitted by f by the cosine
// similarity of their vector to vec (the query's embedding, from the same
// model as the tools'), best first, ties broken by name. Documents
// without a vector are not ranked; a vec of another dimension than the
// index's, or all zeros, returns no hits.
func (ix *Index) Semantic(vec []float32, k int, f *Filter) []Hit {
	if k <= 0 || ix.vecs == nil || len(vec) != ix.dim {
		return nil
	}
	q, ok := unit(vec)
	if !ok {
		return nil
	}
	var top []Hit
	for i, v := range ix.vecs {
		if v == nil || !f.Has(i) {
			continue
		}
		dot := dotProduct(v, q)
		if len(top) == k && !better(Hit{Name: ix.names[i], Score: dot}, top[k-1]) {
			continue // not in the best k: skip offer's scan
		}
		top = ix.offer(top, k, Hit{Name: ix.names[i], Score: dot, doc: int32(i)})
	}
	return top
}

// dotProduct returns the dot product of two vectors of the same length,
// summed in float64 over four lanes in a fixed order (deterministic).
func dotProduct(v, q []float32) float64 {
	q = q[:len(v)]
	var s0, s1, s2, s3 float64
	j := 0
	for ; j+4 <= len(v); j += 4 {
		s0 += float64(v[j]) * float64(q[j])
		s1 += float64(v[j+1]) * float64(q[j+1])
		s2 += float64(v[j+2]) * float64(q[j+2])
		s3 += float64(v[j+3]) * float64(q[j+3])
	}
	for ; j < len(v); j++ {
		s0 += float64(v[j]) * float64(q[j])
	}
	return (s0 + s1) + (s2 + s3)
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
// the keyword ranking of query and the semantic ranking of vec (the
// optional semantic path of issue #27, for operators who have an
// embedding model): each ranking, read to max(k, 50), adds 1/(60 + rank)
// to a document's score. Ties are broken by name, so the result is
// deterministic for the same index, query and vector. Without a usable
// vec (nil, another dimension, or an index without vectors) Fused is
// Keyword; a query that is exactly a document's name still ranks it
// first.
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
	sem := ix.Semantic(vec, max(k, fuseDepth), f)
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

// Dim returns the dimension of the index's vectors (that of the first
// document with one), or 0 when no document has a vector.
func (ix *Index) Dim() int {
	if ix.vecs == nil {
		return 0
	}
	return ix.dim
}
