package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// The binary serves with the embedded server by default, and a
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

// A second engine on the same server (by --nats URL) runs without
// its own projection and serves the views the first one keeps.
func TestSecondEngineWithoutProjection(t *testing.T) {
	a := startEngine(t, t.TempDir())
	cr, err := jetstream.ReadCredentials(a.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	b := startEngine(t, t.TempDir(), "--nats", a.NATSURL, "--nats-user", cr.Engine.User, "--nats-password", cr.Engine.Password, "--no-projection")
	ctx := context.Background()
	res, err := b.Client("tui").Append(ctx, "shared", nil, events.PresetChosen{Preset: "coding"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*engineProc{a, b} {
		v, err := p.Client("tui").Intent(ctx, "shared", res.LastSeq)
		if err != nil {
			t.Fatal(err)
		}
		if v.Intent.Preset != "coding" {
			t.Fatalf("%s reads preset %q, want coding", p.HTTPURL, v.Intent.Preset)
		}
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		s, err := b.Client("tui").Sessions(ctx)
		if err != nil || len(s) != 1 {
			return fmt.Errorf("sessions via b = %v, %v; want the one view a's projection wrote", s, err)
		}
		return nil
	})
}
