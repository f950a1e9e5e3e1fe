// Package searcheval holds a labelled corpus for tool_search and measures
// a search against it: 1,065 MCP tool definitions on 88
// servers, as MCP tools/list results, and 171 queries phrased as a user or
// a model would ask, each with the tools that answer it, split into a dev
// and a holdout half. Tests and engine bench use it; see
// testdata/README.md for how it was written.
package searcheval

import (
	"embed"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

//go:embed testdata/mcp/*.json testdata/queries.json testdata/mcp2/*.json testdata/heldout.json testdata/tuning.json
var files embed.FS

// Tool is one tool of an MCP tools/list result.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Server is one MCP server of the corpus with its tools.
type Server struct {
	// Name is the server name, the middle part of mcp__<server>__<tool>.
	Name string
	// Description is a one-line summary of the server.
	Description string
	// Raw is the server's tools/list result as stored.
	Raw []byte
	// Tools are the server's tools in tools/list order.
	Tools []Tool
}

// ToolName is the registry name of an MCP server's tool: mcp__server__tool.
func ToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// Servers returns the corpus's servers sorted by name.
func Servers() ([]Server, error) { return serversIn("testdata/mcp") }

// MCPRegistry returns a registry file (JSON) of the default registry
// plus at least n MCP tools, every server deferred: the corpus's servers,
// repeated with numbered server names (github, github2, ...) until they
// hold n tools, under version.
func MCPRegistry(n int, version string) ([]byte, error) {
	servers, err := Servers()
	if err != nil {
		return nil, err
	}
	var in []resolver.MCPServer
	tools := 0
	for copyN := 1; tools < n; copyN++ {
		for _, s := range servers {
			if tools >= n {
				break
			}
			name := s.Name
			if copyN > 1 {
				name = fmt.Sprint(s.Name, copyN)
			}
			in = append(in, resolver.MCPServer{Name: name, Description: s.Description, ToolsList: s.Raw})
			tools += len(s.Tools)
		}
	}
	data, _, err := resolver.ImportMCP(resolver.DefaultRegistryJSON(), in, resolver.ImportOptions{Version: version})
	return data, err
}

// HeldOutServers returns the servers of the held-out set
// (testdata/mcp2) sorted by name: servers the first corpus lacks.
func HeldOutServers() ([]Server, error) { return serversIn("testdata/mcp2") }

// HeldOutDocs returns the held-out set's tools as search documents named
// mcp__server__tool, servers in name order. Both HeldOutQueries and
// TuningQueries are asked over them.
func HeldOutDocs() ([]toolsearch.Doc, error) {
	return docsFrom(HeldOutServers())
}

func serversIn(dir string) ([]Server, error) { return serversOf(files, dir) }

// Docs returns the corpus as search documents named mcp__server__tool,
// servers in name order.
func Docs() ([]toolsearch.Doc, error) {
	return docsFrom(Servers())
}

// docsFrom is docsOf(servers, "") when err is nil.
func docsFrom(servers []Server, err error) ([]toolsearch.Doc, error) {
	if err != nil {
		return nil, err
	}
	return docsOf(servers, ""), nil
}

func docsOf(servers []Server, suffix string) []toolsearch.Doc {
	var docs []toolsearch.Doc
	for _, s := range servers {
		for _, t := range s.Tools {
			docs = append(docs, toolsearch.Doc{Name: ToolName(s.Name+suffix, t.Name), Description: t.Description, Parameters: t.InputSchema, Context: s.Description})
		}
	}
	return docs
}

// Scaled returns n search documents: the corpus repeated with numbered
// server names (github, github2, github3, ...), for measuring at sizes
// beyond the corpus (10,000 tools).
func Scaled(n int) ([]toolsearch.Doc, error) {
	servers, err := Servers()
	if err != nil {
		return nil, err
	}
	var docs []toolsearch.Doc
	for copyN := 1; len(docs) < n; copyN++ {
		suffix := ""
		if copyN > 1 {
			suffix = fmt.Sprint(copyN)
		}
		docs = append(docs, docsOf(servers, suffix)...)
	}
	return docs[:n], nil
}

// Query is one labelled query.
type Query struct {
	// ID is q001, q002, ... (first corpus), h001, ... (held-out set),
	// t001, ... (tuning queries of the held-out set's tools).
	ID string `json:"id"`
	// Split is "dev" or "holdout" (first corpus), "heldout" or "tuning".
	Split string `json:"split"`
	// Kind is keyword, paraphrase, parameter, cjk or ambiguous;
	// "" in the first corpus.
	Kind string `json:"kind,omitempty"`
	// Query is the text sent as tool_search's query.
	Query string `json:"query"`
	// Relevant are the tools that answer it (mcp__server__tool).
	Relevant []string `json:"relevant"`
}

// Queries returns the labelled queries of the first corpus in id order.
func Queries() ([]Query, error) { return queriesIn("testdata/queries.json") }

// HeldOutQueries returns the held-out queries over HeldOutDocs:
// written before the ranking changes and never tuned on.
func HeldOutQueries() ([]Query, error) { return queriesIn("testdata/heldout.json") }

// TuningQueries returns the tuning queries over HeldOutDocs: the ones
// ranking changes are judged on, beside Queries.
func TuningQueries() ([]Query, error) { return queriesIn("testdata/tuning.json") }

// Kinds are the query kinds, in report order.
var Kinds = []string{"keyword", "paraphrase", "parameter", "cjk", "ambiguous"}

// OfKind returns the queries of one kind ("" for all).
func OfKind(qs []Query, kind string) []Query {
	if kind == "" {
		return qs
	}
	var out []Query
	for _, q := range qs {
		if q.Kind == kind {
			out = append(out, q)
		}
	}
	return out
}

func queriesIn(file string) ([]Query, error) {
	b, err := files.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var qs []Query
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, fmt.Errorf("decode queries: %w", err)
	}
	return qs, nil
}

