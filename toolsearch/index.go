// Package toolsearch is the search behind tool_search (SPEC R29): an
// immutable index over tool definitions that answers exact names, keyword
// queries ranked by BM25, and regular expressions.
//
// Text analysis (Terms) splits tool names the way MCP servers write them
// (mcp__github__create_issue, createIssue, kube.pods-list) and indexes, per
// tool, four fields with their own weights: the name, the description, the
// parameter names and the parameter descriptions (found by walking the
// JSON Schema, SchemaText). Ranking is BM25 over the weighted term
// frequencies (BM25F-style); a query word also brings in, at a lower
// weight, the words of its groups in a small hand-written concept lexicon
// (conceptGroups: "vacation" → away, "ram" → memory, "lat" → coordinates),
// and a document's score is scaled by the square root of the share of the
// query's words it answers (coordination). Ties are broken by name, so
// equal inputs give equal results in the same order.
//
// An Index is immutable and safe for concurrent use. Build reuses the
// analysis of every tool a previous index already holds unchanged, so a
// registry change costs the analysis of the changed tools only.
//
// The package imports nothing from the project.
package toolsearch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Field weights of the ranking: a term in a tool's name counts three times
// a term in its description; parameter names count like the description,
// parameter descriptions (and enum values) and the tool's group (server)
// description half. A concept word a query brings in (conceptGroups)
// counts half of a word the query has. These are the weights the index
// was first written with; on the dev half of the labelled queries
// (searcheval) a grid around them (name 1.5-4, parameter text and group
// 0.25-1) moved recall@5 by at most 0.03, and for #27 on the tuning sets
// (name 2-4, parameter text 0.5-1, concept 0.3-0.6, BM25 k1 0.9-1.5 and b
// 0.4-0.9) by at most 0.04, so they were kept.
const (
	weightName        = 3.0
	weightDescription = 1.0
	weightParamName   = 1.0
	weightParamText   = 0.5
	weightContext     = 0.5
	// weightConcept is the weight of a word the concept lexicon brings in
	// for a query word (conceptGroups).
	weightConcept = float32(0.5)
	// weightIntent is the weight of the read verbs a question brings in
	// (asksToRead).
	weightIntent = float32(0.4)
	// weightAction is the weight of the tool verb a request's action word
	// brings in (actionClasses).
	weightAction = float32(0.3)
	// weightUnigram scales a single CJK character, in documents and
	// queries, against the bigrams of the same text.
	weightUnigram = 0.3
)

// intentWord is the query-word bit of the verbs a question or an action
// word brings in (asksToRead, actionClasses): they score only tools the
// query's words found, and count as one more thing a tool answers.
const intentWord = 63

// readVerbs are the stemmed verbs of tools that read.
var readVerbs = []string{"get", "list", "show"}

// actionClasses group a request's action words under the verbs tool names
// use for that action (the first word of a line): a request to "erase"
// something ranks a delete_ tool above a list_ tool of the same thing.
// They weigh weightAction and score only tools the query's words found
// (intentWord).
var actionClasses = `
create add new make write record store save submit register compose draft
update change edit modify set adjust rename switch mark
delete remove erase wipe purge discard
list show enumerate every all
get read show view inspect check see
send notify tell message ping
run trigger start execute launch
stop cancel halt abort
`

// actionVerbs maps a stemmed action word to the stemmed tool verbs of its
// classes.
var actionVerbs = func() map[string][]string {
	m := map[string][]string{}
	for line := range strings.SplitSeq(actionClasses, "\n") {
		ws := strings.Fields(line)
		if len(ws) == 0 {
			continue
		}
		verb := stem(ws[0])
		for _, w := range ws[1:] {
			if s := stem(w); s != verb && !slices.Contains(m[s], verb) {
				m[s] = append(m[s], verb)
			}
		}
	}
	return m
}()

// questionWords open a request that asks to read something.
var questionWords = map[string]bool{
	"what": true, "which": true, "who": true, "whose": true, "how": true, "when": true, "where": true, "why": true,
	"is": true, "are": true, "was": true, "were": true, "did": true, "does": true, "do": true, "has": true, "have": true,
}

