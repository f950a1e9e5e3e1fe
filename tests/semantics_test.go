package tests

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// semCLI runs an engine subcommand against p and returns stdout and
// stderr separately, and the exit error.
func semCLI(t *testing.T, p *engineProc, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, engineBin, append(args, "--server", p.HTTPURL)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func semView(t *testing.T, p *engineProc, args ...string) (service.TurnView, string) {
	t.Helper()
	out, errOut, err := semCLI(t, p, append(args, "--json")...)
	if err != nil {
		t.Fatalf("engine %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	var v service.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("engine %s: decode: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v, errOut
}

// R4, R5: resolve and turn begin take a per-turn override on the command
// line, in each form the HTTP and NATS API accept (empty, names, intent,
// the API's object), and resolve exactly as the API does; a session
// without events says so on stderr instead of silently resolving the
// defaults (issue #14, item 8).
func TestCLIOverride(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx := e2eCtx(t)
	c := p.Client("cli-test")
	on := true
	if _, err := c.Append(ctx, "s1", nil, events.ToolsToggled{Enabled: &on}, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	research, _ := resolver.Default().Preset("research")
	cases := []struct {
		flag   string
		api    api.Override
		source string
		want   []string
	}{
		{"empty", api.Override{Kind: "empty"}, resolver.SourceOverrideEmpty, nil},
		{"names:grep,read_file", api.Override{Kind: "names", Names: []string{"grep", "read_file"}}, resolver.SourceOverrideNames, []string{"grep", "read_file"}},
		{`intent:{"preset":"research"}`, api.Override{Kind: "intent", Intent: &resolver.Intent{Preset: "research"}}, resolver.SourceOverrideIntent, research},
		{`{"kind":"intent","intent":{"enabled":true},"allowed":["grep","bash"]}`, api.Override{Kind: "intent", Intent: &resolver.Intent{Enabled: &on}, Allowed: []string{"grep", "bash"}}, resolver.SourceOverrideIntent, []string{"grep", "bash"}},
	}
	for _, tc := range cases {
		v, stderr := semView(t, p, "resolve", "s1", "--override", tc.flag)
		if v.Source != tc.source || !slices.Equal(v.Tools, tc.want) || stderr != "" {
			t.Errorf("--override %s: source %s tools %v stderr %q; want %s %v", tc.flag, v.Source, v.Tools, stderr, tc.source, tc.want)
		}
		o := tc.api
		viaAPI, err := c.Resolve(ctx, api.ResolveRequest{Session: "s1", Override: &o})
		if err != nil {
			t.Fatal(err)
		}
		if viaAPI.PrefixHash != v.PrefixHash || viaAPI.ContractHash != v.ContractHash {
			t.Errorf("--override %s resolves otherwise than the API's %+v", tc.flag, tc.api)
		}
	}
	// No override: the session intent (defaults without bash).
	v, stderr := semView(t, p, "resolve", "s1")
	if v.Source != resolver.SourceSessionIntent || slices.Contains(v.Tools, "bash") || stderr != "" {
		t.Errorf("no override: %s %v stderr %q", v.Source, v.Tools, stderr)
	}
	// A bad form is refused, naming the forms.
	if _, errOut, err := semCLI(t, p, "resolve", "s1", "--override", "grep"); err == nil || !strings.Contains(errOut, `"names:a,b"`) {
		t.Errorf("--override grep: err %v stderr %q; want a refusal listing the forms", err, errOut)
	}
	// turn begin freezes the overridden tools.
	v, stderr = semView(t, p, "turn", "begin", "s1", "--override", "names:grep")
	if !v.Frozen || !slices.Equal(v.Tools, []string{"grep"}) || stderr != "" {
		t.Errorf("turn begin --override names:grep: frozen %v tools %v stderr %q", v.Frozen, v.Tools, stderr)
	}
	// A session without events: resolved, exit 0, and said on stderr.
	v, stderr = semView(t, p, "resolve", "no_such_session")
	if !v.NoEvents || v.Seq != 0 || !strings.Contains(stderr, "session no_such_session has no events yet: resolving the defaults") {
		t.Errorf("unknown session: no_events %v seq %d stderr %q", v.NoEvents, v.Seq, stderr)
	}
	_, stderr = semView(t, p, "resolve", "no_such_session", "--profile", "coder")
	if !strings.Contains(stderr, `resolving profile "coder"`) {
		t.Errorf("unknown session with a profile: stderr %q", stderr)
	}
	v, stderr = semView(t, p, "turn", "begin", "fresh_session")
	if !v.NoEvents || v.Turn != 1 || !strings.Contains(stderr, "session fresh_session has no events yet") {
		t.Errorf("turn begin on a fresh session: no_events %v turn %d stderr %q", v.NoEvents, v.Turn, stderr)
	}
	if v, _ := semView(t, p, "turn", "begin", "fresh_session"); v.NoEvents {
		t.Errorf("second turn begin still says the session has no events")
	}
}
