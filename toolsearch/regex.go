package toolsearch

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
)

// Bounds of a search.
const (
	// MaxPatternLen is the longest regular expression Regex accepts, in
	// bytes.
	MaxPatternLen = 256
	// MaxRegexInsts bounds the compiled program of a regular expression
	// (RE2 instructions, after counted repetitions are expanded): Regex
	// refuses a larger one. Patterns of a few words compile to tens.
	MaxRegexInsts = 200
	// RegexBudget bounds the matching work of one Regex call: the bytes
	// of the admitted tools' text times the pattern's width (regexWidth),
	// estimated before any matching. Regex refuses a pattern whose
	// estimate is above it. Over 10,000 tools a pattern of width up to 4
	// fits (a literal, a.*b, (a|b)*c); measured on 2 cores, a call at the
	// budget takes under 0.3 s.
	RegexBudget = 6 << 20
)

// ErrPattern reports a regular expression Regex cannot use: too long, not
// valid RE2 syntax, or too costly to match (MaxRegexInsts, RegexBudget).
// Match it with errors.Is.
var ErrPattern = errors.New("unusable regular expression")

// Regex returns the best k documents admitted by f whose name,
// description or parameter text matches the regular expression (RE2
// syntax, case-insensitive). A match in the name ranks above one in the
// description, which ranks above one in the parameters only; ties are
// broken by name.
//
// The cost of a call is bounded before any matching: the pattern is at
// most MaxPatternLen bytes, compiles to at most MaxRegexInsts
// instructions, and its width times the bytes of the admitted tools'
// text is at most RegexBudget. A pattern over a bound is refused with an
// error wrapping ErrPattern that names the pattern, the bound and the
// fix; so is a pattern that is not valid RE2. The decision depends on
// the pattern and the index only, so it is deterministic.
func (ix *Index) Regex(pattern string, k int, f *Filter) ([]Hit, error) {
	if len(pattern) > MaxPatternLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d allowed; use a shorter pattern", ErrPattern, len(pattern), MaxPatternLen)
	}
	parsed, err := syntax.Parse("(?i)"+pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	parsed = parsed.Simplify()
	prog, err := syntax.Compile(parsed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	if n := len(prog.Inst); n > MaxRegexInsts {
		return nil, fmt.Errorf("%w: %q compiles to %d instructions, at most %d allowed; lower its repetition counts ({n,m}) or search for a literal word instead", ErrPattern, pattern, n, MaxRegexInsts)
	}
	width := regexWidth(parsed)
	var bytes int64
	for i := range ix.names {
		if f.Has(i) {
			bytes += int64(ix.textLen(i))
		}
	}
	if cost := int64(width) * bytes; cost > RegexBudget {
		return nil, fmt.Errorf("%w: %q costs %d units to match over %d bytes of tool text (width %d: its repeated sub-patterns, each .* or x+ inside a repetition), at most %d allowed; remove nested or repeated .*, or use a query", ErrPattern, pattern, cost, bytes, width, RegexBudget)
	}
	re, err := regexp.Compile("(?i)" + pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	if k <= 0 {
		return nil, nil
	}
	var top []Hit
	for i := range ix.names {
		if !f.Has(i) {
			continue
		}
		score := 0.0
		switch {
		case re.MatchString(ix.names[i]):
			score = 3
		case re.MatchString(ix.descs[i]):
			score = 2
		case ix.docs[i].ptext != "" && re.MatchString(ix.docs[i].ptext):
			score = 1
		}
		if score > 0 {
			top = ix.offer(top, k, Hit{Name: ix.names[i], Score: score, doc: int32(i)})
		}
	}
	return top, nil
}

// regexWidth estimates how many matching threads a pattern keeps alive
// per byte of text: 1 plus, for every unbounded repetition (x*, x+), the
// characters its body consumes. "create.*issue" is 2; "(?:.*){1,10}z",
// once simplified into ten nested .*, is 11; matching time grows with it.
func regexWidth(re *syntax.Regexp) int {
	w := 1
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if r.Op == syntax.OpStar || r.Op == syntax.OpPlus || (r.Op == syntax.OpRepeat && r.Max < 0) {
			w += consumers(r)
		}
		for _, s := range r.Sub {
			walk(s)
		}
	}
	walk(re)
	return w
}

// consumers counts the character-consuming leaves under r.
func consumers(r *syntax.Regexp) int {
	switch r.Op {
	case syntax.OpLiteral:
		return len(r.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	}
	n := 0
	for _, s := range r.Sub {
		n += consumers(s)
	}
	return n
}