// asksToRead reports whether the query opens with a question word ("what
// devices are in the kitchen", "is the door locked", "how many").
func asksToRead(q string) bool {
	q = strings.TrimLeft(q, " \t\n\"'¿")
	end := strings.IndexFunc(q, func(r rune) bool { return !unicode.IsLetter(r) })
	if end < 0 {
		end = len(q)
	}
	return end > 0 && end <= 5 && questionWords[strings.ToLower(q[:end])]
}

// coord is the factor of the coordination of a document that answers the
// share c of the query's words: its square root. The power 1 ranked the
// tuning sets a little better but spreads scores so that fewer right
// tools reach deferral.ConfidentShare of the best one (loaded recall@5
// 0.927 against 0.953 on the first corpus); 0 is no coordination.
func coord(c float32) float32 { return float32(math.Sqrt(float64(c))) }

// BM25 parameters (the usual defaults).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Bounds of a search.
const (
	// MaxPatternLen is the longest regular expression Regex accepts, in
	// bytes.
	MaxPatternLen = 256
	// MaxRegexInsts bounds the compiled program of a regular expression
	// (RE2 instructions, after counted repetitions are expanded): Regex
	// refuses a larger one. Patterns of a few words compile to tens.
	MaxRegexInsts = 200
	// RegexBudget bounds the matching work of one Regex call: the bytes
	// of the admitted tools' text times the pattern's width (regexWidth),
	// estimated before any matching. Regex refuses a pattern whose
	// estimate is above it. Over 10,000 tools a pattern of width up to 4
	// fits (a literal, a.*b, (a|b)*c); measured on 2 cores, a call at the
	// budget takes under 0.3 s.
	RegexBudget = 6 << 20
	// maxQueryTerms bounds the distinct terms of a keyword query that are
	// scored, its own and those the concept lexicon brings in; later ones
	// are ignored.
	maxQueryTerms = 64
)

