package searcheval

import (
	"embed"

	"github.com/toolintent/engine/toolsearch"
)

// files4 holds the fourth, blind evaluation set: testdata/mcp4
// and testdata/heldout4.json. It is embedded apart from the other sets so
// that their loaders stay as they are.
//
//go:embed testdata/mcp4/*.json testdata/heldout4.json
var files4 embed.FS

// HeldOut4Servers returns the servers of the fourth held-out set
// (testdata/mcp4) sorted by name: 30 servers none of testdata/mcp,
// testdata/mcp2 and testdata/mcp3 has.
func HeldOut4Servers() ([]Server, error) { return serversOf(files4, "testdata/mcp4") }

// HeldOut4Docs returns the fourth held-out set's tools as search
// documents named mcp__server__tool, servers in name order;
// HeldOut4Queries are asked over them alone.
func HeldOut4Docs() ([]toolsearch.Doc, error) {
	return docsFrom(HeldOut4Servers())
}

// HeldOut4Queries returns the queries of testdata/heldout4.json over
// HeldOut4Docs: written blind (without reading the ranking code, its
// lexicons or the other query sets, and without running the search on
// them). Split "dev" (two ids in three) may be looked at while ranking
// changes are made; "final" (every third id) is judged once.
func HeldOut4Queries() ([]Query, error) {
	return heldOutQueries(files4, "heldout4")
}
