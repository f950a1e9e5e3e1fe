// Package toolsearch is the search behind tool_search : an
// immutable index over tool definitions that answers exact names, keyword
// queries ranked by BM25, and regular expressions.
//
// Text analysis (Terms) splits tool names the way MCP servers write them
// (mcp__github__create_issue, createIssue, kube.pods-list) and indexes, per
// tool, four fields with their own weights: the name, the description, the
// parameter names and the parameter descriptions (found by walking the
// JSON Schema, SchemaText). Ranking is BM25 over the weighted term
// frequencies (BM25F-style); a query word also brings in, at lower
// weights, the index's other words of its derivational family
// ("notification" → notify, morph.go), the words of its groups in a
// hand-written concept lexicon (conceptGroups: "vacation" → away, "ram" →
// memory, "lat" → coordinates) and, lower still, in a general lexicon of
// everyday synonyms (generalGroups); a word that none of these reaches
// and the index lacks brings in, lowest of all, its WordNet 3.0 synonyms,
// hypernyms, derivations, entailments and the first words of its
// definition (wordnet.go, a table compiled by internal/wordnetgen), the
// index's words whose WordNet line names it (wordnetReverse), and the
// index's words it begins (prefixed). Every word a query word brings in
// counts at most the query word's own idf (expandCap); two neighbouring
// query words also count joined ("postgre sql" → postgresql); a small
// Chinese–English lexicon links the two scripts (lexicon_zh.go). A
// document's score is scaled by
// the square root of the share of the query's words it answers
// (coordination). Ties are broken by name, so equal inputs give equal
// results in the same order.
//
// An Index is immutable and safe for concurrent use. Build reuses the
// analysis of every tool a previous index already holds unchanged, so a
// registry change costs the analysis of the changed tools only.
//
// The package imports nothing from the project.
package toolsearch

import (
	"bytes"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
)

// Doc is one searchable tool definition.
type Doc struct {
	// Name is the tool name, unique in an index (a later duplicate is
	// indexed but Lookup finds the first).
	Name string
	// Description is the tool's description.
	Description string
	// Parameters is the tool's input JSON Schema.
	Parameters []byte
	// Context describes the group the tool belongs to (its MCP server or
	// namespace), indexed with a low weight; "" for none.
	Context string
	// Vector is the tool's embedding, computed by the operator's own model
	// (the optional semantic path, Fused); nil for none. Every vector of an
	// index has the length of the first one; a tool whose vector has
	// another length, or is all zeros, is treated as having none.
	Vector []float32
}

// Hit is one search result.
type Hit struct {
	// Name is the tool name.
	Name string `json:"name"`
	// Score is the ranking score (higher is better); scores are comparable
	// within one search only.
	Score float64 `json:"score"`
	doc   int32
}

// Doc returns the hit's position in the index (the order of Build's docs).
func (h Hit) Doc() int { return int(h.doc) }

// termTF is one term of a document with its weighted frequency.
type termTF struct {
	term string
	tf   float32
}

// analyzed is the analysis of one document, kept so that the next Build
// can reuse it.
type analyzed struct {
	terms  []termTF // sorted by term
	length float32  // weighted length
	ptext  string   // parameter names and descriptions, for Regex
}

// textLen is the number of bytes Regex may scan in document i.
func (ix *Index) textLen(i int) int {
	return len(ix.names[i]) + len(ix.descs[i]) + len(ix.docs[i].ptext)
}

type posting struct {
	doc int32
	tf  float32
}

// Index is an immutable search index over tool definitions.
type Index struct {
	names  []string
	descs  []string
	ctxs   []string
	params [][]byte
	emb    *Vectors // the docs' own vectors (Doc.Vector); nil when none has one
	docs   []analyzed
	byName map[string]int32

	dict   map[string]int32 // term → id
	terms  []string         // id → term
	sorted []int32          // term ids in term order (prefix lookup)
	offs   []int32          // postings of term t: post[offs[t]:offs[t+1]]
	post   []posting
	idf    []float32
	norm   []float32 // per doc: k1 * (1 - b + b*len/avgLen)
	// family maps a derivational family key (familyKey) to the ids of
	// its terms, for the families of at least two terms.
	family map[string][]int32
	// rev maps a term to the index's terms whose WordNet line names it
	// (wordnetReverse).
	rev map[string][]int32

	pool sync.Pool // *scoreBuf
}

type scoreBuf struct {
	score   []float32
	words   []uint64 // per doc: the query words (bits) it matched
	touched []int32
}

