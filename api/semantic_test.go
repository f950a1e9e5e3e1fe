package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/registrytest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// embeddedRegistryJSON is the default registry file with fixed
// 4-dimensional embeddings on its four deferred defaults.
func embeddedRegistryJSON(t *testing.T) []byte {
	return registrytest.DefaultWithEmbeddings(t, map[string][]float32{
		"playwright_browser": {1, 0, 0, 0},
		"enter_plan_mode":    {0, 1, 0, 0},
		"exit_plan_mode":     {0, 0.8, 0.2, 0},
		"send_message":       {0, 0, 0.1, 1},
	})
}

// discoverVec is turn.discover with the model's input and a query vector.
func discoverVec(t *testing.T, c *Client, s string, input string, vec []float32) (wire.DiscoverReply, error) {
	t.Helper()
	return call[wire.DiscoverReply](ctxT(t), c, wire.OpDiscover, &wire.DiscoverRequest{Session: s, Input: json.RawMessage(input), Provider: service.ProviderAnthropicEngine, QueryVector: vec})
}

// Turn.discover takes a query vector beside the model's input, on
// both transports: with a registry that carries tool embeddings, a query
// whose words match no tool loads the tool nearest by vector, the same
// way each time; a vector of another dimension is 400 naming both.
func TestToolSearchQueryVector(t *testing.T) {
	e := newEnv(t, Config{})
	reg, err := resolver.Load(embeddedRegistryJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	e.eng.SetRegistry(reg)
	vec := []float32{0.05, 0, 0.2, 1} // the query's embedding: nearest to send_message
	var outputs [][]byte
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		for _, s := range []string{"vec-a-" + t.Name()[len(t.Name())-4:], "vec-b-" + t.Name()[len(t.Name())-4:]} {
			if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s, Provider: service.ProviderAnthropicEngine}); err != nil {
				t.Fatal(err)
			}
			r, err := discoverVec(t, c, s, `{"query":"blorft zmiv quuxify"}`, vec)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Loaded, []string{"send_message"}) || r.View.Provider[len(r.View.Provider)-1] != "send_message" {
				t.Fatalf("query vector: loaded %v, provider %v; want send_message", r.Loaded, r.View.Provider)
			}
			outputs = append(outputs, r.Output)
		}
		s := "vec-c-" + t.Name()[len(t.Name())-4:]
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s, Provider: service.ProviderAnthropicEngine}); err != nil {
			t.Fatal(err)
		}
		_, err := discoverVec(t, c, s, `{"query":"blorft zmiv quuxify"}`, []float32{1, 0, 0})
		ae := asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
		if !strings.Contains(ae.Message, "query_vector has 3 numbers, but this registry's tool embeddings have 4") {
			t.Errorf("dimension mismatch: %q does not name both dimensions", ae.Message)
		}
		if d, err := c.Dispatch(ctx, s, service.ProviderAnthropicEngine); err != nil || slices.Contains(d.Provider, "send_message") {
			t.Errorf("a refused search loaded tools: %v, %v", d.Provider, err)
		}
		// A query that is exactly a tool's name ranks it first, with or
		// without a vector, and the reply encodes (its score was +Inf,
		// which JSON cannot carry: a 500 before).
		for _, v := range [][]float32{nil, vec} {
			r, err := discoverVec(t, c, s, `{"query":"enter_plan_mode"}`, v)
			if err != nil || len(r.Matches) == 0 || r.Matches[0].Name != "enter_plan_mode" || len(r.Tools) == 0 || r.Tools[0].Name != "enter_plan_mode" {
				t.Errorf("exact name, vector %v: %+v, %v", v, r.Matches, err)
			}
		}
		// The model's own input cannot carry a vector.
		_, err = discoverVec(t, c, s, `{"query":"x","query_vector":[0,0,0,1]}`, nil)
		asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
	})
	for _, o := range outputs[1:] {
		if !bytes.Equal(o, outputs[0]) {
			t.Errorf("outputs differ across sessions and transports:\n%s\n%s", outputs[0], o)
		}
	}
}

// A query vector against a registry without tool embeddings is not
// an error: the keyword result, with a note, on both transports.
func TestToolSearchQueryVectorWithoutEmbeddings(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		s := "novec-" + t.Name()[len(t.Name())-4:]
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s, Provider: service.ProviderAnthropicEngine}); err != nil {
			t.Fatal(err)
		}
		r, err := discoverVec(t, c, s, `{"query":"take a screenshot of the web page","max_results":1}`, []float32{0, 0, 0, 1})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Loaded, []string{"playwright_browser"}) || !strings.Contains(r.Note, "this registry carries no tool embeddings; ranked by keywords") {
			t.Errorf("loaded %v note %q; want the keyword result and a note", r.Loaded, r.Note)
		}
	})
}

// Registry-diff of a candidate that only adds embeddings names the
// tools in diff.embeddings and changes no contract, tools prefix or
// checkpoint, on both transports.
func TestRegistryDiffEmbeddings(t *testing.T) {
	e := newEnv(t, Config{})
	cand := embeddedRegistryJSON(t)
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		s := "diff-" + t.Name()[len(t.Name())-4:]
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
			t.Fatal(err)
		}
		imp, err := c.RegistryDiff(ctx, cand)
		if err != nil {
			t.Fatal(err)
		}
		d := imp.Diff
		if !slices.Equal(d.Embeddings, []string{"playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}) {
			t.Errorf("diff.embeddings = %v", d.Embeddings)
		}
		if d.Changed != nil || d.Added != nil || d.Removed != nil || d.AllHashesChange || d.DefaultsChange || len(imp.PrefixChanged) != 0 || len(imp.CheckpointLosses) != 0 {
			t.Errorf("an embedding-only candidate changes contracts: %+v", imp)
		}
	})
}
