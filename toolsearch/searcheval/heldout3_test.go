package searcheval

import (
	"testing"
)

// TestHeldOut3Loads checks the blind set's shape only: every server
// file parses and is listed in servers.json with its tool count, tool
// names are unique, every schema is a JSON object, and every query has a
// known kind, at least one label, and only labels naming mcp3 tools. It
// says nothing about ranking quality.
func TestHeldOut3Loads(t *testing.T) {
	servers, err := HeldOut3.Servers()
	if err != nil {
		t.Fatal(err)
	}
	names := checkServers(t, blind, "testdata/mcp3", servers, Servers, HeldOutServers)
	docs, err := HeldOut3.Docs()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(names) {
		t.Fatalf("%d docs for %d tools", len(docs), len(names))
	}
	qs, err := HeldOut3.Queries()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	perKind := map[string]int{}
	for _, q := range qs {
		if ids[q.ID] || q.Query == "" || q.Split != "heldout3" {
			t.Errorf("query %+v: duplicate id, empty text or split not heldout3", q)
		}
		ids[q.ID] = true
		perKind[q.Kind]++
		if len(q.Relevant) == 0 {
			t.Errorf("query %s %q has no relevant tool", q.ID, q.Query)
		}
		for _, r := range q.Relevant {
			if !names[r] {
				t.Errorf("query %s %q: label %s is not an mcp3 tool", q.ID, q.Query, r)
			}
		}
	}
	for _, k := range Kinds {
		if perKind[k] == 0 {
			t.Errorf("no %s queries", k)
		}
		delete(perKind, k)
	}
	if len(perKind) != 0 {
		t.Errorf("unknown kinds: %v", perKind)
	}
	t.Logf("%d servers, %d tools, %d queries", len(servers), len(names), len(qs))
}
