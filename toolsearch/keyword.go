package toolsearch

import (
	"math"
	"math/bits"
	"slices"
	"strings"
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
// 0.4-0.9) by at most 0.04, so they were kept; with the derivational
// families and the general lexicon, name 2-4 and parameter text 0.3-0.75
// moved tuning MRR by at most 0.007.
const (
	weightName        = 3.0
	weightDescription = 1.0
	weightParamName   = 1.0
	weightParamText   = 0.5
	weightContext     = 0.5
	// weightConcept is the weight of a word the concept lexicon brings in
	// for a query word (conceptGroups).
	weightConcept = float32(0.5)
	// weightGeneral is the weight of a word the general lexicon
	// (generalGroups) brings in.
	weightGeneral = float32(0.25)
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

// maxQueryTerms bounds the distinct terms of a keyword query that are
// scored, its own and those the concept lexicon brings in; later ones
// are ignored.
const maxQueryTerms = 64

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
	addID := func(id int32, w float32, word int) {
		if len(ids) == maxQueryTerms {
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
	addTerm := func(t string, w float32, word int) {
		if id, ok := ix.dict[t]; ok {
			addID(id, w, word)
		}
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
	// The other members of each word's derivational family, then the
	// concept lexicon's words for the word and for its family.
	for i, t := range terms {
		if isUnigram(t) {
			continue
		}
		key := familyKey(t)
		for _, id := range ix.family[key] {
			addID(id, weightFamily, i)
		}
		for _, c := range conceptLexicon[t] {
			addTerm(c, weightConcept, i)
		}
		for _, c := range generalLexicon[t] {
			addTerm(c, weightGeneral, i)
		}
		for _, k := range lexiconFamily[key] {
			if k == t {
				continue
			}
			addTerm(k, weightFamily, i)
			for _, c := range conceptLexicon[k] {
				addTerm(c, weightConcept, i)
			}
			for _, c := range generalLexicon[k] {
				addTerm(c, weightGeneral, i)
			}
		}
	}
	// WordNet's relations of the words nothing else reaches, below every
	// hand-written lexicon.
	if wordnetOn {
		for i, t := range terms {
			if ix.wordnetReaches(t) {
				for r, w := range wordnetRelated(t) {
					addTerm(r, w, i)
				}
			}
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
