package deferral

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
	"github.com/toolintent/engine/wire"
)

// Bounds of a tool_search request: the engine's rule, which the tool_search
// JSON Schema of the default registry states exactly (a test keeps the two
// in agreement).
const (
	// MaxSearchNames is the most names one call may load.
	MaxSearchNames = 16
	// MaxNameLen is the longest name a call may give, in characters; a
	// longer one is not a tool name anyway.
	MaxNameLen = 128
	// MaxQueryLen is the longest query or regex, in characters.
	MaxQueryLen = 256
	// DefaultMaxResults is how many tools a query or regex loads when the
	// call gives no max_results.
	DefaultMaxResults = 5
	// MaxMaxResults is the largest max_results.
	MaxMaxResults = 20
)

// ErrInvalidSearch reports a tool_search request outside its schema: a
// field of the wrong type, an unknown field, a bound exceeded. Requests the
// schema allows are never refused: unknown names, a query that matches
// nothing, a regex that does not compile and one too costly to match
// (toolsearch.MaxRegexInsts, toolsearch.RegexBudget) are soft results.
// Match it with errors.Is.
var ErrInvalidSearch = errors.New("invalid tool_search request")

// SearchRequest is one tool_search call. Any combination of the
// three forms may be given; results are combined, names first.
type SearchRequest struct {
	// Names are exact tool names to load (at most MaxSearchNames).
	Names []string `json:"names,omitempty"`
	// Query is a keyword query, ranked by BM25 over the deferred tools'
	// names, descriptions and parameters.
	Query string `json:"query,omitempty"`
	// Regex is a regular expression (RE2, case-insensitive) matched against
	// the deferred tools' names, descriptions and parameters. One whose
	// matching cost is over toolsearch's bounds is refused before any
	// matching, with a Note naming the pattern and the fix.
	Regex string `json:"regex,omitempty"`
	// MaxResults caps the tools Query and Regex load together; 0 means
	// DefaultMaxResults.
	MaxResults int `json:"max_results,omitempty"`
	// QueryVector is Query's embedding, from the model that embedded the
	// registry's tools (the optional semantic path). It is not
	// part of the model's tool_search input (ParseSearchInput refuses it):
	// the backend that intercepts the call adds it. With it, and tools
	// that carry embeddings, Query ranks by reciprocal rank fusion of the
	// keyword and the vector ranking (toolsearch.Index.Fused). It must
	// have the dimension of the tools' embeddings, finite numbers, not
	// all zero; without tool embeddings it is unused, with a Note.
	QueryVector []float32 `json:"query_vector,omitempty"`
	// Embedded ranks Query by meaning with vectors the engine computed
	// itself (the operator's embedding endpoint): the query's embedding
	// and the tools' vectors from one model. It is never part of the
	// model's input nor of a caller's request; a QueryVector, when given,
	// ranks instead.
	Embedded *Embedded `json:"-"`
}

// Embedded is a query's embedding and the vectors of a registry index's
// tools from the same model, both computed by the engine.
type Embedded struct {
	// Query is the query's embedding.
	Query []float32
	// Vectors are the vectors of the tools of the index the turn was
	// frozen with (IndexFor of its registry): a turn that searches
	// another index, or a Query of another dimension, ranks by keywords
	// with a note.
	Vectors *toolsearch.Vectors
}

// Validate checks the request against the bounds of the tool_search
// schema. The error wraps ErrInvalidSearch and names the field.
func (r SearchRequest) Validate() error {
	if len(r.Names) > MaxSearchNames {
		return fmt.Errorf("%w: names has %d items, at most %d allowed; load fewer tools per call", ErrInvalidSearch, len(r.Names), MaxSearchNames)
	}
	for i, n := range r.Names {
		if c := utf8.RuneCountInString(n); c == 0 || c > MaxNameLen {
			return fmt.Errorf("%w: names[%d] has %d characters, want 1 to %d", ErrInvalidSearch, i, c, MaxNameLen)
		}
	}
	if c := utf8.RuneCountInString(r.Query); c > MaxQueryLen {
		return fmt.Errorf("%w: query has %d characters, at most %d allowed; use a few keywords", ErrInvalidSearch, c, MaxQueryLen)
	}
	if c := utf8.RuneCountInString(r.Regex); c > MaxQueryLen {
		return fmt.Errorf("%w: regex has %d characters, at most %d allowed", ErrInvalidSearch, c, MaxQueryLen)
	}
	if r.MaxResults < 0 || r.MaxResults > MaxMaxResults {
		return fmt.Errorf("%w: max_results is %d, want 1 to %d", ErrInvalidSearch, r.MaxResults, MaxMaxResults)
	}
	if len(r.QueryVector) > resolver.MaxEmbeddingDim {
		return fmt.Errorf("%w: query_vector has %d numbers, at most %d allowed", ErrInvalidSearch, len(r.QueryVector), resolver.MaxEmbeddingDim)
	}
	return queryVectorError(r.QueryVector, 0)
}

