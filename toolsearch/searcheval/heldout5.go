package searcheval

import (
	"embed"

	"github.com/toolintent/engine/toolsearch"
)

// files5 holds the fifth, blind evaluation set: testdata/mcp5 and
// testdata/heldout5.json. It is embedded apart from the other sets so
// that their loaders stay as they are.
//
//go:embed testdata/mcp5/*.json testdata/heldout5.json
var files5 embed.FS

// HeldOut5Servers returns the servers of the fifth held-out set
// (testdata/mcp5) sorted by name: 31 servers none of the earlier sets
// has.
func HeldOut5Servers() ([]Server, error) { return serversOf(files5, "testdata/mcp5") }

// HeldOut5Docs returns the fifth held-out set's tools as search documents
// named mcp__server__tool, servers in name order; HeldOut5Queries are
// asked over them alone.
func HeldOut5Docs() ([]toolsearch.Doc, error) {
	return docsFrom(HeldOut5Servers())
}

// HeldOut5Queries returns the queries of testdata/heldout5.json over
// HeldOut5Docs, written before any ranking change they judge. Split "dev"
// (two ids in three) may be looked at and tuned on; "final" (every third
// id) is judged once, after the ranking changes, and never tuned on.
func HeldOut5Queries() ([]Query, error) {
	return heldOutQueries(files5, "heldout5")
}
