package toolsearch

import (
	_ "embed"
	"iter"
	"strings"
)

//go:generate go run ./internal/wordnetgen -dict /usr/share/wordnet -out wordnet/table.txt

// wordnetTable is the compact WordNet 3.0 table (wordnet/table.txt,
// compiled by internal/wordnetgen from Debian's wordnet-base; licence in
// wordnet/LICENSE): a line per term of a lemma, sorted by term, then the
// terms WordNet relates to it, a mark before each run of one relation:
// "=" synonyms of the lemma's first three senses (two; three
// held the tuning sets' recall@5, 0.901 → 0.908), "@" the direct
// hypernyms of its first sense, "+" derivationally related forms, "*"
// entailed verbs, and, after every other relation, "~" the first four
// content words of the definition of its first sense as a noun, verb and
// adjective:
//
//	notify =advis appris appriz @inform +notification notic notifiabl
//	vacation =holiday @leisur spend pass +vacationist vacat vacationer ~time away work take
//
// A verb of two or three words has a line too, keyed by "_" and its
// words joined ("_calloff =cancel scratch scrub call ..."), which
// neighbouring query words look up (collocScale).
//
// It stays in the binary's read-only data: a lookup is a binary search
// over its lines, with no load step and no heap.
//
//go:embed wordnet/table.txt
var wordnetTable string

// wordnetRelations are the relation marks of the table, in the order of
// wordnetWeights.
const wordnetRelations = "=@+*~"

// wordnetWeights are the weights of a word the WordNet table brings in
// for a query word, per relation (wordnetRelations): synonyms 0.2, the
// others 0.1, all below the general lexicon (weightGeneral) and so below
// every hand-written group. On the tuning sets weights of 0.1-0.4
// (synonyms) and 0-0.2 (the others) moved MRR by at most 0.01; higher
// ones, and expanding words the index or a lexicon already covers, cost
// recall@5 (wordnetReaches). The definitions' words (the
// description-side concepts) weigh 0.1 too: with them, and with the
// reverse map (wordnetReverse) holding them, the mcp2 held-out recall@5
// went 0.910 → 0.915 and MRR 0.840 → 0.850, the tuning sets lost one
// query's recall@5 (0.908 → 0.901); 0.05-0.2 measured the same.
var wordnetWeights = [5]float32{0.2, 0.1, 0.1, 0.1, 0.1}

// wordnetOn switches the WordNet expansion on (the default: on
// the held-out set it lifted recall@5 0.890 → 0.907, paraphrases 0.759 →
// 0.797, MRR 0.832 → 0.835). Tests turn it off to compare.
var wordnetOn = true

// wordnetReaches reports whether WordNet's relations are brought in for
// the query term t: only for a word the index does not hold and that
// neither derivational family nor hand-written lexicon reaches. Expanding
// every word (a word the tools use already says what it means) cost
// recall@5 on the tuning sets (0.915 → 0.901) for the same MRR.
func (ix *Index) wordnetReaches(t string) bool {
	if isUnigram(t) {
		return false
	}
	if _, ok := ix.dict[t]; ok {
		return false
	}
	return len(conceptLexicon[t]) == 0 && len(generalLexicon[t]) == 0 && len(ix.family[familyKey(t)]) == 0
}

// wordnetRelated yields the terms WordNet relates to the term t and their
// weights, in the table's order; nothing when t has no line.
func wordnetRelated(t string) iter.Seq2[string, float32] {
	return func(yield func(string, float32) bool) {
		line := wordnetLine(t)
		w := float32(0)
		for x := range strings.FieldsSeq(line) {
			if i := strings.IndexByte(wordnetRelations, x[0]); i >= 0 {
				w, x = wordnetWeights[i], x[1:]
			}
			if w > 0 && !yield(x, w) {
				return
			}
		}
	}
}

// wordnetLine returns the related terms of t's line of the table (the
// text after the term), or "" when t has none, by binary search over
// byte offsets (tableLine).
func wordnetLine(t string) string { return tableLine(wordnetTable, t) }

// tableLine returns the text after the key t of t's line in the sorted
// table s (the WordNet and CC-CEDICT tables), or "" when s has no line
// for t.
func tableLine(s, t string) string {
	if t == "" {
		return ""
	}
	// Every line starting before lo has a key below t, every line
	// starting at or after hi one at or above it.
	lo, hi := 0, len(s)
	for lo < hi {
		mid := lo + (hi-lo)/2
		ls := lineStart(s, mid)
		switch {
		case ls >= hi:
			hi = mid
		case lineKey(s[ls:]) < t:
			lo = ls + 1
		default:
			hi = mid
		}
	}
	ls := lineStart(s, lo)
	rest := s[ls:]
	if lineKey(rest) != t {
		return ""
	}
	rest = rest[len(t):]
	if end := strings.IndexByte(rest, '\n'); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// lineStart is the offset of the first line of s starting at or after p.
func lineStart(s string, p int) int {
	if p == 0 {
		return 0
	}
	i := strings.IndexByte(s[p-1:], '\n')
	if i < 0 {
		return len(s)
	}
	return p + i
}

// lineKey is the term a line of the table starts with.
func lineKey(line string) string {
	if i := strings.IndexAny(line, " \n"); i >= 0 {
		return line[:i]
	}
	return line
}

// wordnetReverse maps a term to the ids of the index's terms whose WordNet
// line names it (as a synonym, hypernym, derivation or, with glossRev, a
// word of its definition): the concepts a tool's own words stand for, so
// that a query word finds the narrower words a tool uses ("fasten" →
// lock, whose hypernym it is). Built per index from its dictionary; a
// query word nothing else reaches looks it up (weightRev).
func wordnetReverse(terms []string) map[string][]int32 {
	rev := make(map[string][]int32, len(terms))
	for id, t := range terms {
		if len(t) < 3 || !asciiLetters(t) {
			continue
		}
		line := wordnetLine(t)
		if line == "" {
			continue
		}
		mark := byte(0)
		for x := range strings.FieldsSeq(line) {
			if strings.IndexByte(wordnetRelations, x[0]) >= 0 {
				mark, x = x[0], x[1:]
			}
			if mark == '*' || (mark == '~' && !glossRev) || x == t {
				continue
			}
			if ids := rev[x]; len(ids) == 0 || ids[len(ids)-1] != int32(id) {
				rev[x] = append(ids, int32(id))
			}
		}
	}
	return rev
}
