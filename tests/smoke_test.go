package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
)

// R27: the binary serves with the embedded server by default, and a
// graceful stop followed by a restart on the same data keeps every event.
func TestServeRestartKeepsEvents(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	ctx := context.Background()
	on := true
	res, err := p.Client("web").Append(ctx, "s1", nil, events.ToolsToggled{Enabled: &on}, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(t)
	p2 := startEngine(t, dir)
	v, err := p2.Client("web").Intent(ctx, "s1", res.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if v.Seq != res.LastSeq || len(v.Intent.Disabled) != 1 || v.Intent.Disabled[0] != "bash" {
		t.Fatalf("after restart: %+v, want seq %d with bash disabled", v, res.LastSeq)
	}
	out, err := p2.runCLI(t, "intent", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "disabled    bash") {
		t.Fatalf("engine intent printed:\n%s", out)
	}
}
