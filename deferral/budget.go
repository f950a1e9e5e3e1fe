package deferral

import (
	"strings"

	"github.com/toolintent/engine/resolver"
)

// Calibration of the cheap estimator against the measuring stick
// (Tokenizer, cl100k_base) on rendered Anthropic tools arrays; the tests
// keep each half within 15% on several differently shaped registries (R17).
const (
	// proseBytesPerToken is the bytes-per-token ratio of descriptions
	// (English prose, Markdown lists, inline code) as they appear in the
	// payload, JSON-escaped.
	proseBytesPerToken = 4.5
	// schemaBytesPerToken is the ratio of canonical (compact, key-sorted)
	// JSON Schema, property descriptions included.
	schemaBytesPerToken = 4.5
	// toolWrapperTokens is the per-tool JSON wrapper around name,
	// description and schema: {"name":"","description":"","input_schema":},
	toolWrapperTokens = 10
	// arrayWrapperTokens is the one-off cost of a non-empty tools array:
	// the brackets and the cache_control marker on the last tool.
	arrayWrapperTokens = 9
	// catalogHeaderTokens is the cost of CatalogHeader and its newline
	// (checked against the tokenizer by a test).
	catalogHeaderTokens = 8
)

// Budget is the estimated token cost of one dispatch (R17).
type Budget struct {
	// Resident is the cost of the provider tools array.
	Resident int `json:"resident"`
	// Catalog is the cost of the catalog text (0 when it is empty).
	Catalog int `json:"catalog"`
	// Total is Resident + Catalog.
	Total int `json:"total"`
	// ResidentTools is the number of tools in the provider array (resident
	// tools plus loaded deferred ones).
	ResidentTools int `json:"resident_tools"`
	// DeferredTools is the number of names in the catalog.
	DeferredTools int `json:"deferred_tools"`
}

// EstimateTool estimates what a tool costs when its full schema is in the
// provider array (R17): its description, its parameter schema and a small
// wrapper, all counted. It uses no tokenizer: descriptions and schemas each
// have their own calibrated bytes-per-token ratio.
func EstimateTool(t resolver.Tool) int {
	return ceilDiv(escapedLen(t.Description), proseBytesPerToken) +
		ceilDiv(len(t.Parameters), schemaBytesPerToken) +
		nameTokens(t.Name) + toolWrapperTokens
}

// EstimateDeferred estimates what a deferred tool costs in the catalog: its
// bare name plus a newline, never its description (R17).
func EstimateDeferred(name string) int {
	return nameTokens(name) + 1
}

// Estimate estimates both halves of a split (R17): the provider array
// (EstimateTool per tool plus the array wrapper) and the catalog text
// (EstimateDeferred per name plus the header line).
func Estimate(s Split) Budget {
	b := Budget{ResidentTools: len(s.Provider), DeferredTools: len(s.Catalog)}
	if len(s.Provider) > 0 {
		b.Resident = arrayWrapperTokens
		for i := range s.Provider {
			b.Resident += EstimateTool(s.Provider[i])
		}
	}
	if len(s.Catalog) > 0 {
		b.Catalog = catalogHeaderTokens
		for _, name := range s.Catalog {
			b.Catalog += EstimateDeferred(name)
		}
	}
	b.Total = b.Resident + b.Catalog
	return b
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

// nameTokens estimates the tokens of a snake_case or kebab-case tool name:
// one per segment, plus one for each further 8 bytes of a long segment.
func nameTokens(name string) int {
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
