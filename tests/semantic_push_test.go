package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/internal/registrytest"
	"github.com/toolintent/engine/wire"
)

// embeddedRegistryFile writes the default registry, same version, with
// fixed 4-dimensional embeddings on its four deferred defaults, and
// returns its path.
func embeddedRegistryFile(t *testing.T) string {
	t.Helper()
	data := registrytest.DefaultWithEmbeddings(t, map[string][]float32{
		"playwright_browser": {1, 0, 0, 0},
		"enter_plan_mode":    {0, 1, 0, 0},
		"exit_plan_mode":     {0, 0.8, 0.2, 0},
		"send_message":       {0, 0, 0.1, 1},
	})
	path := filepath.Join(t.TempDir(), "embedded.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The engine binary with --registry-kv. Embeddings added to the
// registry in force, under the same version, are a registry change and no
// contract change: registry diff lists them under embeddings with no
// changed tool, prefix or checkpoint loss; once pushed, a query vector
// finds the nearest tool for a query whose words match none, while an
// existing session keeps its tools prefix and contract hash and its
// checkpoint still resumes.
func TestSemanticSearchRegistryPush(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir, "--registry-kv")
	ctx := context.Background()
	c := p.Client("web")
	gc := p.GoClient("web")
	on := true
	if _, err := c.Append(ctx, "sem", nil, events.ToolsToggled{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: "sem"}); err != nil {
		t.Fatal(err)
	}
	// Before: the registry has no embeddings; a vector is unused, said so.
	vec := []float32{0.05, 0, 0.2, 1}
	r, err := gc.TurnDiscover(ctx, client.DiscoverRequest{Session: "sem", Input: json.RawMessage(`{"query":"blorft zmiv quuxify"}`), QueryVector: vec})
	if err != nil || len(r.Loaded) != 0 || !strings.Contains(r.Note, "this registry carries no tool embeddings") {
		t.Fatalf("vector before embeddings: %+v, %v", r, err)
	}
	if _, err := c.Discover(ctx, "sem", "", "send_message"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndTurn(ctx, "sem"); err != nil {
		t.Fatal(err)
	}
	before, err := c.Dispatch(ctx, "sem", "")
	if err != nil {
		t.Fatal(err)
	}

	file := embeddedRegistryFile(t)
	out, err := p.runCLI(t, "registry", "diff", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var imp wire.RegistryImpact
	if err := json.Unmarshal([]byte(out), &imp); err != nil {
		t.Fatalf("registry diff --json: %v\n%s", err, out)
	}
	d := imp.Diff
	if !slices.Equal(d.Embeddings, []string{"playwright_browser", "enter_plan_mode", "exit_plan_mode", "send_message"}) ||
		d.Changed != nil || d.AllHashesChange || d.DefaultsChange || len(imp.PrefixChanged) != 0 || imp.Checkpoints != 1 || len(imp.CheckpointLosses) != 0 {
		t.Fatalf("registry diff of embeddings only = %+v", imp)
	}
	// The summary names them on its tools line.
	summary, err := p.runCLI(t, "registry", "diff", file)
	if err != nil || !strings.Contains(summary, "tools: +0 -0 ~0   embeddings changed: playwright_browser, enter_plan_mode, exit_plan_mode, send_message (search only, no contract change)\n") {
		t.Errorf("registry diff summary: %v\n%s", err, summary)
	}

	if out, err := pushRegistry(file, p.NATSURL, p.DataDir); err != nil {
		t.Fatalf("registry push: %v\n%s", err, out)
	}
	// The version is the same: the engine serves the pushed file once a
	// new turn's query vector ranks by it.
	attempt := 0
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		attempt++
		s := fmt.Sprintf("probe-%d", attempt)
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: &on}); err != nil {
			return err
		}
		if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s}); err != nil {
			return err
		}
		r, err := gc.TurnDiscover(ctx, client.DiscoverRequest{Session: s, Input: json.RawMessage(`{"query":"blorft zmiv quuxify"}`), QueryVector: vec})
		if err != nil {
			return err
		}
		if !slices.Equal(r.Loaded, []string{"send_message"}) {
			return fmt.Errorf("query vector loaded %v, note %q; want send_message", r.Loaded, r.Note)
		}
		return nil
	})
	// A vector of another dimension is refused, naming both.
	_, err = gc.TurnDiscover(ctx, client.DiscoverRequest{Session: fmt.Sprintf("probe-%d", attempt), Input: json.RawMessage(`{"query":"x"}`), QueryVector: []float32{1, 2}})
	if err == nil || !strings.Contains(err.Error(), "query_vector has 2 numbers, but this registry's tool embeddings have 4") {
		t.Errorf("vector of 2 numbers: %v", err)
	}

	after, err := c.Dispatch(ctx, "sem", "")
	if err != nil {
		t.Fatal(err)
	}
	if after.PrefixHash != before.PrefixHash || after.ContractHash != before.ContractHash {
		t.Errorf("embeddings changed the session's tools: prefix %s -> %s, contract %s -> %s", before.PrefixHash, after.PrefixHash, before.ContractHash, after.ContractHash)
	}
	res, err := c.Resume(ctx, wire.ResumeRequest{Session: "sem"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Outcome.OK || !slices.Contains(res.Outcome.Restored, "send_message") {
		t.Errorf("resume after adding embeddings = %+v, want send_message restored", res.Outcome)
	}
}
