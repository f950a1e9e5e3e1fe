package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// turnRegistryFile writes the default registry under another version with
// one more default tool, the registry engine A serves.
func turnRegistryFile(t *testing.T) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = "engine-a.1"
	doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": "only_on_a", "description": "A tool of engine A's registry.", "parameters": map[string]any{"type": "object"}})
	doc["default_tools"] = append(doc["default_tools"].([]any), "only_on_a")
	doc["resident_tools"] = append(doc["resident_tools"].([]any), "only_on_a")
	data, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "registry-a.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func turnSame(t *testing.T, what string, got, want wire.TurnView) {
	t.Helper()
	if got.PrefixHash != want.PrefixHash || !slices.Equal(got.Provider, want.Provider) || got.CatalogText != want.CatalogText ||
		got.Turn != want.Turn || !got.Frozen || got.RegistryVersion != want.RegistryVersion {
		t.Fatalf("%s:\n got turn %d frozen %v registry %s provider %v hash %s\nwant turn %d registry %s provider %v hash %s",
			what, got.Turn, got.Frozen, got.RegistryVersion, got.Provider, got.PrefixHash, want.Turn, want.RegistryVersion, want.Provider, want.PrefixHash)
	}
}

// A turn begun with a profile and an override
// on engine A is served by engine B after A is SIGKILLed: dispatch,
// search, dispatch and end, with prefix hashes byte-identical before and
// after (discovery included), against A's registry, which B does not
// serve, and B's checkpoint holds the discovered tool. Both engines use an
// external NATS server.
func TestTurnSurvivesEngineKill(t *testing.T) {
	ctx := e2eCtx(t)
	srv := natstest.Server(t)
	a := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--registry", turnRegistryFile(t))
	b := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--no-projection")
	ca, cb := a.Client("web"), b.Client("web")
	begin := wire.BeginTurnRequest{Session: "killed", Provider: "anthropic-engine", Profile: "coder", Override: &wire.Override{Kind: intent.OverrideIntent, Intent: intent.Intent{Disabled: []string{"bash"}}}}
	begun, err := ca.BeginTurn(ctx, begin)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(begun.Tools, "bash") || begun.RegistryVersion != "engine-a.1" || !slices.Contains(begun.Catalog, "enter_plan_mode") {
		t.Fatalf("begun on A: tools %v registry %s catalog %v", begun.Tools, begun.RegistryVersion, begun.Catalog)
	}
	before, err := ca.Dispatch(ctx, "killed", "anthropic-engine")
	if err != nil {
		t.Fatal(err)
	}
	turnSame(t, "A's dispatch", before, begun)
	a.Kill()

	after, err := cb.Dispatch(ctx, "killed", "anthropic-engine")
	if err != nil {
		t.Fatal(err)
	}
	turnSame(t, "B's dispatch after A was killed", after, before)
	found, err := cb.Discover(ctx, "killed", "anthropic-engine", "enter_plan_mode")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found.Loaded, []string{"enter_plan_mode"}) {
		t.Fatalf("B's search loaded %v", found.Loaded)
	}
	if got := deferral.PrefixOf(before.Rendering).Compare(found.View.Rendering); got != deferral.PrefixExtended {
		t.Fatalf("the discovery's array against the turn's: %v, want extended", got)
	}
	again, err := cb.Dispatch(ctx, "killed", "anthropic-engine")
	if err != nil {
		t.Fatal(err)
	}
	turnSame(t, "B's dispatch after its search", again, found.View)
	end, err := cb.EndTurn(ctx, "killed")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(end.Checkpoint.Loaded, []string{"enter_plan_mode"}) || end.Checkpoint.ContractHash != begun.ContractHash {
		t.Fatalf("B's checkpoint %+v: want enter_plan_mode under contract %s", end.Checkpoint, begun.ContractHash)
	}
}
