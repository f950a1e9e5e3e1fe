package toolsearch

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Terms returns the search terms of s, in order, duplicates kept: the
// analysis applied alike to indexed text and to queries.
//
//   - Text is put in Unicode normalisation form NFKC first, so that
//     compatibility forms meet their plain ones: full-width Latin
//     ("ｇｉｔｈｕｂ" is "github"), the ideographic space, ligatures ("ﬁle"
//     is "file"), circled and super-script digits, half-width katakana,
//     and decomposed accents ("e" + U+0301 is "é").
//   - Words are split at every character that is not a letter or a digit
//     (so at '_', '-', '.', '/', spaces and punctuation), at camelCase
//     boundaries ("createIssue" → create, issue; "HTTPServer" → http,
//     server) and between letters and digits ("ec2" → ec, 2). A word so
//     split is also kept whole ("ec2", "javascript", "postgresql",
//     "configmap"), so a query for the whole word matches it directly.
//   - Letters are lower-cased; Chinese, Japanese and Korean text, which has
//     no spaces, becomes overlapping character bigrams followed by its
//     single characters, so a one-character query matches too.
//   - A short list of English stop words is dropped, and a light suffix
//     stemmer (Porter's first step and final -e rule) folds plurals and
//     -ing/-ed forms ("issues", "creating", "created" → issu, creat,
//     creat) without cutting short words into others ("tube" stays
//     "tube", "phone" stays "phone").
//
// Terms is pure and deterministic.
func Terms(s string) []string {
	return appendTerms(nil, s)
}

// appendTerms appends the terms of s to dst.
func appendTerms(dst []string, s string) []string {
	var a analyzer
	a.dst = dst
	a.run(s)
	return a.dst
}

type analyzer struct {
	dst  []string
	word []rune // the current run of letters and digits (not CJK)
	cjk  []rune // the current run of CJK characters
	// cache, when set, maps a lower-cased word to its term ("" for a stop
	// word), so that an index build analyses and allocates each distinct
	// word once.
	cache map[string]string
	// spans, when not nil, records each word (not CJK) that run splits:
	// its lower-cased text and the range of dst its terms took, so that a
	// query can join neighbouring words (Index.addJoined).
	spans *[]span
}

// span is one word of analysed text: its lower-cased letters and digits
// and the terms it gave, dst[start:end].
type span struct {
	word       string
	start, end int
}

func (a *analyzer) run(s string) {
	s = nfkc(s)
	for _, r := range s {
		switch {
		case isCJK(r):
			a.flushWord()
			a.cjk = append(a.cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			a.flushCJK()
			a.word = append(a.word, r)
		default:
			a.flushWord()
			a.flushCJK()
		}
	}
	a.flushWord()
	a.flushCJK()
}

// flushCJK emits the CJK run as overlapping bigrams followed by its
// characters one by one (unigrams), so that a one-character query
// matches and a two-character query matches its bigram first.
func (a *analyzer) flushCJK() {
	if len(a.cjk) == 0 {
		return
	}
	for i := 0; i+1 < len(a.cjk); i++ {
		a.dst = append(a.dst, string(a.cjk[i:i+2]))
	}
	for i := range a.cjk {
		a.dst = append(a.dst, string(a.cjk[i:i+1]))
	}
	a.cjk = a.cjk[:0]
}

// isUnigram reports whether term t is a single CJK character (weighted
// below the bigrams of the same text).
func isUnigram(t string) bool {
	r, n := utf8.DecodeRuneInString(t)
	return n == len(t) && n > 1 && isCJK(r)
}

// nfkc returns s in Unicode normalisation form NFKC (compatibility
// decomposition, then canonical composition). ASCII text, and text the
// quick check (QuickSpanString) finds already in that form, is returned
// as it is without allocating, so an index build pays only for the rare
// tool text that needs it.
func nfkc(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			if norm.NFKC.QuickSpanString(s) == len(s) {
				return s
			}
			return norm.NFKC.String(s)
		}
	}
	return s
}

// flushWord splits the word at case and letter/digit boundaries and emits
// its parts.
func (a *analyzer) flushWord() {
	w := a.word
	if len(w) == 0 {
		return
	}
	a.word = a.word[:0]
	if a.spans != nil {
		start := len(a.dst)
		defer func() {
			*a.spans = append(*a.spans, span{word: strings.ToLower(string(w)), start: start, end: len(a.dst)})
		}()
	}
	// cuts holds the starts of the parts, then len(w).
	var cutsArr [16]int
	cuts := cutsArr[:0]
	cuts = append(cuts, 0)
	for i := 1; i < len(w); i++ {
		if boundary(w, i) {
			cuts = append(cuts, i)
		}
	}
	cuts = append(cuts, len(w))
	parts := len(cuts) - 1
	for j := 0; j < parts; j++ {
		a.emit(w[cuts[j]:cuts[j+1]])
	}
	if parts > 1 {
		a.emit(w) // the joined form: "JavaScript" is also "javascript"
	}
	if parts > 2 {
		// and each pair of neighbouring parts: "getConfigMap" is also
		// "configmap", "getTimeOffBalance" also "timeoff".
		for j := 0; j+2 <= parts; j++ {
			a.emit(w[cuts[j]:cuts[j+2]])
		}
	}
}

