package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// End to end, with the built binary: `engine registry import`
// turns the MCP corpus into a registry, `engine serve` runs on it, a
// session disables one server by pattern, and tool_search finds tools by
// query and regex in the openai-native mode without changing the array;
// the engine-catalog view lists servers, not 1,000 names.
func TestMCPScaleBinary(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "mcp.json")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	imp := exec.CommandContext(ctx, engineBin, "registry", "import", filepath.Join("..", "toolsearch", "searcheval", "testdata", "mcp"), "-o", reg)
	var stderr bytes.Buffer
	imp.Stderr = &stderr
	if err := imp.Run(); err != nil {
		t.Fatalf("registry import: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "imported 1065 tools from 88 servers") {
		t.Fatalf("import report: %s", stderr.String())
	}

	p := startEngine(t, filepath.Join(dir, "data"), "--registry", reg)
	c := p.Client("web")
	yes := true
	if _, err := c.Append(ctx, "mcp1", nil, events.ToolsToggled{Enabled: &yes}, events.ToolDisabled{Name: "mcp__jira__*"}); err != nil {
		t.Fatal(err)
	}
	v, err := c.Resolve(ctx, wire.ResolveRequest{Session: "mcp1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.CatalogText, "too many to name") || strings.Contains(v.CatalogText, "- jira (") || v.Lists.Catalog < 1000 {
		t.Fatalf("engine catalog of %d names:\n%.400s", v.Lists.Catalog, v.CatalogText)
	}
	begin, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: "mcp1", Provider: "openai-native"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ToolSearch(ctx, "mcp1", "openai-native", json.RawMessage(`{"query":"create an issue in jira","max_results":3}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Loaded {
		if strings.HasPrefix(n, "mcp__jira__") {
			t.Errorf("a disabled server's tool was loaded: %v", r.Loaded)
		}
	}
	r, err = c.ToolSearch(ctx, "mcp1", "openai-native", json.RawMessage(`{"regex":"^mcp__github__create_pull","names":["mcp__jira__getJiraIssue"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Loaded, []string{"mcp__github__create_pull_request", "mcp__github__create_pull_request_review"}) || !slices.Equal(r.NotFound, []string{"mcp__jira__getJiraIssue"}) {
		t.Fatalf("regex search: loaded %v, not found %v", r.Loaded, r.NotFound)
	}
	if !bytes.HasPrefix(r.Output, []byte(`{"type":"tool_search_output","execution":"client","status":"completed","tools":[{"type":"namespace","name":"github"`)) {
		t.Errorf("output %.200s", r.Output)
	}
	if !bytes.Equal(r.View.Rendering, begin.Rendering) {
		t.Errorf("a discovery changed the openai-native array")
	}
}

// Every operation, over HTTP and NATS, on the MCP corpus imported as
// a registry (1,086 tools): each succeeds, a TurnEnded with 10 loaded
// tools checkpoints them in a bounded event, resume after kill -9 of the
// engine restores them, and no reply or event passes its bound
// (scale_matrix_test.go; the 10,000-tool registry runs under the scale
// build tag, see .ci/run).
func TestMCPScaleMatrix(t *testing.T) {
	runScaleMatrix(t, scale1k)
}
