package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// The client commands follow serve's own environment: with ENGINE_HTTP,
// ENGINE_LISTEN and ENGINE_DATA set as for `engine serve`, emit and
// intent reach its HTTP port, and events and tail its NATS port, with no
// flag. tail prints only the events appended after it started.
func TestCLIFollowsServeEnvironment(t *testing.T) {
	p := startEngine(t, t.TempDir())
	env := []string{
		"ENGINE_HTTP=" + strings.TrimPrefix(p.HTTPURL, "http://"),
		"ENGINE_LISTEN=" + strings.TrimPrefix(p.NATSURL, "nats://"),
		"ENGINE_DATA=" + p.DataDir,
	}
	for _, args := range [][]string{{"emit", "env1", "enable"}, {"emit", "env1", "disable", "bash"}} {
		if r := runBin(t, env, args...); r.code != 0 {
			t.Fatalf("engine %v with serve's environment: exit %d: %s", args, r.code, r.stderr)
		}
	}
	r := runBin(t, env, "events", "env1")
	if r.code != 0 {
		t.Fatalf("events with serve's environment: exit %d: %s", r.code, r.stderr)
	}
	if n := len(strings.Split(strings.TrimSpace(r.stdout), "\n")); n != 2 {
		t.Fatalf("events printed %d lines, want 2:\n%s", n, r.stdout)
	}

	tail := startFollowerEnv(t, env, "tail")
	tail.ready(t)
	if r := runBin(t, env, "emit", "env2", "preset", "research"); r.code != 0 {
		t.Fatalf("emit: exit %d: %s", r.code, r.stderr)
	}
	line := <-tail.lines
	var ev map[string]any
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("tail printed %q: %v", line, err)
	}
	if ev["session"] != "env2" || ev["type"] != "PresetChosen" {
		t.Fatalf("tail's first line is %s; want the event appended after it started (env2 PresetChosen), not history", line)
	}
}
