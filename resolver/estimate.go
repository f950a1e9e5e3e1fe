package resolver

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Calibration of the cheap token estimator against a real BPE tokenizer
// (cl100k_base, in package deferral) on rendered Anthropic tools arrays;
// deferral's tests keep each half within 15% on differently shaped
// registries.
const (
	// proseBytesPerToken is the bytes-per-token ratio of descriptions
	// (English prose, Markdown lists, inline code) as they appear in the
	// payload, JSON-escaped.
	proseBytesPerToken = 4.5
	// schemaBytesPerToken is the ratio of canonical (compact, key-sorted)
	// JSON Schema, property descriptions included.
	schemaBytesPerToken = 4.5
	// ToolWrapperTokens is the per-tool JSON wrapper around name,
	// description and schema: {"name":"","description":"","input_schema":},
	ToolWrapperTokens = 10
)

// EstimateToolTokens estimates what a tool costs when its full schema is
// in the provider array: its description, its parameter schema, its
// name and a small wrapper, all counted. It uses no tokenizer:
// descriptions and schemas each have their own calibrated bytes-per-token
// ratio. It is the one estimate behind deferral's budget and the
// registry's deferral by budget (auto_defer).
func EstimateToolTokens(t *Tool) int {
	return textTokens(t.Description, escapedLen(t.Description), proseBytesPerToken) +
		bytesTokens(t.Parameters, schemaBytesPerToken) +
		NameTokens(t.Name) + ToolWrapperTokens
}

// EstimateTextTokens estimates the tokens of a line of prose as it is sent
// inside a JSON string or a prompt.
func EstimateTextTokens(s string) int {
	return textTokens(s, escapedLen(s), proseBytesPerToken)
}

// bytesTokens is textTokens of b, the JSON bytes of a schema (payload
// length len(b)): ASCII-only bytes, the common case, without copying them
// into a string.
func bytesTokens(b []byte, ratio float64) int {
	if asciiPrefix(b) < len(b) {
		return textTokens(string(b), len(b), ratio)
	}
	return ceilDiv(len(b), ratio)
}

// asciiPrefix returns the length of the longest prefix of s that is
// ASCII, reading eight bytes a step (tool text is long and almost always
// ASCII; estimates run on every turn).
func asciiPrefix[T string | []byte](s T) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if (s[i]|s[i+1]|s[i+2]|s[i+3]|s[i+4]|s[i+5]|s[i+6]|s[i+7])&0x80 != 0 {
			break
		}
	}
	for i < len(s) && s[i] < 0x80 {
		i++
	}
	return i
}

// Non-ASCII text: Chinese, Japanese and Korean characters cost about one
// token each in cl100k_base (0.9-1.0 measured on the CJK test registry),
// other non-ASCII letters about half a token.
const (
	cjkTokensPerRune   = 0.95
	otherTokensPerRune = 0.5
)

// textTokens estimates the tokens of text whose payload (JSON-escaped)
// length is n bytes: ASCII bytes at ratio bytes per token, non-ASCII
// characters per character. ASCII-only text, the common case, is one
// division.
func textTokens(s string, n int, ratio float64) int {
	i := asciiPrefix(s)
	if i == len(s) {
		return ceilDiv(n, ratio)
	}
	var extra float64
	for _, r := range s[i:] {
		if r < 0x80 {
			continue
		}
		n -= utf8.RuneLen(r)
		if r >= 0x2E80 && r <= 0xFFEF { // CJK scripts, symbols and full-width forms
			extra += cjkTokensPerRune
		} else {
			extra += otherTokensPerRune
		}
	}
	return ceilDiv(n, ratio) + int(math.Ceil(extra))
}

// NameTokens estimates the tokens of a tool name as cl100k_base splits
// it: one per word, where words are split at '_' and '-', at camelCase
// humps and between letters and digits, plus one for each further 7
// bytes of a long word; a run of separators such as "__" is a token of
// its own, and the "mcp" of mcp__server__tool is two. Calibrated on the
// 1,065 MCP tool names of toolsearch/searcheval (-4% of the real count)
// and the builtin names (+2%).
func NameTokens(name string) int {
	n, seg := 0, 0
	if strings.HasPrefix(name, MCPPrefix) {
		n++
	}
	flush := func() {
		if seg > 0 {
			n += 1 + (seg-1)/7
		}
		seg = 0
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c == '-' {
			flush()
			j := i
			for j < len(name) && (name[j] == '_' || name[j] == '-') {
				j++
			}
			if j-i >= 2 {
				n++
			}
			i = j - 1
			continue
		}
		if i > 0 {
			p := name[i-1]
			if c >= 'A' && c <= 'Z' && p >= 'a' && p <= 'z' || isDigit(c) != isDigit(p) {
				flush()
			}
		}
		seg++
	}
	flush()
	return n
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// ceilDiv returns ceil(n / ratio) for n >= 0.
func ceilDiv(n int, ratio float64) int {
	if n <= 0 {
		return 0
	}
	q := float64(n) / ratio
	i := int(q)
	if float64(i) < q {
		i++
	}
	return i
}

// escapedLen returns the length of s as a JSON string body: quote,
// backslash, newline, carriage return and tab take two bytes (\n). Other
// control characters (six bytes each) are too rare in descriptions to pay
// for a per-byte scan; strings.Count is vectorized.
func escapedLen(s string) int {
	return len(s) + strings.Count(s, "\n") + strings.Count(s, `"`) +
		strings.Count(s, `\`) + strings.Count(s, "\t") + strings.Count(s, "\r")
}
