package resolver

// Tool embeddings (the optional semantic path): a vector per tool,
// computed by the operator's embedding model, that tool_search fuses with
// its keyword ranking when a search carries the query's vector. The
// engine never computes one.

import (
	"math"
	"strconv"
)

// MaxEmbeddingDim is the most numbers a tool embedding may have.
const MaxEmbeddingDim = 4096

// embedding reads a tool's "embedding": 1 to MaxEmbeddingDim finite
// numbers, not all zero, with the dimension of the registry's first
// embedding. The numbers are kept as float32, the precision of the
// search index.
func (l *loader) embedding(path string, n *jnode, name string) []float32 {
	if n.kind != jArray {
		l.addf("%s: is %s; want an array of numbers, the tool's vector from your embedding model", path, n.kind)
		return nil
	}
	if len(n.elems) == 0 || len(n.elems) > MaxEmbeddingDim {
		l.addf("%s: has %d numbers; want 1 to %d (the tool's vector from your embedding model), or remove it", path, len(n.elems), MaxEmbeddingDim)
		return nil
	}
	v := make([]float32, len(n.elems))
	ok, zero := true, true
	for i, e := range n.elems {
		if e.kind != jNumber {
			l.addf("%s[%d]: is %s; want a number", path, i, e.kind)
			ok = false
			continue
		}
		f, err := strconv.ParseFloat(e.s, 32)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			l.addf("%s[%d]: %s is not a finite 32-bit number; scale the vector or re-embed the tool", path, i, e.s)
			ok = false
			continue
		}
		v[i] = float32(f)
		zero = zero && v[i] == 0
	}
	if !ok {
		return nil
	}
	if zero {
		l.addf("%s: is all zeros, a vector with no direction; re-embed the tool or remove the embedding", path)
		return nil
	}
	if l.embDim == 0 {
		l.embDim, l.embFirst = len(v), name
	} else if len(v) != l.embDim {
		l.addf("%s: has %d numbers, but the registry's embeddings have %d (the first is %q's); embed every tool with the same model", path, len(v), l.embDim, l.embFirst)
		return nil
	}
	return v
}

// appendEmbedding appends v as a JSON array, each number in the shortest
// form that reads back as the same float32, so that loading the output
// and encoding it again gives the same bytes.
func appendEmbedding(b []byte, v []float32) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

// EmbeddingDim returns the dimension of the registry's tool embeddings
// (every one has the same), or 0 when no tool carries one.
func (r *Registry) EmbeddingDim() int { return r.embeddingDim }
