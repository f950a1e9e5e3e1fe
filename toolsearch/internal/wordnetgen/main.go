// Command wordnetgen compiles the WordNet 3.0 database (Debian's
// wordnet-base: data.*, index.* and *.exc files) into the compact word
// table toolsearch ships for query-side expansion (the WordNet
// lever). Run by go generate in package toolsearch:
//
//	go run ./internal/wordnetgen -dict /usr/share/wordnet -out wordnet/table.txt
//
// Each line of the text table is the toolsearch term of one lemma (a
// single word of a noun, verb or adjective, stemmed as toolsearch stems a
// query) followed by the terms of its related single words, a mark
// naming the relation before the first word of each run:
//
//	notify =advis apprise apprize @inform +notification notice notifiable
//
// "=" synonyms of the lemma's first senses (same synset), "@" the words of
// their direct hypernyms, "+" derivationally related forms of the lemma,
// "*" the words of entailed verbs. Senses follow WordNet's order (most
// frequent first); a lemma with more than -maxsenses senses is left out
// (get, run, make, set: too many meanings to expand safely). Irregular
// forms of the *.exc files (ran, went, mice) get the lines of their
// lemma, so a query in any form finds them. The output is deterministic:
// terms sorted, words in WordNet's order. Regenerate it when toolsearch's
// analysis (stemmer, stop words) changes.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolintent/engine/toolsearch"
)

type config struct {
	dict      string
	out       string
	senses    int
	maxSenses int
	gloss     int
	// collocations keeps verbs of two or three words (collocation).
	collocations bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.dict, "dict", "/usr/share/wordnet", "directory of the WordNet 3.0 database files (data.noun, index.noun, noun.exc, ...)")
	flag.StringVar(&cfg.out, "out", "wordnet/table.txt", "table to write")
	flag.IntVar(&cfg.senses, "senses", 3, "senses of a lemma to expand, most frequent first")
	flag.IntVar(&cfg.maxSenses, "maxsenses", 16, "leave out lemmas with more senses than this")
	flag.IntVar(&cfg.gloss, "gloss", 4, "content words of the first sense's definition to keep (relation ~)")
	flag.BoolVar(&cfg.collocations, "collocations", true, "keep verbs of two or three words (get_rid_of) under the key _getridof")
	flag.Parse()
	if err := run(cfg); err != nil {
		log.Fatal(err)
	}
}

// synset is one WordNet synset: its words (lemmas, in order) and pointers.
type synset struct {
	words []string
	ptrs  []pointer
	gloss []string // the content words of its definition, in order
}

// pointer is one relation of a synset: its symbol, target and, for a
// lexical relation, the source and target word numbers (0: the synset).
type pointer struct {
	sym      string
	target   string // pos letter + offset
	src, dst int
}

// posFiles are the parts of speech compiled, with their file names.
var posFiles = []struct{ letter, name string }{{"n", "noun"}, {"v", "verb"}, {"a", "adj"}}

func run(cfg config) error {
	if cfg.senses < 1 || cfg.maxSenses < cfg.senses {
		return fmt.Errorf("senses %d, maxsenses %d: want 1 <= senses <= maxsenses", cfg.senses, cfg.maxSenses)
	}
	synsets := map[string]*synset{}
	for _, p := range posFiles {
		if err := readData(filepath.Join(cfg.dict, "data."+p.name), p.letter, synsets); err != nil {
			return err
		}
	}
	table := map[string]*entry{}
	for _, p := range posFiles {
		if err := readIndex(filepath.Join(cfg.dict, "index."+p.name), p.letter, cfg, synsets, table); err != nil {
			return err
		}
	}
	for _, p := range posFiles {
		if err := readExceptions(filepath.Join(cfg.dict, p.name+".exc"), table); err != nil {
			return err
		}
	}
	return write(cfg.out, table)
}

// entry holds a lemma's related words per relation mark, in order.
type entry struct {
	rel map[byte][]string
}

// marks are the relation marks in the order they are written.
var marks = []byte{'=', '@', '+', '*', '~'}

func (e *entry) add(mark byte, w, self string) {
	if w == self || w == "" {
		return
	}
	for _, m := range marks {
		if slices.Contains(e.rel[m], w) {
			return // kept under its first (closer) relation
		}
	}
	e.rel[mark] = append(e.rel[mark], w)
}

