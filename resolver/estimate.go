package resolver

import "strings"

// Calibration of the cheap token estimator against a real BPE tokenizer
// (cl100k_base, in package deferral) on rendered Anthropic tools arrays;
// deferral's tests keep each half within 15% on differently shaped
// registries (R17).
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
// in the provider array (R17): its description, its parameter schema, its
// name and a small wrapper, all counted. It uses no tokenizer:
// descriptions and schemas each have their own calibrated bytes-per-token
// ratio. It is the one estimate behind deferral's budget and the
// registry's deferral by budget (auto_defer).
func EstimateToolTokens(t *Tool) int {
	return ceilDiv(escapedLen(t.Description), proseBytesPerToken) +
		ceilDiv(len(t.Parameters), schemaBytesPerToken) +
		NameTokens(t.Name) + ToolWrapperTokens
}

// NameTokens estimates the tokens of a tool name: one per segment between
// '_' or '-', plus one for each further 8 bytes of a long segment.
func NameTokens(name string) int {
	n, seg := 0, 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '_' && name[i] != '-' {
			seg++
			continue
		}
		if seg > 0 {
			n += 1 + (seg-1)/8
		}
		seg = 0
	}
	return n
}

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
