package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/resolver"
)

// `engine registry push` prints the impact summary first and
// refuses above --max-checkpoint-losses (exit non-zero, nothing stored:
// the engine keeps its version); with --force it pushes.
func TestCLIRegistryPushThreshold(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir, "--registry-kv")
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
	var reg map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &reg); err != nil {
		t.Fatal(err)
	}
	from := reg["version"].(string)
	reg["version"] = "push-impact-2"
	for _, x := range reg["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == "send_message" {
			m["description"] = "Sends a message (edited)."
		}
	}
	b, _ := json.Marshal(reg)
	file := filepath.Join(t.TempDir(), "cand.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	push := func(extra ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, engineBin, append([]string{"registry", "push", file, "--nats", p.NATSURL, "--data", dir}, extra...)...).CombinedOutput()
		return string(out), err
	}
	// The first push sees the checkpoint just stored: the summary waits
	// for the views to fold the log up to its last event.
	out, err := push("--max-checkpoint-losses", "0")
	if err == nil || !strings.Contains(out, "registry "+from+" -> push-impact-2") || !strings.Contains(out, "checkpoints: 1 of 1 would lose tools on resume: with (send_message)") ||
		!strings.Contains(out, "refused") || !strings.Contains(out, "--force") {
		t.Fatalf("push above the threshold: err %v\n%s", err, out)
	}
	if info, err := gc.Registry(ctx); err != nil || info.Version != from {
		t.Fatalf("after a refused push the engine serves %q (%v)", info.Version, err)
	}
	out, err = push("--max-checkpoint-losses", "0", "--force")
	if err != nil || !strings.Contains(out, "stored registry push-impact-2") {
		t.Fatalf("forced push: %v\n%s", err, out)
	}
}