// word turns a WordNet lemma into a table word: lower case, the adjective
// marker "(a)" dropped, hyphens joined ("e-mail" is "email"); "" for a
// collocation ("give_notice") or a word with other characters.
func word(lemma string) string {
	if i := strings.IndexByte(lemma, '('); i >= 0 {
		lemma = lemma[:i]
	}
	lemma = strings.ToLower(strings.ReplaceAll(lemma, "-", ""))
	if lemma == "" {
		return ""
	}
	for _, r := range lemma {
		if r < 'a' || r > 'z' {
			return ""
		}
	}
	return lemma
}

func readData(path, pos string, synsets map[string]*synset) error {
	return eachLine(path, func(line string) error {
		if strings.HasPrefix(line, "  ") {
			return nil // the licence header
		}
		gloss := ""
		if i := strings.Index(line, " | "); i >= 0 {
			line, gloss = line[:i], line[i+3:]
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return fmt.Errorf("%s: short line %.40q", path, line)
		}
		wcnt, err := strconv.ParseUint(f[3], 16, 16)
		if err != nil {
			return fmt.Errorf("%s: word count %q: %w", path, f[3], err)
		}
		s := &synset{}
		i := 4
		for range wcnt {
			s.words = append(s.words, f[i])
			i += 2
		}
		pcnt, err := strconv.Atoi(f[i])
		if err != nil {
			return fmt.Errorf("%s: pointer count %q: %w", path, f[i], err)
		}
		i++
		for range pcnt {
			st, err := strconv.ParseUint(f[i+3], 16, 16)
			if err != nil {
				return fmt.Errorf("%s: pointer source/target %q: %w", path, f[i+3], err)
			}
			tpos := f[i+2]
			if tpos == "s" {
				tpos = "a"
			}
			s.ptrs = append(s.ptrs, pointer{sym: f[i], target: tpos + f[i+1], src: int(st >> 8), dst: int(st & 0xff)})
			i += 4
		}
		s.gloss = glossWords(gloss)
		synsets[pos+f[0]] = s
		return nil
	})
}

func readIndex(path, pos string, cfg config, synsets map[string]*synset, table map[string]*entry) error {
	return eachLine(path, func(line string) error {
		if strings.HasPrefix(line, "  ") {
			return nil
		}
		f := strings.Fields(line)
		lemma := word(f[0])
		if cfg.collocations && pos == "v" && strings.Contains(f[0], "_") {
			lemma = collocation(f[0])
		}
		if lemma == "" || len(lemma) < 3 {
			return nil
		}
		cnt, err := strconv.Atoi(f[2])
		if err != nil {
			return fmt.Errorf("%s: synset count %q: %w", path, f[2], err)
		}
		if cnt > cfg.maxSenses {
			return nil
		}
		offsets := f[len(f)-cnt:]
		e := table[lemma]
		if e == nil {
			e = &entry{rel: map[byte][]string{}}
			table[lemma] = e
		}
		for k, off := range offsets {
			if k >= cfg.senses {
				break
			}
			s := synsets[pos+off]
			if s == nil {
				return fmt.Errorf("%s: %s sense %s not in data.%s", path, f[0], off, pos)
			}
			self := 0 // the lemma's word number in the synset
			for i, w := range s.words {
				if word(w) == lemma {
					self = i + 1
				}
				e.add('=', word(w), lemma)
			}
			for _, p := range s.ptrs {
				t := synsets[p.target]
				if t == nil {
					continue
				}
				switch {
				case p.sym == "@" && p.src == 0 && k == 0:
					for _, w := range t.words {
						e.add('@', word(w), lemma)
					}
				case p.sym == "+" && p.src == self && p.dst > 0 && p.dst <= len(t.words):
					e.add('+', word(t.words[p.dst-1]), lemma)
				case p.sym == "*" && p.src == 0:
					for _, w := range t.words {
						e.add('*', word(w), lemma)
					}
				}
			}
			if k == 0 && cfg.gloss > 0 {
				for i, w := range s.gloss {
					if i == cfg.gloss {
						break
					}
					e.add('~', w, lemma)
				}
			}
		}
		return nil
	})
}

