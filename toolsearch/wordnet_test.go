package toolsearch

import (
	"slices"
	"strings"
	"testing"
)

// The WordNet lever: the embedded table is sorted by term, one line a
// term, and every line is found by the binary search; it holds WordNet's
// synonyms, derivations, an irregular form's lemma (mice, from noun.exc)
// and the words of a definition, all weighted below the general lexicon.
func TestWordNetTable(t *testing.T) {
	checkTable(t, "WordNet", wordnetTable, 10000)
	for _, absent := range []string{"", "0", "aaaa", "zzzzzzzz", "apprisez"} {
		if got := wordnetLine(absent); got != "" {
			t.Errorf("wordnetLine(%q) = %q, want nothing", absent, got)
		}
	}
	has := func(word, rel string, w float32) {
		t.Helper()
		for r, rw := range wordnetRelated(stem(word)) {
			if r == stem(rel) {
				if rw != w {
					t.Errorf("%s → %s weighs %v, want %v", word, rel, rw, w)
				}
				return
			}
		}
		t.Errorf("%s does not bring in %s: %q", word, rel, wordnetLine(stem(word)))
	}
	has("vacation", "holiday", wordnetWeights[0])
	has("apprise", "notify", wordnetWeights[0])
	has("mice", "mouse", wordnetWeights[0])
	has("notify", "notification", wordnetWeights[2])
	// The first content words of a definition, after the rest.
	has("vacation", "away", wordnetWeights[4])
	has("thermostat", "temperature", wordnetWeights[4])
	for _, w := range wordnetWeights {
		if w <= 0 || w >= weightGeneral {
			t.Errorf("a WordNet relation weighs %v, want above 0 and below the general lexicon's %v", w, weightGeneral)
		}
	}
}

// WordNet reaches a tool no query word names ("apprise" → notify),
// only for words nothing else reaches, and results stay deterministic.
func TestWordNetExpansion(t *testing.T) {
	ix := Build([]Doc{
		{Name: "notify_user", Description: "Notify a user by message."},
		{Name: "list_files", Description: "List the files of a folder."},
		{Name: "delete_file", Description: "Delete one file."},
	}, nil)
	hits := ix.Keyword("apprise the user", 3, nil)
	if len(hits) == 0 || hits[0].Name != "notify_user" {
		t.Fatalf("apprise the user: %v, want notify_user first", hits)
	}
	if ix.wordnetReaches(stem("files")) || ix.wordnetReaches(stem("delete")) {
		t.Error("WordNet expands a word the index holds; want only words nothing else reaches")
	}
	if !ix.wordnetReaches(stem("apprise")) {
		t.Error("WordNet does not expand apprise, which the index lacks")
	}
	for range 20 {
		if again := ix.Keyword("apprise the user", 3, nil); !slices.Equal(again, hits) {
			t.Fatalf("apprise the user: %v then %v, want the same", hits, again)
		}
	}
	wordnetOn = false
	defer func() { wordnetOn = true }()
	if off := ix.Keyword("apprise", 3, nil); len(off) != 0 {
		t.Errorf("apprise without WordNet: %v, want no hits", off)
	}
}

// checkTable checks an embedded table of lines "key rest": at least min
// lines, keys sorted and distinct, and every line found by tableLine.
func checkTable(t *testing.T, name, table string, min int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) < min {
		t.Fatalf("%s table holds %d lines, want at least %d", name, len(lines), min)
	}
	prev := ""
	for _, l := range lines {
		k := lineKey(l)
		if k <= prev {
			t.Fatalf("%s table line %q after %q: want keys sorted and distinct", name, k, prev)
		}
		prev = k
		if got := tableLine(table, k); got != l[len(k):] {
			t.Fatalf("%s: tableLine(%q) = %q, want %q", name, k, got, l[len(k):])
		}
	}
}
