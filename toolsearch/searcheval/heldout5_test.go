package searcheval

import (
	"fmt"
	"testing"
)

// TestHeldOut5Loads checks the fifth blind set's shape only: every
// server file parses and is listed in servers.json with its tool count,
// no server name is already in mcp, mcp2, mcp3 or mcp4, tool names are unique,
// every schema is a JSON object, ids are unique m001, m002, ... with
// every third one in split "final" and the rest "dev", every kind is one
// of the five, and every label names an mcp5 tool. It says nothing about
// ranking quality.
func TestHeldOut5Loads(t *testing.T) {
	servers, err := HeldOut5.Servers()
	if err != nil {
		t.Fatal(err)
	}
	names := checkServers(t, blind, "testdata/mcp5", servers, Servers, HeldOutServers, HeldOut3.Servers, HeldOut4.Servers)
	docs, err := HeldOut5.Docs()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(names) {
		t.Fatalf("%d docs for %d tools", len(docs), len(names))
	}
	qs, err := HeldOut5.Queries()
	if err != nil {
		t.Fatal(err)
	}
	perKind := map[string]int{}
	for i, q := range qs {
		split := "dev"
		if (i+1)%3 == 0 {
			split = "final"
		}
		if id := fmt.Sprintf("m%03d", i+1); q.ID != id || q.Split != split || q.Query == "" {
			t.Errorf("query %+v: want id %s, split %s and a text", q, id, split)
		}
		perKind[q.Kind]++
		if len(q.Relevant) == 0 {
			t.Errorf("query %s %q has no relevant tool", q.ID, q.Query)
		}
		seen := map[string]bool{}
		for _, r := range q.Relevant {
			if !names[r] || seen[r] {
				t.Errorf("query %s %q: label %s is not an mcp5 tool or is listed twice", q.ID, q.Query, r)
			}
			seen[r] = true
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
