package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// changedRegistryFile writes the default registry with tool's description
// changed and the version set to version, and returns its path.
func changedRegistryFile(t *testing.T, tool, version string) string {
	t.Helper()
	var file map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &file); err != nil {
		t.Fatal(err)
	}
	file["version"] = version
	for _, x := range file["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == tool {
			m["description"] = m["description"].(string) + " Now also supports priorities."
		}
	}
	data, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pushRegistry runs `engine registry push FILE --nats URL --data DIR`
// (the engine's NATS users are in its data directory).
func pushRegistry(file, natsURL, dataDir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, engineBin, "registry", "push", file, "--nats", natsURL, "--data", dataDir).CombinedOutput()
	return string(out), err
}

// With --registry-kv, a registry pushed to KV reaches the
// running engine without a restart (versioned in the contract hash), the
// prefix change is attributed to the registry, resume refuses the changed
// contract, and the registry survives a restart.
func TestRegistryFromKVLive(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir, "--registry-kv")
	ctx := context.Background()
	c := p.Client("web")
	on := true
	if _, err := c.Append(ctx, "r1", nil, events.ToolsToggled{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Discover(ctx, "r1", "", "send_message"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndTurn(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	before, err := c.Dispatch(ctx, "r1", "")
	if err != nil {
		t.Fatal(err)
	}
	const version = "builtin-2026.12.1-kv2"
	out, err := pushRegistry(changedRegistryFile(t, "send_message", version), p.NATSURL, p.DataDir)
	if err != nil || !strings.Contains(out, version) {
		t.Fatalf("registry push: %v\n%s", err, out)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		v, err := c.Resolve(ctx, wire.ResolveRequest{Session: "r1"})
		if err != nil {
			return err
		}
		if v.RegistryVersion != version {
			return fmt.Errorf("registry version %s, want %s", v.RegistryVersion, version)
		}
		return nil
	})
	after, err := c.Dispatch(ctx, "r1", "")
	if err != nil {
		t.Fatal(err)
	}
	// send_message is deferred and loaded: in the default native mode its
	// definition is cached where its tool_reference sits, not in the tools
	// prefix (docs/semantics.md#prompt-cache), so the references change.
	if after.ReferencesHash == before.ReferencesHash || after.PrefixHash != before.PrefixHash || after.ContractHash == before.ContractHash {
		t.Fatal("the changed send_message schema did not change the referenced definitions and the contract alone")
	}
	m := scrape(t, p.HTTPURL)
	if m[`engine_tool_prefix_changes_total{cause="registry"}`] != 1 {
		t.Fatalf("prefix changes by registry = %v, want 1", m[`engine_tool_prefix_changes_total{cause="registry"}`])
	}
	r, err := c.Resume(ctx, wire.ResumeRequest{Session: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome.OK || len(r.Outcome.Restored) != 0 || !strings.Contains(r.Outcome.Reason, "send_message") {
		t.Fatalf("resume after the registry change = %+v, want a refusal naming send_message", r.Outcome)
	}
	// A bad registry pushed to KV is refused by push itself.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version":"x","tools":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := pushRegistry(bad, p.NATSURL, p.DataDir); err == nil || !strings.Contains(out, "bad.json") {
		t.Fatalf("pushing an invalid registry: %v\n%s; want a refusal naming the file", err, out)
	}
	p.Stop(t)
	p2 := startEngine(t, dir, "--registry-kv")
	v, err := p2.Client("web").Resolve(ctx, wire.ResolveRequest{Session: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if v.RegistryVersion != version {
		t.Fatalf("after restart the registry is %s, want %s from KV", v.RegistryVersion, version)
	}
}