// Build indexes docs, in order. When prev is not nil, the analysis of each
// doc that prev holds with the same name, description and parameters is
// reused instead of recomputed (the incremental path of a registry
// change). Build keeps references to the docs' strings and bytes: treat
// them as immutable.
func Build(docs []Doc, prev *Index) *Index {
	ix := &Index{
		names:  make([]string, len(docs)),
		descs:  make([]string, len(docs)),
		ctxs:   make([]string, len(docs)),
		params: make([][]byte, len(docs)),
		docs:   make([]analyzed, len(docs)),
		byName: make(map[string]int32, len(docs)),
	}
	an := &analyzer{cache: make(map[string]string, 4096)}
	tf := make(map[string]float32, 64)
	var total float64
	ix.emb = ix.docVectors(docs)
	for i, d := range docs {
		ix.names[i], ix.descs[i], ix.ctxs[i], ix.params[i] = d.Name, d.Description, d.Context, d.Parameters
		if _, dup := ix.byName[d.Name]; !dup {
			ix.byName[d.Name] = int32(i)
		}
		if prev != nil {
			if j, ok := prev.byName[d.Name]; ok && prev.descs[j] == d.Description && prev.ctxs[j] == d.Context && bytes.Equal(prev.params[j], d.Parameters) {
				ix.docs[i] = prev.docs[j]
				total += float64(ix.docs[i].length)
				continue
			}
		}
		ix.docs[i] = analyze(d, an, tf)
		total += float64(ix.docs[i].length)
	}

	// Dictionary and document frequencies, then postings in CSR form.
	ix.dict = make(map[string]int32, len(docs)*8)
	var df []int32
	for i := range ix.docs {
		for _, t := range ix.docs[i].terms {
			id, ok := ix.dict[t.term]
			if !ok {
				id = int32(len(df))
				ix.dict[t.term] = id
				df = append(df, 0)
			}
			df[id]++
		}
	}
	ix.terms = make([]string, len(df))
	for t, id := range ix.dict {
		ix.terms[id] = t
	}
	ix.sorted = make([]int32, len(df))
	for i := range ix.sorted {
		ix.sorted[i] = int32(i)
	}
	slices.SortFunc(ix.sorted, func(a, b int32) int { return strings.Compare(ix.terms[a], ix.terms[b]) })
	ix.offs = make([]int32, len(df)+1)
	for t, n := range df {
		ix.offs[t+1] = ix.offs[t] + n
	}
	ix.post = make([]posting, ix.offs[len(df)])
	fill := make([]int32, len(df))
	copy(fill, ix.offs[:len(df)])
	for i := range ix.docs {
		for _, t := range ix.docs[i].terms {
			id := ix.dict[t.term]
			ix.post[fill[id]] = posting{doc: int32(i), tf: t.tf}
			fill[id]++
		}
	}
	n := float64(len(docs))
	ix.idf = make([]float32, len(df))
	for t, d := range df {
		ix.idf[t] = float32(math.Log(1 + (n-float64(d)+0.5)/(float64(d)+0.5)))
	}
	avg := 1.0
	if len(docs) > 0 && total > 0 {
		avg = total / n
	}
	ix.norm = make([]float32, len(docs))
	for i := range ix.docs {
		ix.norm[i] = float32(bm25K1 * (1 - bm25B + bm25B*float64(ix.docs[i].length)/avg))
	}
	ix.family = families(ix.dict)
	if wordnetRevOn {
		ix.rev = wordnetReverse(ix.terms)
	}
	size := len(docs)
	ix.pool.New = func() any { return &scoreBuf{score: make([]float32, size), words: make([]uint64, size)} }
	return ix
}

// analyze computes the weighted terms of one document.
func analyze(d Doc, a *analyzer, tf map[string]float32) analyzed {
	clear(tf)
	var length float32
	add := func(text string, w64 float64) {
		w := float32(w64)
		a.dst = a.dst[:0]
		a.run(text)
		scratch := a.dst
		for _, t := range scratch {
			tw := w
			if isUnigram(t) {
				tw *= weightUnigram
			}
			tf[t] += tw
			length += tw
		}
	}
	add(d.Name, weightName)
	add(d.Description, weightDescription)
	pnames, ptexts := SchemaText(d.Parameters)
	for _, p := range pnames {
		add(p, weightParamName)
	}
	for _, p := range ptexts {
		add(p, weightParamText)
	}
	if d.Context != "" {
		add(d.Context, weightContext)
	}
	out := analyzed{terms: make([]termTF, 0, len(tf)), length: length}
	for t, f := range tf {
		out.terms = append(out.terms, termTF{term: t, tf: f})
	}
	sortTerms(out.terms)
	if len(pnames)+len(ptexts) > 0 {
		out.ptext = strings.Join(pnames, " ") + "\n" + strings.Join(ptexts, "\n")
	}
	return out
}

// sortTerms sorts by term (insertion sort: documents have tens of terms).
func sortTerms(ts []termTF) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].term < ts[j-1].term; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// Len returns the number of indexed documents.
func (ix *Index) Len() int { return len(ix.names) }

// Terms returns the number of distinct terms in the index.
func (ix *Index) Terms() int { return len(ix.idf) }

// Name returns the name of document i.
func (ix *Index) Name(i int) string { return ix.names[i] }

// Lookup returns the position of the document named name.
func (ix *Index) Lookup(name string) (int, bool) {
	i, ok := ix.byName[name]
	return int(i), ok
}

// Filter is a set of document positions a search is restricted to. The
// zero Filter (nil) admits every document.
type Filter struct {
	bits []uint64
}

// NewFilter returns the filter admitting the named documents; names the
// index does not hold are ignored.
func (ix *Index) NewFilter(names []string) *Filter {
	f := &Filter{bits: make([]uint64, (len(ix.names)+63)/64)}
	for _, n := range names {
		if i, ok := ix.byName[n]; ok {
			f.bits[i>>6] |= 1 << (uint(i) & 63)
		}
	}
	return f
}

// FilterAll returns the filter admitting the named documents in one pass
// over names, and true; false when the index lacks one of them.
func (ix *Index) FilterAll(names iter.Seq[string]) (*Filter, bool) {
	f := &Filter{bits: make([]uint64, (len(ix.names)+63)/64)}
	for n := range names {
		i, ok := ix.byName[n]
		if !ok {
			return nil, false
		}
		f.bits[i>>6] |= 1 << (uint(i) & 63)
	}
	return f, true
}

// Has reports whether the filter admits document i. A nil filter admits
// every document.
func (f *Filter) Has(i int) bool {
	if f == nil {
		return true
	}
	return i>>6 < len(f.bits) && f.bits[i>>6]&(1<<(uint(i)&63)) != 0
}
