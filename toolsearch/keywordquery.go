package toolsearch

import (
	"math"
	"slices"
	"strings"
)

// noCap is the idf cap of a term that counts its full idf.
var noCap = float32(math.Inf(1))

// queryTerms are the scored terms of one keyword query: the query's own
// words and the terms its expansions bring in, in the order they were
// added (at most maxQueryTerms; later ones are ignored). Its arrays keep
// a search from allocating them.
type queryTerms struct {
	ix    *Index
	query string
	nq    string   // the query in NFKC, for the Chinese lexicons
	terms []string // the query's words, analysed
	spans []span   // the query's words (not CJK) as written, with their terms
	// Each scored term remembers the query word it stands for (src), so
	// that a document is credited with the distinct words it answers, and
	// the idf it may count at most (caps).
	ids  []int32
	ws   []float32
	src  []uint64
	caps []float32

	idsArr  [maxQueryTerms]int32
	wArr    [maxQueryTerms]float32
	srcArr  [maxQueryTerms]uint64
	capArr  [maxQueryTerms]float32
	termArr [maxQueryTerms]string
	spanArr [16]span
}

// init analyses the query into q's words.
func (q *queryTerms) init(ix *Index, query string) {
	q.ix, q.query = ix, query
	q.ids, q.ws, q.src, q.caps = q.idsArr[:0], q.wArr[:0], q.srcArr[:0], q.capArr[:0]
	q.spans = q.spanArr[:0]
	an := analyzer{dst: q.termArr[:0], spans: &q.spans}
	an.run(query)
	q.terms = an.dst
	q.nq = nfkc(query) // no copy for ASCII
}

// addID scores term id with weight w for the query words mask, counting
// at most capIDF of its idf. A term added again keeps the heavier of its
// weights, except that a word's term stays one when an intent verb names
// it too.
func (q *queryTerms) addID(id int32, w float32, mask uint64, capIDF float32) {
	if len(q.ids) == maxQueryTerms {
		return
	}
	for i, x := range q.ids {
		if x == id {
			if mask == intentBit && q.src[i] != intentBit {
				return // a word's term stays one: its cap holds
			}
			if idf := q.ix.idf[id]; w*min(idf, capIDF) > q.ws[i]*min(idf, q.caps[i]) {
				q.ws[i], q.caps[i] = w, capIDF
			}
			return
		}
	}
	q.ids, q.ws, q.src, q.caps = append(q.ids, id), append(q.ws, w), append(q.src, mask), append(q.caps, capIDF)
}

// addTerm is addID for term t, when the index holds it.
func (q *queryTerms) addTerm(t string, w float32, mask uint64, capIDF float32) {
	if id, ok := q.ix.dict[t]; ok {
		q.addID(id, w, mask, capIDF)
	}
}

// capOf is the idf cap of the words query word t brings in: its own idf
// (expandCap), so that a rare synonym does not outweigh the word asked
// for.
func (q *queryTerms) capOf(t string) float32 {
	if id, ok := q.ix.dict[t]; ok && expandCap {
		return q.ix.idf[id]
	}
	return noCap
}

// own adds the query's words (a three-letter plural the index lacks
// brings its singular) and returns how many distinct words it has that
// are not CJK unigrams.
func (q *queryTerms) own() (words int) {
	for i, t := range q.terms {
		if isUnigram(t) {
			q.addTerm(t, weightUnigram, wordBit(i), noCap)
			continue
		}
		q.addTerm(t, 1, wordBit(i), noCap)
		if sg := shortSingular(t); sg != "" {
			if _, known := q.ix.dict[t]; !known {
				q.addTerm(sg, 1, wordBit(i), noCap)
			}
		}
		if !slices.Contains(q.terms[:i], t) {
			words++
		}
	}
	return words
}

// lexicons adds the other members of each word's derivational family,
// then the concept and general lexicons' words for the word and for its
// family.
func (q *queryTerms) lexicons() {
	for i, t := range q.terms {
		if isUnigram(t) {
			continue
		}
		c := q.capOf(t)
		key := familyKey(t)
		for _, id := range q.ix.family[key] {
			q.addID(id, weightFamily, wordBit(i), c)
		}
		q.lexiconWords(t, wordBit(i), c)
		for _, k := range lexiconFamily[key] {
			if k == t {
				continue
			}
			q.addTerm(k, weightFamily, wordBit(i), c)
			q.lexiconWords(k, wordBit(i), c)
		}
	}
}

// lexiconWords adds the concept and general lexicons' words for t.
func (q *queryTerms) lexiconWords(t string, mask uint64, c float32) {
	for _, x := range conceptLexicon[t] {
		q.addTerm(x, weightConcept, mask, c)
	}
	for _, x := range generalLexicon[t] {
		q.addTerm(x, weightGeneral, mask, c)
	}
}

