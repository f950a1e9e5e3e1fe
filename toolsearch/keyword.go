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
// 0.25-1) moved recall@5 by at most 0.03, and on the tuning sets
// (name 2-4, parameter text 0.5-1, concept 0.3-0.6, BM25 k1 0.9-1.5 and b
// 0.4-0.9) by at most 0.04, so they were kept; with the derivational
// families and the general lexicon, name 2-4 and parameter text 0.3-0.75
// moved tuning MRR by at most 0.007. After the query expansions (idf cap,
// WordNet's reverse map and definitions, the Chinese–English lexicon) a
// coordinate search on the tuning sets over name 2-5, parameter names
// 0.5-1.5, parameter text 0.25-1, group 0.25-1, concept 0.3-0.7, general
// 0.15-0.4, intent 0.2-0.6 and action 0.2-0.6 moved the mean of their
// recall@5 and MRR by at most 0.003 (name 3.5), so they were kept again.
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

// intentBit is intentWord's bit.
const intentBit = uint64(1) << intentWord

// wordBit is the bit of query word i (the last bits below intentWord are
// shared by the words past them).
func wordBit(i int) uint64 { return uint64(1) << min(i, intentWord-1) }

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

// countPostings, when set, is told how many postings each keyword query
// scores: the work of a query, which the ablation benchmark weighs
// against each expansion's recall (a time would measure the machine's
// load as much).
var countPostings func(n int)

// shortSingular is the singular of a plural of three letters, which the
// stemmer leaves alone ("ads" → ad, "vms" → vm, "ids" → id), or "". A
// query word the index lacks brings its singular in at full weight.
func shortSingular(t string) string {
	if len(t) != 3 || t[2] != 's' || t[1] == 's' || !asciiLetters(t) {
		return ""
	}
	return t[:2]
}

// coord is the factor of the coordination of a document that answers the
// share c of the query's words: its square root. The power 1 ranked the
// tuning sets a little better but spreads scores so that fewer right
// tools reach deferral.ConfidentShare of the best one (loaded recall@5
// 0.927 against 0.953 on the first corpus); 0 is no coordination.
func coord(c float32) float32 { return float32(math.Sqrt(float64(c))) }

// The query expansion's levers, measured per kind on the tuning sets
// (the first corpus and the mcp2 tuning queries) before and after.
var (
	// expandCap caps the idf of the words a query word brings in (its
	// family, lexicon groups, WordNet's reverse relations) at the query
	// word's own idf, so that a rare synonym does not outweigh the word
	// asked for (drop → delete, edit → update: the noisy synonyms).
	expandCap = true
	// weightJoined is the weight of the joined form of two neighbouring
	// query words ("postgre sql" → postgresql).
	weightJoined = float32(0.45)
	// weightPrefix is the weight of an index word that a query word the
	// index lacks, and nothing else reaches, begins (prefixed).
	weightPrefix = float32(0.3)
	// wordnetScale scales wordnetWeights.
	wordnetScale = float32(1)
	// wordnetRevOn builds an index's reverse WordNet map (wordnetReverse).
	wordnetRevOn = true
	// revAll applies the reverse map to every query word, not only to
	// the words nothing else reaches (off: it cost recall@5 on the
	// tuning sets, 0.908 → 0.887).
	revAll = false
	// weightRev is the weight of an index word whose WordNet line names
	// the query word.
	weightRev = float32(0.3)
	// weightSib scales WordNet's weight of a query word's relation for
	// the index words whose lines name that relation (siblings); 0 is
	// off (on, it cost recall@5 on the tuning sets).
	weightSib = float32(0)
	// maxRev skips a reverse entry naming more index words than this: a
	// concept that general says little.
	maxRev = 20
	// collocScale scales wordnetWeights for a collocation's relations: a
	// phrase names its sense more surely than a word alone (1-3 measured
	// alike on the tuning sets, 3 one query better).
	collocScale = float32(2)
	// glossRev puts the words of a term's WordNet definition in the
	// reverse map too.
	glossRev = true
)

const (
	// minPrefix is the shortest query word that prefixed expands.
	minPrefix = 4
	// maxPrefixTerms bounds the index words one query word's prefix
	// brings in.
	maxPrefixTerms = 8
)

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
	var q queryTerms
	q.init(ix, query)
	words := q.own() // distinct query words that are not CJK unigrams
	q.lexicons()
	q.chinese()
	q.phrases()
	q.unreached()
	q.intents()
	if countPostings != nil {
		n := 0
		for _, id := range q.ids {
			n += int(ix.offs[id+1] - ix.offs[id])
		}
		countPostings(n)
	}
	exact, hasExact := ix.byName[strings.TrimSpace(query)]
	if hasExact && !f.Has(int(exact)) {
		hasExact = false
	}
	if len(q.ids) == 0 && !hasExact {
		return nil
	}
	buf := ix.pool.Get().(*scoreBuf)
	if slices.Contains(q.src, intentBit) {
		words++ // the action asked for is one more thing a tool answers
	}
	ix.score(&q, f, words, buf)
	top := make([]Hit, 0, min(k, len(buf.touched)+1))
	if hasExact {
		top = append(top, Hit{Name: ix.names[exact], Score: math.Inf(1), doc: exact})
	}
	for _, d := range buf.touched {
		if hasExact && d == exact {
			continue
		}
		top = ix.offer(top, k, Hit{Name: ix.names[d], Score: float64(buf.score[d]), doc: d})
	}
	for _, d := range buf.touched {
		buf.score[d], buf.words[d] = 0, 0
	}
	ix.pool.Put(buf)
	return top
}

// score adds up, in buf, the BM25 scores of q's terms in the documents f
// admits and lists the documents it scores in buf.touched; then it scales
// each by its coordination with the query's words.
func (ix *Index) score(q *queryTerms, f *Filter, words int, buf *scoreBuf) {
	sc, matched := buf.score, buf.words
	touched := buf.touched[:0]
	for j, id := range q.ids {
		w := q.ws[j] * min(ix.idf[id], q.caps[j]) * (bm25K1 + 1)
		bit := q.src[j]
		intent := bit == intentBit // scored after every word's terms
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
	if words > 1 {
		for _, d := range touched {
			n := float32(bits.OnesCount64(matched[d]))
			sc[d] *= coord(min(n, float32(words)) / float32(words))
		}
	}
	buf.touched = touched
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

// joinedTerm is the term of two neighbouring query words written as one
// ("postgre" "sql" → postgresql), or "" when either is not letters and
// digits only or the joined word is a stop word.
func joinedTerm(a, b string) string {
	w := a + b
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return ""
		}
	}
	if len(w) > 64 || stopWords[w] {
		return ""
	}
	return stem(w)
}

// prefixed calls fn with the ids of up to maxPrefixTerms index terms that
// begin with t (at least minPrefix ASCII letters), in term order: a
// query word the index lacks finds the longer words it starts
// ("kube" → kubectl, "config" → configuration).
func (ix *Index) prefixed(t string, fn func(int32)) {
	if len(t) < minPrefix || !asciiLetters(t) {
		return
	}
	i, _ := slices.BinarySearchFunc(ix.sorted, t, func(id int32, t string) int { return strings.Compare(ix.terms[id], t) })
	for n := 0; i < len(ix.sorted) && n < maxPrefixTerms && strings.HasPrefix(ix.terms[ix.sorted[i]], t); i, n = i+1, n+1 {
		fn(ix.sorted[i])
	}
}

// hasCJK reports whether s holds a CJK character.
func hasCJK(s string) bool {
	for _, r := range s {
		if isCJK(r) {
			return true
		}
	}
	return false
}