// queryVectorError checks a query vector against tool embeddings of
// dimension dim (0: any dimension): the same dimension, finite numbers,
// not all zero. The error wraps ErrInvalidSearch.
func queryVectorError(vec []float32, dim int) error {
	if len(vec) == 0 {
		return nil
	}
	if dim > 0 && len(vec) != dim {
		return fmt.Errorf("%w: query_vector has %d numbers, but this registry's tool embeddings have %d; embed the query with the model that embedded the tools", ErrInvalidSearch, len(vec), dim)
	}
	zero := true
	for i, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: query_vector[%d] is %v, want a finite number", ErrInvalidSearch, i, x)
		}
		zero = zero && x == 0
	}
	if zero {
		return fmt.Errorf("%w: query_vector is all zeros, a vector with no direction; embed the query", ErrInvalidSearch)
	}
	return nil
}

func (r SearchRequest) limit() int {
	if r.MaxResults == 0 {
		return DefaultMaxResults
	}
	return r.MaxResults
}

// searchFields are the fields of a tool_search input, in schema order.
var searchFields = []string{"names", "query", "regex", "max_results"}

// ParseSearchInput reads the input object of a tool_search call exactly as
// the model produced it (the tool_use input) and applies the engine's one
// rule: a JSON object with only the fields names (array of 1..128-character
// strings, at most 16), query and regex (strings of at most 256
// characters) and max_results (an integer from 1 to 20); every field is
// optional. Anything else is refused with an error wrapping
// ErrInvalidSearch that names the field. The default registry's
// tool_search schema says exactly this.
func ParseSearchInput(raw []byte) (SearchRequest, error) {
	var req SearchRequest
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return req, fmt.Errorf("%w: input is not a JSON object; send the tool call's input object, e.g. {\"query\":\"github issues\"}", ErrInvalidSearch)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return req, fmt.Errorf("%w: input: %w", ErrInvalidSearch, err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad field reported is the same every time
	for _, k := range keys {
		if !slices.Contains(searchFields, k) {
			return req, fmt.Errorf("%w: unknown field %q; tool_search takes %s", ErrInvalidSearch, clip.String(k, 64), strings.Join(searchFields, ", "))
		}
	}
	for _, k := range searchFields {
		v, ok := fields[k]
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch k {
		case "names":
			if len(v) == 0 || v[0] != '[' {
				return req, fmt.Errorf("%w: names is %s; want an array of tool names", ErrInvalidSearch, jsonKind(v))
			}
			var items []json.RawMessage
			if err := json.Unmarshal(v, &items); err != nil {
				return req, fmt.Errorf("%w: names: %w", ErrInvalidSearch, err)
			}
			req.Names = make([]string, 0, len(items))
			for i, it := range items {
				s, err := jsonString(it)
				if err != nil {
					return req, fmt.Errorf("%w: names[%d] is %s; want a tool name string", ErrInvalidSearch, i, jsonKind(it))
				}
				req.Names = append(req.Names, s)
			}
		case "query", "regex":
			s, err := jsonString(v)
			if err != nil {
				return req, fmt.Errorf("%w: %s is %s; want a string", ErrInvalidSearch, k, jsonKind(v))
			}
			if k == "query" {
				req.Query = s
			} else {
				req.Regex = s
			}
		case "max_results":
			n, err := jsonInteger(v)
			if err != nil {
				return req, fmt.Errorf("%w: max_results is %s; want an integer from 1 to %d", ErrInvalidSearch, jsonKind(v), MaxMaxResults)
			}
			if n < 1 || n > MaxMaxResults {
				return req, fmt.Errorf("%w: max_results is %s, want 1 to %d", ErrInvalidSearch, v, MaxMaxResults)
			}
			req.MaxResults = int(n)
		}
	}
	if err := req.Validate(); err != nil {
		return SearchRequest{}, err
	}
	return req, nil
}

// jsonString decodes a JSON string value (not null).
func jsonString(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '"' {
		return "", errors.New("not a string")
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// jsonInteger decodes a JSON number with no fractional part (5 and 5.0
// alike, as JSON Schema's "integer" does).
func jsonInteger(v json.RawMessage) (float64, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return 0, errors.New("not a number")
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	if math.IsInf(f, 0) || f != math.Trunc(f) {
		return 0, errors.New("not an integer")
	}
	return f, nil
}

func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the number " + string(v)
}

// Match is one ranked result of a query or regex (wire.Match, the
// reply's); Weak marks a query match below ConfidentShare of the best one.
type Match = wire.Match

// SearchResult is what tool_search returns to the model.
type SearchResult struct {
	// Tools holds the full tools (description and parameter schema) that
	// the call found: the requested names that are in this turn's set, in
	// request order (newly loaded, already loaded, or resident), then the
	// query and regex matches that are not Weak, best first; each tool
	// once.
	Tools []resolver.Tool
	// Loaded lists the names this call loaded, in order; tools already
	// loaded or resident are not repeated here.
	Loaded []string
	// NotFound lists the requested names this turn cannot load (unknown,
	// unavailable, disabled, or added to the registry after the turn
	// started), in request order. They are a soft result: the call
	// succeeds.
	NotFound []string
	// Matches are the query and regex results, ranked, with their scores;
	// the Weak ones were not loaded (ConfidentShare).
	Matches []Match
	// Note is a sentence for the model when something needs saying: an
	// empty call, a query that matched nothing, a regex that does not
	// compile or is too costly to match.
	Note string
}

// Index is the search index of one registry: every tool of it, resident or
// deferred. Build one per registry with IndexFor; a Turn frozen with it
// searches only its own deferred tools.
type Index struct {
	reg *resolver.Registry
	ix  *toolsearch.Index
}

// Search returns the underlying index.
func (x *Index) Search() *toolsearch.Index { return x.ix }

var indexCache struct {
	mu      sync.Mutex
	entries []*Index // most recent first, at most indexCacheSize
}

const indexCacheSize = 4

// IndexFor returns the search index of reg, building it on first use from
// the last index built (so that tools unchanged since the previous registry
// version are not analysed again). Indexes of the last few registries are
// kept; IndexFor is safe for concurrent use.
func IndexFor(reg *resolver.Registry) *Index {
	indexCache.mu.Lock()
	defer indexCache.mu.Unlock()
	for i, e := range indexCache.entries {
		if e.reg == reg {
			copy(indexCache.entries[1:i+1], indexCache.entries[:i])
			indexCache.entries[0] = e
			return e
		}
	}
	var prev *toolsearch.Index
	if len(indexCache.entries) > 0 {
		prev = indexCache.entries[0].ix
	}
	x := &Index{reg: reg, ix: toolsearch.Build(docsOf(reg.Tools(), reg.Namespaces()), prev)}
	if len(indexCache.entries) < indexCacheSize {
		indexCache.entries = append(indexCache.entries, nil)
	}
	copy(indexCache.entries[1:], indexCache.entries)
	indexCache.entries[0] = x
	return x
}

// NewIndex builds the search index of tools (not cached), reusing the
// analysis of prev's unchanged tools when prev is not nil.
func NewIndex(tools []resolver.Tool, prev *Index) *Index {
	var p *toolsearch.Index
	if prev != nil {
		p = prev.ix
	}
	return &Index{ix: toolsearch.Build(docsOf(tools, nil), p)}
}

// docsOf turns tools into search documents; a namespaced tool's context is
// its namespace's description, and a tool's embedding is its vector.
func docsOf(tools []resolver.Tool, namespaces []resolver.Namespace) []toolsearch.Doc {
	docs := make([]toolsearch.Doc, len(tools))
	for i := range tools {
		docs[i] = toolsearch.Doc{Name: tools[i].Name, Description: tools[i].Description, Parameters: tools[i].Parameters, Vector: tools[i].Embedding}
		if ns, _, ok := resolver.NamespaceOf(tools[i].Name); ok {
			if j, found := slices.BinarySearchFunc(namespaces, ns, func(n resolver.Namespace, name string) int { return strings.Compare(n.Name, name) }); found {
				docs[i].Context = namespaces[j].Description
			}
		}
	}
	return docs
}

// searchOutput is the engine-side tool result of a search.
type searchOutput struct {
	Tools    []outputTool `json:"tools"`
	Loaded   []string     `json:"loaded"`
	NotFound []string     `json:"not_found,omitempty"`
	Note     string       `json:"note,omitempty"`
}

type outputTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Output renders the result as the tool result the model reads when the
// engine answers tool_search with the catalog rendering: every tool
// found with its full description and input schema, the names loaded, the
// names not found and the note, as one JSON object with fields in a fixed
// order. The bytes depend only on the result.
func (r SearchResult) Output() []byte {
	o := searchOutput{Tools: make([]outputTool, len(r.Tools)), Loaded: r.Loaded, NotFound: r.NotFound, Note: r.Note}
	if o.Loaded == nil {
		o.Loaded = []string{}
	}
	for i, t := range r.Tools {
		schema := json.RawMessage(t.Parameters)
		if len(schema) == 0 {
			schema = json.RawMessage(`{"properties":{},"type":"object"}`)
		}
		o.Tools[i] = outputTool{Name: t.Name, Description: t.Description, InputSchema: schema}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(o); err != nil {
		// Only a schema that is not JSON could fail; registry schemas are.
		return []byte(`{"tools":[],"loaded":[],"note":"result not encodable"}`)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}