// ErrPattern reports a regular expression Regex cannot use: too long, not
// valid RE2 syntax, or too costly to match (MaxRegexInsts, RegexBudget).
// Match it with errors.Is.
var ErrPattern = errors.New("unusable regular expression")

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
	vecs   [][]float32 // unit-length tool vectors, nil where a tool has none
	dim    int         // the length of every vector in vecs
	docs   []analyzed
	byName map[string]int32

	dict map[string]int32 // term → id
	offs []int32          // postings of term t: post[offs[t]:offs[t+1]]
	post []posting
	idf  []float32
	norm []float32 // per doc: k1 * (1 - b + b*len/avgLen)

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
	for i, d := range docs {
		ix.names[i], ix.descs[i], ix.ctxs[i], ix.params[i] = d.Name, d.Description, d.Context, d.Parameters
		ix.addVector(i, d.Vector, len(docs))
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

// Has reports whether the filter admits document i. A nil filter admits
// every document.
func (f *Filter) Has(i int) bool {
	if f == nil {
		return true
	}
	return i>>6 < len(f.bits) && f.bits[i>>6]&(1<<(uint(i)&63)) != 0
}

// Keyword ranks the documents admitted by f against a keyword query by
// BM25 over their weighted fields and returns the best k, best first, ties
// broken by name. A query that is exactly an admitted document's name
// ranks that document first. A query without any indexed term returns no
// hits. Its score buffer is pooled: a search allocates the query's terms
// and the returned slice only.
func (ix *Index) Keyword(query string, k int, f *Filter) []Hit {
	if k <= 0 || len(ix.names) == 0 {
		return nil
	}
	var idsArr [maxQueryTerms]int32
	var wArr [maxQueryTerms]float32
	var srcArr [maxQueryTerms]uint8
	ids, ws, src := idsArr[:0], wArr[:0], srcArr[:0]
	var termArr [maxQueryTerms]string
	terms := appendTerms(termArr[:0], query)
	// Each scored term remembers the query word it stands for (src), so
	// that a document is credited with the distinct words it answers.
	addTerm := func(t string, w float32, word int) {
		id, ok := ix.dict[t]
		if !ok || len(ids) == maxQueryTerms {
			return
		}
		for i, x := range ids {
			if x == id {
				ws[i] = max(ws[i], w)
				return
			}
		}
		if word != intentWord {
			word = min(word, intentWord-1)
		}
		ids, ws, src = append(ids, id), append(ws, w), append(src, uint8(word))
	}
	words := 0 // distinct query words that are not CJK unigrams
	for i, t := range terms {
		if isUnigram(t) {
			addTerm(t, weightUnigram, i)
		} else {
			addTerm(t, 1, i)
			if !slices.Contains(terms[:i], t) {
				words++
			}
		}
	}
	for i, t := range terms {
		for _, c := range conceptLexicon[t] {
			addTerm(c, weightConcept, i)
		}
	}
	// A question asks to read: its tools are the ones that get, list or
	// show; an action word asks for the tools whose verb does it. These
	// verbs rank among the tools the query's words found (intentWord).
	if asksToRead(query) {
		for _, t := range readVerbs {
			addTerm(t, weightIntent, intentWord)
		}
	}
	for _, t := range terms {
		for _, v := range actionVerbs[t] {
			addTerm(v, weightAction, intentWord)
		}
	}
	exact, hasExact := ix.byName[strings.TrimSpace(query)]
	if hasExact && !f.Has(int(exact)) {
		hasExact = false
	}
	if len(ids) == 0 && !hasExact {
		return nil
	}
	buf := ix.pool.Get().(*scoreBuf)
	sc, matched := buf.score, buf.words
	touched := buf.touched[:0]
	for j, id := range ids {
		w := ws[j] * ix.idf[id] * (bm25K1 + 1)
		bit := uint64(1) << src[j]
		intent := src[j] == intentWord // scored after every word's terms
		for _, p := range ix.post[ix.offs[id]:ix.offs[id+1]] {
			if f != nil && !f.Has(int(p.doc)) {
				continue
			}
			if intent && sc[p.doc] == 0 {
				continue // orders the tools the words found, adds none
			}
			if sc[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			sc[p.doc] += w * p.tf / (p.tf + ix.norm[p.doc])
			matched[p.doc] |= bit
		}
	}
	// Coordination: a document answering more of the query's words ranks
	// above one that answers a single word strongly (a paraphrase shares
	// few words with its tool, and each of them counts).
	if slices.Contains(src, intentWord) {
		words++ // the action asked for is one more thing a tool answers
	}
	if words > 1 {
		for _, d := range touched {
			n := float32(bits.OnesCount64(matched[d]))
			sc[d] *= coord(min(n, float32(words)) / float32(words))
		}
	}
	top := make([]Hit, 0, min(k, len(touched)+1))
	if hasExact {
		top = append(top, Hit{Name: ix.names[exact], Score: math.Inf(1), doc: exact})
	}
	for _, d := range touched {
		if hasExact && d == exact {
			continue
		}
		top = ix.offer(top, k, Hit{Name: ix.names[d], Score: float64(sc[d]), doc: d})
	}
	for _, d := range touched {
		sc[d], matched[d] = 0, 0
	}
	buf.touched = touched
	ix.pool.Put(buf)
	return top
}

// offer inserts h into top (sorted best first, at most k long) when it
// belongs there.
func (ix *Index) offer(top []Hit, k int, h Hit) []Hit {
	pos := len(top)
	for pos > 0 && better(h, top[pos-1]) {
		pos--
	}
	if pos >= k {
		return top
	}
	if len(top) < k {
		top = append(top, Hit{})
	}
	copy(top[pos+1:], top[pos:len(top)-1])
	top[pos] = h
	return top
}

// better orders hits: higher score first, then name.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Name < b.Name
}

// Regex returns the best k documents admitted by f whose name,
// description or parameter text matches the regular expression (RE2
// syntax, case-insensitive). A match in the name ranks above one in the
// description, which ranks above one in the parameters only; ties are
// broken by name.
//
// The cost of a call is bounded before any matching: the pattern is at
// most MaxPatternLen bytes, compiles to at most MaxRegexInsts
// instructions, and its width times the bytes of the admitted tools'
// text is at most RegexBudget. A pattern over a bound is refused with an
// error wrapping ErrPattern that names the pattern, the bound and the
// fix; so is a pattern that is not valid RE2. The decision depends on
// the pattern and the index only, so it is deterministic.
func (ix *Index) Regex(pattern string, k int, f *Filter) ([]Hit, error) {
	if len(pattern) > MaxPatternLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d allowed; use a shorter pattern", ErrPattern, len(pattern), MaxPatternLen)
	}
	parsed, err := syntax.Parse("(?i)"+pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	parsed = parsed.Simplify()
	prog, err := syntax.Compile(parsed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	if n := len(prog.Inst); n > MaxRegexInsts {
		return nil, fmt.Errorf("%w: %q compiles to %d instructions, at most %d allowed; lower its repetition counts ({n,m}) or search for a literal word instead", ErrPattern, pattern, n, MaxRegexInsts)
	}
	width := regexWidth(parsed)
	var bytes int64
	for i := range ix.names {
		if f.Has(i) {
			bytes += int64(ix.textLen(i))
		}
	}
	if cost := int64(width) * bytes; cost > RegexBudget {
		return nil, fmt.Errorf("%w: %q costs %d units to match over %d bytes of tool text (width %d: its repeated sub-patterns, each .* or x+ inside a repetition), at most %d allowed; remove nested or repeated .*, or use a query", ErrPattern, pattern, cost, bytes, width, RegexBudget)
	}
	re, err := regexp.Compile("(?i)" + pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	if k <= 0 {
		return nil, nil
	}
	var top []Hit
	for i := range ix.names {
		if !f.Has(i) {
			continue
		}
		score := 0.0
		switch {
		case re.MatchString(ix.names[i]):
			score = 3
		case re.MatchString(ix.descs[i]):
			score = 2
		case ix.docs[i].ptext != "" && re.MatchString(ix.docs[i].ptext):
			score = 1
		}
		if score > 0 {
			top = ix.offer(top, k, Hit{Name: ix.names[i], Score: score, doc: int32(i)})
		}
	}
	return top, nil
}

// regexWidth estimates how many matching threads a pattern keeps alive
// per byte of text: 1 plus, for every unbounded repetition (x*, x+), the
// characters its body consumes. "create.*issue" is 2; "(?:.*){1,10}z",
// once simplified into ten nested .*, is 11; matching time grows with it.
func regexWidth(re *syntax.Regexp) int {
	w := 1
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if r.Op == syntax.OpStar || r.Op == syntax.OpPlus || (r.Op == syntax.OpRepeat && r.Max < 0) {
			w += consumers(r)
		}
		for _, s := range r.Sub {
			walk(s)
		}
	}
	walk(re)
	return w
}

// consumers counts the character-consuming leaves under r.
func consumers(r *syntax.Regexp) int {
	switch r.Op {
	case syntax.OpLiteral:
		return len(r.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	}
	n := 0
	for _, s := range r.Sub {
		n += consumers(s)
	}
	return n
}

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
		var dot float64
		for j, x := range v {
			dot += float64(x) * float64(q[j])
		}
		top = ix.offer(top, k, Hit{Name: ix.names[i], Score: dot, doc: int32(i)})
	}
	return top
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
	sem := ix.Semantic(vec, max(k, fuseDepth), f)
	if len(sem) == 0 {
		return ix.Keyword(query, k, f)
	}
	kw := ix.Keyword(query, max(k, fuseDepth), f)
	score := make(map[int32]float64, len(kw)+len(sem))
	exact := int32(-1)
	for r, h := range kw {
		if math.IsInf(h.Score, 1) {
			exact = h.doc
		}
		score[h.doc] += 1 / float64(rrfK+r+1)
	}
	for r, h := range sem {
		score[h.doc] += 1 / float64(rrfK+r+1)
	}
	var top []Hit
	for d, sc := range score {
		if d == exact {
			sc = math.Inf(1)
		}
		top = ix.offer(top, k, Hit{Name: ix.names[d], Score: sc, doc: d})
	}
	return top
}
