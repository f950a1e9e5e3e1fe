package toolsearch

import (
	"slices"
	"strings"
)

// Derivational families (paraphrase reach). The stemmer folds
// inflections only ("notifies", "notified" → notify); a request often
// names the same idea in another word class: "notification" for a
// notify_ tool, "translation" for translate, "subscription" for
// subscribe, "management" for a manager. root strips one derivational
// suffix from a stemmed term, so that the words of one family share a
// root; a query word brings in the index's other terms of its root at
// weightFamily, below its own form (and a concept lexicon entry of a
// family member counts for every member). The suffix list is the
// English derivational morphology of nouns, verbs and adjectives, not
// words from any query set.
//
// A root keeps at least minRoot letters, so short words are never
// conflated (user, order, serv-er and serv-ice stay apart); the price is
// the occasional pair of unrelated words with one long root
// (general/generate), which the lower weight keeps below literal matches.
const (
	weightFamily = float32(0.6)
	minRoot      = 5
)

// derivSuffixes are stripped longest first from stemmed terms (the
// stemmer has already dropped plural -s, -ing, -ed and a final -e, so
// "-ate" is "-at", "-ize" is "-iz"); "suffix:rest" replaces the suffix
// by rest ("compression" → "compress"). A bare -ion or -tion is not
// stripped: it joins unrelated words (production/product).
var derivSuffixes = func() []string {
	s := strings.Fields(`
ification ication ization isation ational ability ibility
ation ition ement iness
ment ness ance ence ancy ency ship ical ally
ific ator ible able ful ity ive ist ism ary ory ure ant ent
ify iz al er or ic at y ssion:ss`)
	// longest first, then by text, for a deterministic order
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && (len(s[j]) > len(s[j-1]) || len(s[j]) == len(s[j-1]) && s[j] < s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}()

// root returns the derivational root of a stemmed term, or "" when the
// term has no suffix to strip that leaves minRoot letters (or is not
// ASCII letters).
func root(t string) string {
	if len(t) <= minRoot || !asciiLetters(t) {
		return ""
	}
	for _, s := range derivSuffixes {
		s, rest, _ := strings.Cut(s, ":")
		if len(t)-len(s)+len(rest) >= minRoot && strings.HasSuffix(t, s) {
			return t[:len(t)-len(s)] + rest
		}
	}
	return ""
}

// familyKey is the key under which term t's family is found: its root,
// or the term itself when it is a root of its own ("notif" of notify is
// a root; "manag" is, and "manage" stems to it).
func familyKey(t string) string {
	if r := root(t); r != "" {
		return r
	}
	return t
}

// families groups the terms of a dictionary by familyKey, keeping the
// families of two or more terms, their ids in ascending order.
func families(dict map[string]int32) map[string][]int32 {
	all := make(map[string][]int32, len(dict)/4)
	for t, id := range dict {
		if len(t) < minRoot || !asciiLetters(t) {
			continue
		}
		k := familyKey(t)
		all[k] = append(all[k], id)
	}
	for k, ids := range all {
		if len(ids) < 2 {
			delete(all, k)
			continue
		}
		slices.Sort(ids)
	}
	return all
}

// lexiconFamily maps a family key to the concept lexicon's words of that
// family, so that "notifications" finds the lexicon's groups of
// "notification" and "notify" alike.
var lexiconFamily = func() map[string][]string {
	m := map[string][]string{}
	for _, lex := range []map[string][]string{conceptLexicon, generalLexicon} {
		for w := range lex {
			k := familyKey(w)
			if !slices.Contains(m[k], w) {
				m[k] = append(m[k], w)
			}
		}
	}
	for _, ws := range m {
		slices.Sort(ws)
	}
	return m
}()
