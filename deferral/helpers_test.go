package deferral

import (
	"path/filepath"
	"testing"

	"github.com/toolintent/engine/resolver"
)

// shapedRegistries are the differently shaped test registries in testdata/
// (tiny descriptions, huge schemas, long prose) next to the default one.
var shapedRegistries = []string{"tiny_descriptions.json", "huge_schemas.json", "long_prose.json"}

// loadTestRegistry loads testdata/name.
func loadTestRegistry(t testing.TB, name string) *resolver.Registry {
	t.Helper()
	reg, err := resolver.LoadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("load testdata/%s: %v", name, err)
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
	return resolver.Request{Session: resolver.Intent{Enabled: &on}}
}

// presetSession is a session that chose the named preset.
func presetSession(preset string) resolver.Request {
	on := true
	return resolver.Request{Session: resolver.Intent{Enabled: &on, Preset: preset}}
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
