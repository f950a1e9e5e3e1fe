package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolintent/engine/events"
)

// cliResult is one run of the built binary.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runBin runs the engine binary with args and extra environment, bounded
// by 30 s.
func runBin(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, engineBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return cliResult{out.String(), errb.String(), code}
}

// `engine version` names the module, the Go and the embedded
// nats-server versions.
func TestCLIVersion(t *testing.T) {
	r := runBin(t, nil, "version", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if v["module"] != "github.com/toolintent/engine" || v["nats_server"] != server.VERSION || !strings.HasPrefix(v["go"].(string), "go1.") || v["version"] == "" {
		t.Fatalf("version = %v", v)
	}
	if r := runBin(t, nil, "version"); r.code != 0 || !strings.Contains(r.stdout, "nats-server "+server.VERSION) || !strings.Contains(r.stdout, "commit") {
		t.Fatalf("version text: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// A usage error exits 2 with a short message naming the
// command's --help, not the whole help text.
func TestCLIUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{}, {"emit"}, {"resolve", "s1", "--bogus"}, {"nosuchcommand"}} {
		r := runBin(t, nil, args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) > 3 || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("engine %v: exit %d, %d lines of stderr:\n%s", args, r.code, len(lines), r.stderr)
		}
	}
}

// A refused connection asks whether the engine runs there,
// for HTTP (with or without a scheme) and for NATS.
func TestCLIConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nobody listens on
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resolve", "s1", "--server", addr}, "is `engine serve` running at http://" + addr + "?"},
		{[]string{"resolve", "s1", "--server", "http://" + addr}, "is `engine serve` running at http://" + addr + "?"},
		{[]string{"intent", "s1", "--nats", "nats://" + addr}, "is `engine serve` running at nats://" + addr + "?"},
	} {
		r := runBin(t, nil, tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("engine %v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// Client commands take --server without a scheme and talk
// NATS directly (--nats URL, or NATS_URL), with the local engine's
// users from --data; events and tail print decoded events as JSON, live
// with --follow.
func TestCLINATSAndEvents(t *testing.T) {
	p := startEngine(t, t.TempDir())
	hostPort := strings.TrimPrefix(p.HTTPURL, "http://")
	if r := runBin(t, nil, "emit", "cli1", "enable", "--server", hostPort); r.code != 0 {
		t.Fatalf("emit over HTTP without a scheme: %d %s", r.code, r.stderr)
	}
	if r := runBin(t, nil, "emit", "cli1", "disable", "bash", "--nats", p.NATSURL, "--data", p.DataDir, "--channel", "tui"); r.code != 0 {
		t.Fatalf("emit over --nats: %d %s", r.code, r.stderr)
	}
	r := runBin(t, []string{"NATS_URL=" + p.NATSURL, "ENGINE_DATA=" + p.DataDir}, "intent", "cli1", "--json", "--min-seq", "2")
	if r.code != 0 || !strings.Contains(r.stdout, `"bash"`) {
		t.Fatalf("intent over NATS_URL: %d %s %s", r.code, r.stdout, r.stderr)
	}

	r = runBin(t, nil, "events", "cli1", "--nats", p.NATSURL, "--data", p.DataDir)
	if r.code != 0 {
		t.Fatalf("events: %d %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("events printed %d lines, want 2:\n%s", len(lines), r.stdout)
	}
	var first, second map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &first)
	_ = json.Unmarshal([]byte(lines[1]), &second)
	if first["type"] != string(events.TypeToolsToggled) || first["channel"] != "cli" || second["type"] != string(events.TypeToolDisabled) ||
		second["channel"] != "tui" || second["data"].(map[string]any)["name"] != "bash" || second["session"] != "cli1" {
		t.Fatalf("events decoded as\n%v\n%v", first, second)
	}

	// Live: events --follow and tail print an event appended after they
	// started.
	follow := startFollower(t, "events", "cli1", "--follow", "--nats", p.NATSURL, "--data", p.DataDir)
	tail := startFollower(t, "tail", "--last", "0", "--nats", p.NATSURL, "--data", p.DataDir)
	follow.expect(t, `"type":"ToolsToggled"`) // the history first
	follow.expect(t, `"type":"ToolDisabled"`)
	tail.ready(t)
	if r := runBin(t, nil, "emit", "cli1", "preset", "research", "--server", p.HTTPURL); r.code != 0 {
		t.Fatalf("emit: %d %s", r.code, r.stderr)
	}
	follow.expect(t, `"type":"PresetChosen"`)
	tail.expect(t, `"type":"PresetChosen"`)
}

// follower is a running `engine events --follow` or `engine tail`.
type follower struct {
	cmd      *exec.Cmd
	lines    chan string // stdout
	errLines chan string // stderr
}

func startFollower(t *testing.T, args ...string) *follower {
	t.Helper()
	return startFollowerEnv(t, nil, args...)
}

// startFollowerEnv is startFollower with extra environment variables.
func startFollowerEnv(t *testing.T, env []string, args ...string) *follower {
	t.Helper()
	cmd := exec.Command(engineBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{cmd: cmd, lines: make(chan string, 100), errLines: make(chan string, 100)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scan := func(r io.Reader, ch chan string) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}
	go scan(out, f.lines)
	go scan(errOut, f.errLines)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return f
}

// expect waits (at most 20 s) for a line containing want.
func (f *follower) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				t.Fatalf("%v ended before printing %s", f.cmd.Args, want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("%v printed no %s within 20 s", f.cmd.Args, want)
		}
	}
}

// ready waits (at most 20 s) until the command says on stderr that it
// follows the stream: tail --last 0 prints nothing before the next event.
func (f *follower) ready(t *testing.T) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-f.errLines:
			if !ok {
				t.Fatalf("%v ended before following", f.cmd.Args)
			}
			if strings.Contains(l, "following") {
				return
			}
		case <-deadline:
			t.Fatalf("%v not following within 20 s", f.cmd.Args)
		}
	}
}

