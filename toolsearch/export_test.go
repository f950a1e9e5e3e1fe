package toolsearch

// Expansions name the expansions of a keyword query, each with a switch
// that turns it off and returns the function that turns it back on, for
// the ablation benchmark (BenchmarkExpansionCost): what each one gains in
// recall against what it costs in latency. An expansion built into an
// index (the WordNet reverse map, the derivational families) takes
// effect on the indexes built while it is off; Unfamily drops an index's
// families.
var Expansions = []struct {
	Name string
	Off  func() (on func())
}{
	{"concept lexicon", func() func() {
		old := conceptLexicon
		conceptLexicon = map[string][]string{}
		return func() { conceptLexicon = old }
	}},
	{"general lexicon", func() func() {
		old := generalLexicon
		generalLexicon = map[string][]string{}
		return func() { generalLexicon = old }
	}},
	{"derivational families", func() func() {
		old := lexiconFamily
		lexiconFamily, unfamily = map[string][]string{}, true
		return func() { lexiconFamily, unfamily = old, false }
	}},
	{"WordNet relations", func() func() {
		wordnetOn = false
		return func() { wordnetOn = true }
	}},
	{"WordNet reverse map", func() func() {
		wordnetRevOn = false
		return func() { wordnetRevOn = true }
	}},
	{"WordNet collocations", func() func() {
		old := collocScale
		collocScale = 0
		return func() { collocScale = old }
	}},
	{"CC-CEDICT", func() func() {
		old := weightCedict
		weightCedict = 0
		return func() { weightCedict = old }
	}},
	{"Chinese-English lexicon", func() func() {
		old := weightZh
		weightZh = 0
		return func() { weightZh = old }
	}},
	{"joined words", func() func() {
		old := weightJoined
		weightJoined = 0
		return func() { weightJoined = old }
	}},
	{"prefixes", func() func() {
		old := weightPrefix
		weightPrefix = 0
		return func() { weightPrefix = old }
	}},
	{"intent and action verbs", func() func() {
		oldR, oldA := readVerbs, actionVerbs
		readVerbs, actionVerbs = nil, map[string][]string{}
		return func() { readVerbs, actionVerbs = oldR, oldA }
	}},
}

// unfamily makes Build leave families out (Expansions).
var unfamily bool

// BuildForAblation is Build that honours the Expansions switched off.
func BuildForAblation(docs []Doc) *Index {
	ix := Build(docs, nil)
	if unfamily {
		ix.family = nil
	}
	return ix
}

// CountPostings has each keyword query add the postings it scores to *n
// (nil: stop counting).
func CountPostings(n *int) {
	if n == nil {
		countPostings = nil
		return
	}
	countPostings = func(k int) { *n += k }
}