// readExceptions gives an irregular form the relations of its lemma and
// the lemma itself as a synonym.
func readExceptions(path string, table map[string]*entry) error {
	return eachLine(path, func(line string) error {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil
		}
		form, lemma := word(f[0]), word(f[1])
		src := table[lemma]
		if form == "" || lemma == "" || src == nil || form == lemma {
			return nil
		}
		e := table[form]
		if e == nil {
			e = &entry{rel: map[byte][]string{}}
			table[form] = e
		}
		e.add('=', lemma, form)
		for _, m := range marks {
			for _, w := range src.rel[m] {
				e.add(m, w, form)
			}
		}
		return nil
	})
}

func eachLine(path string, f func(string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read WordNet (set -dict to the directory of data.noun): %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		if err := f(sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// write writes the table keyed by toolsearch's terms: a lemma and its
// words are analysed as toolsearch analyses a query (stemmed, stop words
// dropped), lemmas of one term are merged in lemma order, a word is kept
// once, under its first relation, and never as its own key's term. Lines
// are sorted by term, so that toolsearch finds one by binary search in
// the embedded text without loading it.
func write(path string, table map[string]*entry) (err error) {
	lemmas := make([]string, 0, len(table))
	for k := range table {
		lemmas = append(lemmas, k)
	}
	slices.Sort(lemmas)
	type rel struct {
		mark byte
		term string
	}
	merged := map[string][]rel{}
	// The definitions' words (~) come after every other relation of every
	// lemma of a term, so that a word another lemma relates closer keeps
	// that relation.
	for _, pass := range [][]byte{marks[:len(marks)-1], marks[len(marks)-1:]} {
		for _, l := range lemmas {
			key := term(l)
			if strings.HasPrefix(l, "_") {
				key = l // a collocation's key is its words joined
			}
			if key == "" {
				continue
			}
			rels := merged[key]
			for _, m := range pass {
				for _, w := range table[l].rel[m] {
					t := term(w)
					if t == "" || t == key || slices.ContainsFunc(rels, func(r rel) bool { return r.term == t }) {
						continue
					}
					rels = append(rels, rel{m, t})
				}
			}
			if len(rels) > 0 {
				merged[key] = rels
			}
		}
	}
	keys := slices.Sorted(maps.Keys(merged))
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(k)
		mark := byte(0)
		for _, r := range merged[k] {
			b.WriteByte(' ')
			if r.mark != mark {
				b.WriteByte(r.mark)
				mark = r.mark
			}
			b.WriteString(r.term)
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// term is toolsearch's term for a single word, "" for a stop word.
func term(w string) string {
	ts := toolsearch.Terms(w)
	if len(ts) != 1 {
		return ""
	}
	return ts[0]
}

// glossWords returns the single words of a WordNet gloss's definition
// (the text before its first ';' or example in quotes), lower-cased, of
// at least four letters, each once.
func glossWords(gloss string) []string {
	if i := strings.IndexAny(gloss, ";\"("); i >= 0 {
		gloss = gloss[:i]
	}
	var out []string
	for _, f := range strings.FieldsFunc(gloss, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) {
		w := strings.ToLower(f)
		if len(w) < 4 || glossStop[w] || slices.Contains(out, w) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// glossStop are words of WordNet's definitions that say nothing about the
// word defined.
var glossStop = map[string]bool{
	"that": true, "which": true, "with": true, "from": true, "into": true, "something": true, "someone": true,
	"used": true, "using": true, "especially": true, "usually": true, "often": true, "other": true, "such": true,
	"having": true, "being": true, "make": true, "made": true, "cause": true, "become": true, "more": true,
	"than": true, "their": true, "they": true, "this": true, "these": true, "those": true, "what": true,
	"when": true, "where": true, "whose": true, "quality": true, "state": true, "condition": true, "person": true,
	"people": true, "thing": true, "things": true, "certain": true, "part": true, "kind": true, "form": true,
	"very": true, "some": true, "there": true, "about": true, "over": true, "under": true, "without": true,
	"within": true, "been": true, "have": true, "will": true, "would": true, "also": true, "each": true,
	"example": true, "especial": true, "particular": true, "various": true, "given": true, "like": true,
}

// collocation turns a WordNet lemma of two or three words ("get_rid_of",
// "turn_off") into its table key: "_" and its words joined ("_getridof"),
// the form toolsearch looks neighbouring query words up by; "" for other
// lemmas.
func collocation(lemma string) string {
	parts := strings.Split(lemma, "_")
	if len(parts) < 2 || len(parts) > 3 {
		return ""
	}
	key := "_"
	for _, p := range parts {
		w := word(p)
		if w == "" {
			return ""
		}
		key += w
	}
	return key
}