// The CLI's tables fit 120 columns (long lists wrap under
// their value column, or are cut in a wide table's cells), for the
// walk-through of the README's Try-it block.
func TestCLITablesFit120Columns(t *testing.T) {
	p := startEngine(t, t.TempDir())
	steps := [][]string{
		{"emit", "w1", "enable"}, {"emit", "w1", "web-search", "on"}, {"emit", "w1", "disable", "bash"},
		{"resolve", "w1"}, {"turn", "begin", "w1"}, {"turn", "search", "w1", "send_message"}, {"turn", "end", "w1"},
		{"intent", "w1"}, {"history", "w1"}, {"explain", "w1", "bash"}, {"resume", "w1"}, {"sessions"},
		{"resolve", "w1", "--override", "intent:{\"preset\":\"research\"}"},
	}
	for _, args := range steps {
		r := runBin(t, nil, append(args, "--server", p.HTTPURL)...)
		if r.code != 0 {
			t.Fatalf("engine %v: exit %d: %s", args, r.code, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if n := len([]rune(line)); n > 120 {
				t.Errorf("engine %v: a line of %d columns:\n%s", args, n, line)
			}
		}
	}
}

// `turn search` marks a query match it did not load as weak
// and says how to load it, instead of listing it like the loaded ones.
func TestCLISearchMarksWeakMatches(t *testing.T) {
	p := startEngine(t, t.TempDir())
	for _, args := range [][]string{{"emit", "k1", "preset", "full"}, {"turn", "begin", "k1"}} {
		if r := runBin(t, nil, append(args, "--server", p.HTTPURL)...); r.code != 0 {
			t.Fatalf("engine %v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	r := runBin(t, nil, "turn", "search", "k1", "-q", "memory", "--server", p.HTTPURL)
	if r.code != 0 {
		t.Fatalf("turn search: exit %d: %s", r.code, r.stderr)
	}
	weak, strong := 0, 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(line, "match ") {
			continue
		}
		if strings.Contains(line, "(weak: not loaded; load it by name)") {
			weak++
		} else {
			strong++
		}
	}
	if weak == 0 || strong == 0 {
		t.Fatalf("want loaded and weak matches, each marked so; got %d weak, %d loaded:\n%s", weak, strong, r.stdout)
	}
}
