package searcheval

import (
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/toolintent/engine/toolsearch"
)

// Baseline is plain BM25 (k1 1.2, b 0.75) over each tool's name,
// description and parameter names and descriptions, one bag of words
// with no field weights: the yardstick. Words are split at
// non-letters and camelCase and lower-cased, with no stemming, stop
// words or synonyms; each CJK character is a word of its own (as a
// standard analyzer has it).
type Baseline struct {
	names []string
	post  map[string][]basePosting
	norm  []float64
	n     int
}

type basePosting struct {
	doc int
	tf  float64
}

// NewBaseline indexes docs.
func NewBaseline(docs []toolsearch.Doc) *Baseline {
	b := &Baseline{post: map[string][]basePosting{}, n: len(docs)}
	lens := make([]float64, len(docs))
	total := 0.0
	for i, d := range docs {
		b.names = append(b.names, d.Name)
		pn, pt := toolsearch.SchemaText(d.Parameters)
		text := d.Name + " " + d.Description + " " + strings.Join(pn, " ") + " " + strings.Join(pt, " ")
		tf := map[string]float64{}
		for _, w := range baseWords(text) {
			tf[w]++
			lens[i]++
		}
		total += lens[i]
		keys := make([]string, 0, len(tf))
		for w := range tf {
			keys = append(keys, w)
		}
		slices.Sort(keys)
		for _, w := range keys {
			b.post[w] = append(b.post[w], basePosting{doc: i, tf: tf[w]})
		}
	}
	avg := max(total/float64(max(len(docs), 1)), 1)
	for _, l := range lens {
		b.norm = append(b.norm, 1.2*(1-0.75+0.75*l/avg))
	}
	return b
}

// Search returns the names of the best k documents, best first, ties
// broken by name.
func (b *Baseline) Search(query string, k int) []string {
	score := map[int]float64{}
	seen := map[string]bool{}
	for _, w := range baseWords(query) {
		if seen[w] {
			continue
		}
		seen[w] = true
		ps := b.post[w]
		idf := math.Log(1 + (float64(b.n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			score[p.doc] += idf * p.tf * 2.2 / (p.tf + b.norm[p.doc])
		}
	}
	docs := make([]int, 0, len(score))
	for d := range score {
		docs = append(docs, d)
	}
	slices.SortFunc(docs, func(x, y int) int {
		if score[x] != score[y] {
			if score[x] > score[y] {
				return -1
			}
			return 1
		}
		return strings.Compare(b.names[x], b.names[y])
	})
	out := make([]string, 0, min(k, len(docs)))
	for _, d := range docs[:min(k, len(docs))] {
		out = append(out, b.names[d])
	}
	return out
}

// baseWords splits s the plain way: runs of letters and digits, split at
// lower-to-upper case changes, lower-cased; CJK characters one by one.
func baseWords(s string) []string {
	var out []string
	var w []rune
	flush := func() {
		start := 0
		for i := 1; i <= len(w); i++ {
			if i == len(w) || (unicode.IsLower(w[i-1]) && unicode.IsUpper(w[i])) {
				out = append(out, strings.ToLower(string(w[start:i])))
				start = i
			}
		}
		w = w[:0]
	}
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r):
			flush()
			out = append(out, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			w = append(w, r)
		default:
			flush()
		}
	}
	flush()
	return out
}
