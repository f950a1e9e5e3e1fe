package searcheval

import (
	"encoding/json"
	"testing"
)

// TestHeldOut3Loads checks the blind set's shape only (#27): every server
// file parses and is listed in servers.json with its tool count, tool
// names are unique, every schema is a JSON object, and every query has a
// known kind, at least one label, and only labels naming mcp3 tools. It
// says nothing about ranking quality.
func TestHeldOut3Loads(t *testing.T) {
	servers, err := HeldOut3Servers()
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]struct {
		Tools int `json:"tools"`
	}
	b, err := files3.ReadFile("testdata/mcp3/servers.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(servers) != len(meta) {
		t.Fatalf("%d server files, servers.json lists %d", len(servers), len(meta))
	}
	old, err := Servers()
	if err != nil {
		t.Fatal(err)
	}
	old2, err := HeldOutServers()
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string]bool{}
	for _, s := range append(old, old2...) {
		taken[s.Name] = true
	}
	names := map[string]bool{}
	for _, s := range servers {
		if taken[s.Name] {
			t.Errorf("server %s is already in mcp or mcp2", s.Name)
		}
		if m, ok := meta[s.Name]; !ok || m.Tools != len(s.Tools) || s.Description == "" {
			t.Errorf("server %s: servers.json entry %+v, %d tools in file", s.Name, m, len(s.Tools))
		}
		for _, tool := range s.Tools {
			n := ToolName(s.Name, tool.Name)
			if names[n] {
				t.Errorf("duplicate tool %s", n)
			}
			names[n] = true
			var schema struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" || tool.Description == "" {
				t.Errorf("tool %s: schema type %q (%v), description %q", n, schema.Type, err, tool.Description)
			}
		}
	}
	docs, err := HeldOut3Docs()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(names) {
		t.Fatalf("%d docs for %d tools", len(docs), len(names))
	}
	qs, err := HeldOut3Queries()
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
