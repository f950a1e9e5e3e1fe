// Package registrytest builds registry files for the tests of several
// packages (resolver's callers: deferral, api, the built binary's tests).
package registrytest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/toolintent/engine/resolver"
)

// DefaultWithEmbeddings returns the default registry file, same version,
// with vecs as the embeddings of the tools they name (the
// semantic path); tools vecs does not name carry none.
func DefaultWithEmbeddings(t testing.TB, vecs map[string][]float32) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(resolver.DefaultRegistryJSON()))
	dec.UseNumber() // numbers as written: the file stays the default's
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, tv := range doc["tools"].([]any) {
		tool := tv.(map[string]any)
		if v, ok := vecs[tool["name"].(string)]; ok {
			tool["embedding"] = v
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
