package resolver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func bp(v bool) *bool { return &v }

var (
	yes = bp(true)
	no  = bp(false)
)

func mustLoadFile(t testing.TB, name string) *Registry {
	t.Helper()
	r, err := LoadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return r
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toolNames(tools []Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func eqNames(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return slices.Equal(a, b)
}
