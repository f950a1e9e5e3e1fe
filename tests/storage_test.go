package tests

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// runEngine runs an engine subcommand to its end with a deadline and
// returns its combined output and error.
func runEngine(t *testing.T, args ...string) (string, error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, engineBin, args...).CombinedOutput()
	return string(out), err, time.Since(start)
}

// #12 item 1: a second process on a live data directory (serve, rebuild,
// stream repair) is refused with the holder's pid, and the first keeps
// serving; rebuild on a directory without a store and registry push
// without --nats refuse instead of creating an empty store.
func TestDataDirOneOwner(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.Client("owner")
	ctx := context.Background()
	if _, err := c.Append(ctx, "owner-s1", nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatalf("append: %v", err)
	}
	pid := strconv.Itoa(p.cmd.Process.Pid)
	for _, args := range [][]string{
		{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"},
		{"rebuild", "--data", dir},
		{"stream", "repair", "--data", dir},
	} {
		out, err, took := runEngine(t, args...)
		if err == nil {
			t.Fatalf("%v on a live data dir succeeded:\n%s", args, out)
		}
		want := "data dir " + dir + " is in use by pid " + pid + " (engine serve"
		if !strings.Contains(out, want) || !strings.Contains(out, "stop it or pass --data") {
			t.Fatalf("%v refused without naming the holder: want %q in\n%s", args, want, out)
		}
		t.Logf("%s on a live data dir: refused in %v", args[0], took.Round(time.Millisecond))
	}
	// The first engine still serves and its log is whole.
	if _, err := c.Append(ctx, "owner-s1", nil, events.ToolEnabled{Name: "bash"}); err != nil {
		t.Fatalf("append after the refused second owner: %v", err)
	}
	p.Stop(t)

	// Once stopped, the directory is free again.
	if out, err, _ := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("rebuild of a stopped engine's dir: %v\n%s", err, out)
	}

	empty := filepath.Join(t.TempDir(), "wrong-dir")
	out, err, _ := runEngine(t, "rebuild", "--data", empty)
	if err == nil || !strings.Contains(out, "holds no event stream") {
		t.Fatalf("rebuild of a dir without a store: err %v\n%s", err, out)
	}
	if matches, _ := filepath.Glob(filepath.Join(empty, "jetstream", "*", "streams", "*")); len(matches) > 0 {
		t.Fatalf("rebuild created streams in a dir without a store: %v", matches)
	}
	out, err, _ = runEngine(t, "registry", "push", "--data", dir, filepath.Join("..", "resolver", "default_registry.json"))
	if err == nil || !strings.Contains(out, "needs --nats") {
		t.Fatalf("registry push without --nats: err %v\n%s", err, out)
	}
}

// #12 item 5: with NATS down, liveness stays ok (an orchestrator must not
// restart the engine for a NATS blip) while readiness fails naming the
// NATS check.
func TestProbesNATSDown(t *testing.T) {
	srv := natstest.Server(t)
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL())
	srv.Shutdown()
	body := rtReady(t, p, http.StatusServiceUnavailable, `"nats":{"ok":false,"error":"NATS connection is`)
	t.Logf("readyz with NATS down: %s", body)
	st, live := rtDo(t, "GET", p.HTTPURL+"/healthz", nil)
	if st != http.StatusOK {
		t.Fatalf("healthz with NATS down: %d %s, want 200", st, live)
	}
}
