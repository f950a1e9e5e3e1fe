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
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// `engine turn call-check SESSION TOOL` against the built
// binary: outside a turn it fails (no_turn); in a turn a tool of the turn
// prints callable true with the allow decision of the turn's channel (the
// one that began it); after a mid-turn disable it prints callable false (disabled) and still exits 0
// (a refusal is an answer, not an error); --json is the API's reply.
func TestCLITurnCallCheck(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gc := p.GoClient("web")
	if _, err := gc.Append(ctx, client.AppendRequest{Session: "cc1", Commands: []client.Command{client.Preset("minimal")}}); err != nil {
		t.Fatal(err)
	}
	if out, err := p.runCLI(t, "turn", "call-check", "cc1", "bash"); err == nil || !strings.Contains(err.Error(), "turn") {
		t.Fatalf("call-check without a turn: %v\n%s", err, out)
	}
	if _, err := gc.TurnBegin(ctx, client.BeginTurnRequest{Session: "cc1"}); err != nil {
		t.Fatal(err)
	}
	out, err := p.runCLI(t, "turn", "call-check", "cc1", "bash")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "callable    true (callable)") || !strings.Contains(out, "decision    allow for channel web") {
		t.Fatalf("call-check bash in the turn:\n%s", out)
	}
	if _, err := gc.Append(ctx, client.AppendRequest{Session: "cc1", Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
		t.Fatal(err)
	}
	out, err = p.runCLI(t, "turn", "call-check", "cc1", "bash")
	if err != nil {
		t.Fatalf("a refused call must exit 0: %v", err)
	}
	if !strings.Contains(out, "callable    false (disabled)") {
		t.Fatalf("call-check bash after the disable:\n%s", out)
	}
	out, err = p.runCLI(t, "turn", "call-check", "cc1", "bash", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r wire.CallCheckReply
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Callable || r.Reason != "disabled" || r.Channel != "web" || r.Tool == nil {
		t.Fatalf("call-check --json = %+v (%v)\n%s", r, err, out)
	}
}

// `engine registry diff FILE` against the built binary prints
// the five-line summary of a candidate that edits one tool, and its
// numbers are the --json reply's: the session that loaded and checkpointed
// the tool is a prefix change and a checkpoint loss, the one without it
// neither. Nothing is pushed: the engine still serves the old version.
func TestCLIRegistryDiff(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gc := p.GoClient("web")
	if _, err := gc.Append(ctx, client.AppendRequest{Session: "with", Commands: []client.Command{client.Enable()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.TurnBegin(ctx, client.BeginTurnRequest{Session: "with"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.TurnDiscover(ctx, client.DiscoverRequest{Session: "with", Names: []string{"send_message"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.TurnEnd(ctx, client.TurnRequest{Session: "with"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Append(ctx, client.AppendRequest{Session: "without", Commands: []client.Command{client.Preset("minimal")}}); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		l, err := gc.Sessions(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(l.Sessions, "with") || !slices.Contains(l.Sessions, "without") {
			return fmt.Errorf("sessions %v", l.Sessions)
		}
		return nil
	})
	var reg map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &reg); err != nil {
		t.Fatal(err)
	}
	from := reg["version"].(string)
	reg["version"] = "cli-diff-2"
	for _, x := range reg["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == "send_message" {
			m["description"] = "Sends a message (edited)."
		}
	}
	b, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cand.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := p.runCLI(t, "registry", "diff", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"registry " + from + " -> cli-diff-2 (every contract hash changes)\n",
		"tools: +0 -0 ~1   changed: send_message (description)\n",
		"presets whose expansion changes: ",
		"sessions: 2 examined, 1 would see a different tools prefix (prompt-cache misses)\n",
		"checkpoints: 1 of 1 would lose tools on resume: with (send_message)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("registry diff lacks %q:\n%s", want, out)
		}
	}
	out, err = p.runCLI(t, "registry", "diff", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var imp wire.RegistryImpact
	if err := json.Unmarshal([]byte(out), &imp); err != nil {
		t.Fatalf("registry diff --json: %v\n%s", err, out)
	}
	if imp.Sessions != 2 || !slices.Equal(imp.PrefixChanged, []string{"with"}) || len(imp.CheckpointLosses) != 1 || imp.CheckpointLosses[0].Session != "with" {
		t.Fatalf("registry diff --json = %+v", imp)
	}
	info, err := gc.Registry(ctx)
	if err != nil || info.Version != from {
		t.Fatalf("after a diff the engine serves %q (%v), want %q", info.Version, err, from)
	}
}