// chinese adds the Chinese–English lexicon's English words of the
// Chinese words the query holds and its Chinese words of the English
// ones, then CC-CEDICT's English words for each Chinese word.
func (q *queryTerms) chinese() {
	if weightZh > 0 {
		if hasCJK(q.nq) {
			for _, zh := range zhWords {
				if !strings.Contains(q.nq, zh) {
					continue
				}
				first := Terms(zh)[0]
				at := slices.Index(q.terms, first)
				if at < 0 {
					continue
				}
				for _, e := range zhToEn[zh] {
					q.addTerm(e, weightZh, wordBit(at), q.capOf(first))
				}
			}
		}
		for i, t := range q.terms {
			for _, z := range enToZh[t] {
				q.addTerm(z, weightZh, wordBit(i), q.capOf(t))
			}
		}
	}
	if weightCedict > 0 && hasCJK(q.query) {
		cjkRuns(q.nq, func(run []rune) {
			cedictWords(run, func(at int, word, line string) {
				first := word
				if len(run) > 1 {
					if at+2 > len(run) {
						at = len(run) - 2
					}
					first = string(run[at : at+2])
				}
				k := slices.Index(q.terms, first)
				if k < 0 {
					return
				}
				for e := range strings.FieldsSeq(line) {
					q.addTerm(e, weightCedict, wordBit(k), q.capOf(first))
				}
			})
		})
	}
}

// phrases adds the joined form of two neighbouring query words written
// apart that the tools write as one ("postgre sql", "time off", "config
// map"), then the relations of WordNet's verbs of two or three words
// ("get rid of", "call off", "look up") that neighbouring query words
// spell, credited to those words.
func (q *queryTerms) phrases() {
	if weightJoined > 0 {
		for k := 0; k+1 < len(q.spans); k++ {
			a, b := q.spans[k], q.spans[k+1]
			if a.start == a.end || b.start == b.end {
				continue // a stop word
			}
			if t := joinedTerm(a.word, b.word); t != "" && !slices.Contains(q.terms, t) {
				q.addTerm(t, weightJoined, wordBits(a.start, b.end), noCap)
			}
		}
	}
	if wordnetOn && collocScale > 0 {
		for k := range q.spans {
			for n := 3; n >= 2; n-- {
				if k+n > len(q.spans) {
					continue
				}
				key := "_"
				var mask uint64
				for _, sp := range q.spans[k : k+n] {
					key += sp.word
					mask |= wordBits(sp.start, sp.end)
				}
				if mask == 0 {
					continue
				}
				for r, w := range wordnetRelated(key) {
					q.addTerm(r, w*collocScale, mask, noCap)
				}
			}
		}
	}
}

// wordBits is the query-word bits of the terms start to end (exclusive).
func wordBits(start, end int) uint64 {
	var mask uint64
	for j := start; j < end; j++ {
		mask |= wordBit(j)
	}
	return mask
}

// unreached adds, for the words nothing else reaches, WordNet's relations
// (below every hand-written lexicon) and, for a word still unmatched, the
// index's words it begins (a prefix: "kube" → kubectl).
func (q *queryTerms) unreached() {
	ix := q.ix
	for i, t := range q.terms {
		if wordnetOn && ix.rev != nil && !isUnigram(t) && (revAll || ix.wordnetReaches(t)) {
			q.reverse(t, wordBit(i))
		}
		if !ix.wordnetReaches(t) {
			continue
		}
		if wordnetOn {
			for r, w := range wordnetRelated(t) {
				q.addTerm(r, w*wordnetScale, wordBit(i), noCap)
			}
		}
		if weightPrefix > 0 {
			ix.prefixed(t, func(id int32) { q.addID(id, weightPrefix, wordBit(i), noCap) })
		}
	}
}

// reverse adds the index words whose WordNet lines name query word t
// (and, with weightSib, those naming its relations).
func (q *queryTerms) reverse(t string, mask uint64) {
	if ids := q.ix.rev[t]; len(ids) <= maxRev {
		for _, id := range ids {
			q.addID(id, weightRev, mask, q.capOf(t))
		}
	}
	if weightSib > 0 {
		for r, w := range wordnetRelated(t) {
			if ids := q.ix.rev[r]; len(ids) <= maxRev {
				for _, id := range ids {
					q.addID(id, w*weightSib, mask, q.capOf(t))
				}
			}
		}
	}
}

// intents adds the verbs a request asks for: a question asks to read, so
// its tools are the ones that get, list or show; an action word asks for
// the tools whose verb does it. These verbs rank among the tools the
// query's words found (intentWord).
func (q *queryTerms) intents() {
	if asksToRead(q.query) {
		for _, t := range readVerbs {
			q.addTerm(t, weightIntent, intentBit, noCap)
		}
	}
	for _, t := range q.terms {
		for _, v := range actionVerbs[t] {
			q.addTerm(v, weightAction, intentBit, noCap)
		}
	}
}