// boundary reports whether a new part starts at w[i] (0 < i < len(w)).
func boundary(w []rune, i int) bool {
	prev, cur := w[i-1], w[i]
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(cur):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(cur):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(w) && unicode.IsLower(w[i+1]):
		return true // "HTTPServer": the S starts "Server"
	}
	return false
}

// emit lower-cases, filters and stems one part.
func (a *analyzer) emit(part []rune) {
	var buf [64]byte
	b := buf[:0]
	for _, r := range part {
		b = utf8.AppendRune(b, unicode.ToLower(r))
	}
	if len(b) > 64 {
		b = b[:64] // a run-away token; its prefix is as good as any
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	if a.cache != nil {
		if t, ok := a.cache[string(b)]; ok {
			if t != "" {
				a.dst = append(a.dst, t)
			}
			return
		}
	}
	t := string(b)
	term := ""
	if !stopWords[t] {
		term = stem(t)
	}
	if a.cache != nil {
		a.cache[t] = term
	}
	if term != "" {
		a.dst = append(a.dst, term)
	}
}

// isCJK reports whether r is a Han, Hiragana, Katakana or Hangul character.
func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// stopWords are dropped from text and queries: words that carry no
// meaning about what a tool does.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"for": true, "from": true, "in": true, "into": true, "is": true, "it": true, "its": true, "of": true,
	"on": true, "or": true, "that": true, "the": true, "this": true, "to": true, "with": true,
	"i": true, "me": true, "my": true, "you": true, "your": true, "we": true, "our": true,
	"can": true, "do": true, "does": true, "how": true, "what": true, "which": true, "will": true,
	"want": true, "need": true, "please": true, "some": true, "there": true, "their": true,
	"if": true, "when": true, "than": true, "then": true, "so": true, "was": true, "were": true,
	"has": true, "have": true, "had": true, "been": true, "not": true, "no": true, "but": true,
	// Words of a request's phrasing, not of what it asks for, and the
	// tails of contractions ("I'm", "what's", "don't", "we'll").
	"let": true, "just": true, "like": true, "would": true, "could": true, "should": true,
	"about": true, "any": true, "also": true, "very": true, "really": true, "via": true,
	"m": true, "s": true, "t": true, "d": true, "ll": true, "re": true, "ve": true, "don": true,
}

// stem folds common English inflections with a few conservative suffix
// rules, applied alike to documents and queries so that "issues",
// "creating" and "created" meet "issue" and "create": an S-stemmer, then
// Porter's step 1b (-ing and -ed, restoring the e of "making" → "make"
// and undoubling "running" → "run") and his final -e rule (drop a final e
// unless the word is short and ends consonant-vowel-consonant, so "tube",
// "phone" and "file" keep it). Words of up to three letters and words with
// digits or non-ASCII letters are left alone.
func stem(w string) string {
	if len(w) <= 3 || !asciiLetters(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4 && !strings.HasSuffix(w, "eies") && !strings.HasSuffix(w, "aies"):
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "es") && !strings.HasSuffix(w, "aes") && !strings.HasSuffix(w, "ees") && !strings.HasSuffix(w, "oes"):
		w = w[:len(w)-1] // "files" → "file", then the -e rule below
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	cut := ""
	switch {
	case strings.HasSuffix(w, "ing") && len(w)-3 >= 3 && hasVowel(w[:len(w)-3]):
		cut = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w)-2 >= 3 && hasVowel(w[:len(w)-2]) && !strings.HasSuffix(w, "eed"):
		cut = w[:len(w)-2]
	}
	if cut != "" {
		switch {
		case strings.HasSuffix(cut, "at"), strings.HasSuffix(cut, "bl"), strings.HasSuffix(cut, "iz"):
			w = cut + "e" // "creating" → "create"
		case undouble(cut) != cut:
			w = undouble(cut) // "running" → "run"
		case measure(cut) == 1 && cvc(cut):
			w = cut + "e" // "making" → "make"
		default:
			w = cut
		}
	}
	switch {
	case strings.HasSuffix(w, "ee") && len(w)-2 >= 5:
		w = w[:len(w)-2] // "assignee" → "assign", "employee" → "employ"
	case len(w) > 3 && strings.HasSuffix(w, "e") && !strings.HasSuffix(w, "ee"):
		if b := w[:len(w)-1]; measure(b) > 1 || (measure(b) == 1 && !cvc(b)) {
			w = b
		}
	}
	return w
}

// consonant reports whether w[i] is a consonant in Porter's sense (y is
// one at the start or after a vowel).
func consonant(w string, i int) bool {
	switch w[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !consonant(w, i-1)
	}
	return true
}

// measure is Porter's m: the number of vowel-consonant sequences of w.
func measure(w string) int {
	m, vowel := 0, false
	for i := range len(w) {
		if consonant(w, i) {
			if vowel {
				m++
			}
			vowel = false
		} else {
			vowel = true
		}
	}
	return m
}

// cvc reports whether w ends consonant-vowel-consonant, the last not w, x
// or y ("hop", "fil", "tub").
func cvc(w string) bool {
	n := len(w)
	return n >= 3 && consonant(w, n-3) && !consonant(w, n-2) && consonant(w, n-1) && !strings.ContainsRune("wxy", rune(w[n-1]))
}

// undouble drops one of a doubled final consonant ("running" → "run"),
// except for l, s and z ("calling" stays "call").
func undouble(w string) string {
	n := len(w)
	if n >= 2 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouylsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

func hasVowel(w string) bool { return strings.ContainsAny(w, "aeiouy") }

func asciiLetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}
