package searcheval

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/toolintent/engine/toolsearch"
)

// blind holds the blind evaluation sets 3 to 5: testdata/mcpN and
// testdata/heldoutN.json each.
//
//go:embed testdata/mcp3/*.json testdata/heldout3.json
//go:embed testdata/mcp4/*.json testdata/heldout4.json
//go:embed testdata/mcp5/*.json testdata/heldout5.json
var blind embed.FS

// A Set is one blind evaluation set: the MCP servers of testdata/mcpN and
// the queries of testdata/heldoutN.json, asked over those servers' tools
// alone.
type Set struct {
	dir, queries string
}

// The blind sets. Each set's servers are none of the earlier sets' (and
// none of testdata/mcp and testdata/mcp2).
var (
	// HeldOut3 has 25 servers. Its queries were written blind (without
	// reading the ranking code, its lexicon or the other query sets) and
	// are meant to be judged once.
	HeldOut3 = Set{dir: "testdata/mcp3", queries: "heldout3"}
	// HeldOut4 has 30 servers. Its queries were written blind (without
	// reading the ranking code, its lexicons or the other query sets, and
	// without running the search on them). Split "dev" (two ids in three)
	// may be looked at while ranking changes are made; "final" (every
	// third id) is judged once.
	HeldOut4 = Set{dir: "testdata/mcp4", queries: "heldout4"}
	// HeldOut5 has 31 servers. Its queries were written before any
	// ranking change they judge. Split "dev" (two ids in three) may be
	// looked at and tuned on; "final" (every third id) is judged once,
	// after the ranking changes, and never tuned on.
	HeldOut5 = Set{dir: "testdata/mcp5", queries: "heldout5"}
)

// Servers returns the set's servers sorted by name.
func (s Set) Servers() ([]Server, error) { return serversOf(blind, s.dir) }

// Docs returns the set's tools as search documents named
// mcp__server__tool, servers in name order.
func (s Set) Docs() ([]toolsearch.Doc, error) { return docsFrom(s.Servers()) }

// Queries returns the set's queries over Docs.
func (s Set) Queries() ([]Query, error) { return heldOutQueries(blind, s.queries) }

// heldOutQueries reads the queries of the held-out set name from
// testdata/<name>.json in fsys.
func heldOutQueries(fsys fs.FS, name string) ([]Query, error) {
	file := "testdata/" + name + ".json"
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, fmt.Errorf("read %s queries: %w", name, err)
	}
	var qs []Query
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, fmt.Errorf("decode %s: %w", file, err)
	}
	return qs, nil
}

// serversOf reads dir/servers.json and dir/<server>.json from fsys: a
// corpus of MCP servers (every set's loader).
func serversOf(fsys fs.FS, dir string) ([]Server, error) {
	var meta map[string]struct {
		Description string `json:"description"`
	}
	b, err := fs.ReadFile(fsys, dir+"/servers.json")
	if err != nil {
		return nil, fmt.Errorf("read %s/servers.json: %w", dir, err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("decode %s/servers.json: %w", dir, err)
	}
	names, err := fs.Glob(fsys, dir+"/*.json")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []Server
	for _, p := range names {
		name := strings.TrimSuffix(path.Base(p), ".json")
		if name == "servers" {
			continue
		}
		raw, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		var list struct {
			Tools []Tool `json:"tools"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p, err)
		}
		out = append(out, Server{Name: name, Description: meta[name].Description, Raw: raw, Tools: list.Tools})
	}
	return out, nil
}
