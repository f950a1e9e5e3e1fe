package deferral

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch/searcheval"
)

// shapedRegistries are the differently shaped test registries in testdata/
// next to the default one: tiny descriptions, huge schemas, long prose,
// Chinese descriptions, and MCP-style names (285 tools of 12 servers,
// snake_case, camelCase and API-post-search names, all deferred, with a
// catalog budget high enough to list every name).
var shapedRegistries = []string{"tiny_descriptions.json", "huge_schemas.json", "long_prose.json", "cjk_descriptions.json", "mcp_names.json"}

// loadTestRegistry loads testdata/name.
func loadTestRegistry(t testing.TB, name string) *resolver.Registry {
	t.Helper()
	reg, err := resolver.LoadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("load testdata/%s: %v", name, err)
	}
	return reg
}

// tenK is the 10k-tool shape: the default registry plus the MCP corpus of
// toolsearch/searcheval imported ten times (numbered server names), every
// server deferred, so that the catalog is over its budget and grouped.
var tenK = sync.OnceValues(func() (*resolver.Registry, error) {
	servers, err := searcheval.Servers()
	if err != nil {
		return nil, err
	}
	var in []resolver.MCPServer
	for copyN := 1; copyN <= 10; copyN++ {
		for _, s := range servers {
			name := s.Name
			if copyN > 1 {
				name = fmt.Sprint(s.Name, copyN)
			}
			in = append(in, resolver.MCPServer{Name: name, Description: s.Description, ToolsList: s.Raw})
		}
	}
	data, _, err := resolver.ImportMCP(resolver.DefaultRegistryJSON(), in, resolver.ImportOptions{Version: "test-10k-1"})
	if err != nil {
		return nil, err
	}
	return resolver.Load(data)
})

// tenKRegistry returns the 10k-tool shape or fails the test.
func tenKRegistry(t testing.TB) *resolver.Registry {
	t.Helper()
	reg, err := tenK()
	if err != nil {
		t.Fatalf("10k registry: %v", err)
	}
	return reg
}

// allRegistries returns the default registry and the shaped ones, by name.
func allRegistries(t testing.TB) map[string]*resolver.Registry {
	t.Helper()
	regs := map[string]*resolver.Registry{"default": resolver.Default()}
	for _, name := range shapedRegistries {
		regs[name] = loadTestRegistry(t, name)
	}
	return regs
}

// resolve resolves req against reg or fails the test.
func resolve(t testing.TB, reg *resolver.Registry, req resolver.Request) *resolver.Resolution {
	t.Helper()
	res, err := reg.Resolve(req)
	if err != nil {
		t.Fatalf("resolve %+v: %v", req, err)
	}
	return res
}

// defaultSession is the default session's request: {enabled: true}, no
// profile, no override.
func defaultSession() resolver.Request {
	on := true
	return resolver.Request{Session: intent.Intent{Enabled: &on}}
}

// presetSession is a session that chose the named preset.
func presetSession(preset string) resolver.Request {
	on := true
	return resolver.Request{Session: intent.Intent{Enabled: &on, Preset: preset}}
}

// names returns the tool names in order.
func names(tools []resolver.Tool) []string {
	out := make([]string, len(tools))
	for i := range tools {
		out[i] = tools[i].Name
	}
	return out
}

// mustCount counts real tokens or fails the test.
func mustCount(t testing.TB, text string) int {
	t.Helper()
	n, err := Count(text)
	if err != nil {
		t.Fatalf("count tokens: %v", err)
	}
	return n
}