// Cutoffs of the measures.
const (
	// RecallAt is the rank up to which recall is counted (recall@5).
	RecallAt = 5
	// RankDepth is how many results a query asks for; MRR counts the
	// first relevant tool within them.
	RankDepth = 20
)

// Miss is a query whose relevant tools were not all in the top RecallAt.
type Miss struct {
	ID    string   `json:"id"`
	Query string   `json:"query"`
	Want  []string `json:"want"`
	Got   []string `json:"got"`
}

// Quality is the measure of a search on a set of queries.
type Quality struct {
	// Split is the query split measured ("dev", "holdout" or "" for all).
	Split string `json:"split"`
	// Queries is the number of queries measured.
	Queries int `json:"queries"`
	// Recall1 is recall@1: the share of queries whose first result is
	// relevant.
	Recall1 float64 `json:"recall_at_1"`
	// Recall is recall@5: the mean, over queries, of the share of their
	// relevant tools found in the top 5.
	Recall float64 `json:"recall_at_5"`
	// MRR is the mean reciprocal rank of the first relevant tool in the
	// top 20 (0 for a query without one).
	MRR float64 `json:"mrr"`
	// Misses are the queries with recall below 1.
	Misses []Miss `json:"misses,omitempty"`
}

// Evaluate runs search (which returns tool names, best first, at most k)
// on the queries of split ("" for all) and measures recall@5 and MRR.
func Evaluate(search func(query string, k int) []string, qs []Query, split string) Quality {
	q := Quality{Split: split}
	for _, query := range qs {
		if split != "" && query.Split != split {
			continue
		}
		got := search(query.Query, RankDepth)
		top := got[:min(RecallAt, len(got))]
		found := 0
		for _, r := range query.Relevant {
			if slices.Contains(top, r) {
				found++
			}
		}
		q.Recall += float64(found) / float64(len(query.Relevant))
		for i, name := range got {
			if slices.Contains(query.Relevant, name) {
				if i == 0 {
					q.Recall1++
				}
				q.MRR += 1 / float64(i+1)
				break
			}
		}
		if found < len(query.Relevant) {
			q.Misses = append(q.Misses, Miss{ID: query.ID, Query: query.Query, Want: query.Relevant, Got: slices.Clone(top)})
		}
		q.Queries++
	}
	if q.Queries > 0 {
		q.Recall /= float64(q.Queries)
		q.Recall1 /= float64(q.Queries)
		q.MRR /= float64(q.Queries)
	}
	return q
}

// KeywordSearch adapts an index's keyword mode to Evaluate.
func KeywordSearch(ix *toolsearch.Index) func(string, int) []string {
	return func(query string, k int) []string {
		hits := ix.Keyword(query, k, nil)
		out := make([]string, len(hits))
		for i, h := range hits {
			out[i] = h.Name
		}
		return out
	}
}
