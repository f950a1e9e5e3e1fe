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

// files3 holds the third, blind evaluation set: testdata/mcp3
// and testdata/heldout3.json. It is embedded apart from files so that the
// loaders of the other sets stay as they are.
//
//go:embed testdata/mcp3/*.json testdata/heldout3.json
var files3 embed.FS

// HeldOut3Servers returns the servers of the third held-out set
// (testdata/mcp3) sorted by name: 25 servers neither testdata/mcp nor
// testdata/mcp2 has.
func HeldOut3Servers() ([]Server, error) { return serversOf(files3, "testdata/mcp3") }

// HeldOut3Docs returns the third held-out set's tools as search documents
// named mcp__server__tool, servers in name order; HeldOut3Queries are
// asked over them alone.
func HeldOut3Docs() ([]toolsearch.Doc, error) {
	return docsFrom(HeldOut3Servers())
}

// HeldOut3Queries returns the queries of testdata/heldout3.json over
// HeldOut3Docs: written blind (without reading the ranking code, its
// lexicon or the other query sets) and meant to be judged once.
func HeldOut3Queries() ([]Query, error) {
	return heldOutQueries(files3, "heldout3")
}

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
