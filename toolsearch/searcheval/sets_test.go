package searcheval

import (
	"encoding/json"
	"io/fs"
	"testing"
)

// checkServers checks the shape of a set's servers: every server
// file parses and is listed in dir/servers.json with its tool count, no
// server name is one of an earlier set's, tool names are unique, and
// every schema is a JSON object and every tool has a description. It
// returns the set's tool names (mcp__server__tool).
func checkServers(t *testing.T, fsys fs.FS, dir string, servers []Server, earlier ...func() ([]Server, error)) map[string]bool {
	t.Helper()
	var meta map[string]struct {
		Tools int `json:"tools"`
	}
	b, err := fs.ReadFile(fsys, dir+"/servers.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(servers) != len(meta) {
		t.Fatalf("%d server files, servers.json lists %d", len(servers), len(meta))
	}
	taken := map[string]bool{}
	for _, load := range earlier {
		old, err := load()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range old {
			taken[s.Name] = true
		}
	}
	names := map[string]bool{}
	for _, s := range servers {
		if taken[s.Name] {
			t.Errorf("server %s is already in an earlier set", s.Name)
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
	return names
}
