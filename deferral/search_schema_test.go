package deferral

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/toolintent/engine/resolver"
)

// toolSearchSchema compiles the tool_search parameter schema the model is
// shown (the default registry's) with an independent JSON Schema validator.
func toolSearchSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	tool, ok := resolver.Default().Tool(resolver.ToolSearch)
	if !ok {
		t.Fatal("default registry has no tool_search")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tool.Parameters))
	if err != nil {
		t.Fatalf("tool_search schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool_search.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("tool_search.json")
	if err != nil {
		t.Fatalf("tool_search schema does not compile: %v", err)
	}
	return sch
}

// agree checks one input against the schema and the engine's rule.
func agree(t testing.TB, sch *jsonschema.Schema, raw string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	schemaOK := err == nil && sch.Validate(inst) == nil
	_, perr := ParseSearchInput([]byte(raw))
	if perr != nil && !errors.Is(perr, ErrInvalidSearch) {
		t.Fatalf("input %s: engine error %v does not wrap ErrInvalidSearch", raw, perr)
	}
	if schemaOK != (perr == nil) {
		t.Fatalf("input %.300s: schema says valid=%v, engine says %v", raw, schemaOK, perr)
	}
}

// One source of truth. Every input the engine accepts is valid
// against the tool_search JSON Schema the model is shown, and every input
// the schema allows is accepted by the engine: hand-picked edge cases
// first, then random JSON documents.
func TestSearchSchemaAgreesWithEngine(t *testing.T) {
	sch := toolSearchSchema(t)
	long := func(n int) string { return strconv.Quote(strings.Repeat("é", n)) }
	names := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf("%q", fmt.Sprintf("t%d", i))
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	for _, raw := range []string{
		`{}`, `{"names":["send_message"]}`, `{"names":[]}`, `{"names":[""]}`, `{"names":[1]}`, `{"names":"send_message"}`,
		`{"names":null}`, `{"names":` + names(16) + `}`, `{"names":` + names(17) + `}`,
		`{"names":[` + long(128) + `]}`, `{"names":[` + long(129) + `]}`,
		`{"query":"github issues"}`, `{"query":""}`, `{"query":null}`, `{"query":5}`, `{"query":["a"]}`,
		`{"query":` + long(256) + `}`, `{"query":` + long(257) + `}`,
		`{"regex":"^mcp__slack__"}`, `{"regex":"(unclosed"}`, `{"regex":` + long(256) + `}`, `{"regex":` + long(257) + `}`,
		`{"max_results":1}`, `{"max_results":20}`, `{"max_results":0}`, `{"max_results":21}`, `{"max_results":5.0}`,
		`{"max_results":5.5}`, `{"max_results":"5"}`, `{"max_results":-1}`, `{"max_results":1e1}`, `{"max_results":1e400}`,
		`{"names":["a"],"query":"b","regex":"c","max_results":3}`, `{"Names":["a"]}`, `{"limit":3}`, `{"query":"a","extra":true}`,
		`[]`, `null`, `"query"`, `5`, `true`, `{"query":"a"`, ``,
	} {
		agree(t, sch, raw)
	}
	rapid.Check(t, func(rt *rapid.T) {
		agree(t, sch, genInput(rt))
	})
}

// genInput draws a JSON object mixing the schema's fields and others, with
// values of every JSON type and lengths around the bounds.
func genInput(t *rapid.T) string {
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"names", "query", "regex", "max_results", "name", "limit", "q"}),
		0, 4, rapid.ID[string]).Draw(t, "keys")
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Quote(k) + ":" + genValue(t, k, 0)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func genValue(t *rapid.T, label string, depth int) string {
	kinds := []string{"string", "string", "int", "float", "null", "bool", "array", "array"}
	if depth < 2 {
		kinds = append(kinds, "object")
	}
	switch rapid.SampledFrom(kinds).Draw(t, label+"_kind") {
	case "string":
		n := rapid.SampledFrom([]int{0, 1, 5, 127, 128, 129, 255, 256, 257}).Draw(t, label+"_len")
		r := rapid.SampledFrom([]string{"a", "é", "字", "\"", "\\", "\n"}).Draw(t, label+"_rune")
		return strconv.Quote(strings.Repeat(r, n))
	case "int":
		return strconv.Itoa(rapid.IntRange(-2, 25).Draw(t, label+"_int"))
	case "float":
		return rapid.SampledFrom([]string{"5.0", "5.5", "1e1", "2e1", "0.0", "-1.5", "1e400"}).Draw(t, label+"_float")
	case "null":
		return "null"
	case "bool":
		return strconv.FormatBool(rapid.Bool().Draw(t, label+"_bool"))
	case "array":
		n := rapid.SampledFrom([]int{0, 1, 2, 15, 16, 17}).Draw(t, label+"_n")
		items := make([]string, n)
		mixed := rapid.IntRange(0, 3).Draw(t, label+"_mixed") == 0
		for i := range items {
			if mixed {
				items[i] = genValue(t, label+"_item", depth+1)
			} else {
				items[i] = strconv.Quote(fmt.Sprintf("tool_%d", i))
			}
		}
		return "[" + strings.Join(items, ",") + "]"
	default:
		return `{"a":` + genValue(t, label+"_obj", depth+1) + `}`
	}
}

// What ParseSearchInput accepts becomes the request the schema
// describes.
func TestParseSearchInput(t *testing.T) {
	req, err := ParseSearchInput([]byte(` {"max_results": 3.0, "regex": "^mcp__", "query": "github issue", "names": ["a", "b"]} `))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(req.Names) != "[a b]" || req.Query != "github issue" || req.Regex != "^mcp__" || req.MaxResults != 3 {
		t.Errorf("parsed %+v", req)
	}
	if req, err := ParseSearchInput([]byte(`{}`)); err != nil || req.limit() != DefaultMaxResults {
		t.Errorf("empty input: %+v, %v", req, err)
	}
	_, err = ParseSearchInput([]byte(`{"zeta":1,"alpha":2}`))
	if err == nil || !strings.Contains(err.Error(), `"alpha"`) || !strings.Contains(err.Error(), "names, query, regex, max_results") {
		t.Errorf("unknown fields: %v; want the first one, sorted, and the known fields named", err)
	}
}
