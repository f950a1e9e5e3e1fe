package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
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

func semView(t *testing.T, p *engineProc, args ...string) (wire.TurnView, string) {
	t.Helper()
	out, errOut, err := semCLI(t, p, append(args, "--json")...)
	if err != nil {
		t.Fatalf("engine %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	var v wire.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("engine %s: decode: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v, errOut
}

// Resolve and turn begin take a per-turn override on the command
// line, in each form the HTTP and NATS API accept (empty, names, intent,
// the API's object), and resolve exactly as the API does; a session
// without events says so on stderr instead of silently resolving the
// defaults.
func TestCLIResolveAndTurnBeginTakeEveryOverrideForm(t *testing.T) {
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
		api    wire.Override
		source string
		want   []string
	}{
		{"empty", wire.Override{Kind: intent.OverrideEmpty}, resolver.SourceOverrideEmpty, nil},
		{"names:grep,read_file", wire.Override{Kind: intent.OverrideNames, Names: []string{"grep", "read_file"}}, resolver.SourceOverrideNames, []string{"grep", "read_file"}},
		{`intent:{"preset":"research"}`, wire.Override{Kind: intent.OverrideIntent, Intent: intent.Intent{Preset: "research"}}, resolver.SourceOverrideIntent, research},
		{`{"kind":"intent","intent":{"enabled":true},"allowed":["grep","bash"]}`, wire.Override{Kind: intent.OverrideIntent, Intent: intent.Intent{Enabled: &on}, Allowed: []string{"grep", "bash"}}, resolver.SourceOverrideIntent, []string{"grep", "bash"}},
	}
	for _, tc := range cases {
		v, stderr := semView(t, p, "resolve", "s1", "--override", tc.flag)
		if v.Source != tc.source || !slices.Equal(v.Tools, tc.want) || stderr != "" {
			t.Errorf("--override %s: source %s tools %v stderr %q; want %s %v", tc.flag, v.Source, v.Tools, stderr, tc.source, tc.want)
		}
		o := tc.api
		viaAPI, err := c.Resolve(ctx, wire.ResolveRequest{Session: "s1", Override: &o})
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

	// The history table says when the master switch cleared a picked
	// list.
	if _, err := c.Append(ctx, "s3", nil, events.ToolsPicked{Names: []string{"read_file", "grep"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := semCLI(t, p, "emit", "s3", "enable"); err != nil {
		t.Fatal(err)
	}
	out, _, err := semCLI(t, p, "history", "s3")
	if err != nil || !strings.Contains(out, "(clears picked read_file,grep)") {
		t.Errorf("history s3: %v\n%s\nwant the toggle to say it cleared the picked list", err, out)
	}
	if v, _ := semView(t, p, "resolve", "s3"); len(v.Tools) != len(resolver.Default().DefaultTools()) {
		t.Errorf("s3 after pick then enable: %d tools; want the defaults", len(v.Tools))
	}
}

// Engine import turns legacy sessions that stored a materialized list
// into the intent that reproduces them: a dry run prints the plan and
// writes nothing; --apply writes the events through the API (so every
// guard applies), and only to sessions without events.
func TestCLIImportTurnsLegacySessionsIntoIntent(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx := e2eCtx(t)
	c := p.Client("cli-test")
	reg := resolver.Default()
	var then []string // the defaults before list_sessions and send_message
	for _, n := range reg.DefaultTools() {
		if n != "list_sessions" && n != "send_message" {
			then = append(then, n)
		}
	}
	research, _ := reg.Preset("research")
	q, _ := json.Marshal(then)
	r, _ := json.Marshal(research)
	withWS, _ := json.Marshal(append(slices.Clone(then), "web_search"))
	file := t.TempDir() + "/legacy.json"
	writeFile(t, file, `{"defaults": `+string(q)+`, "sessions": [
	  {"session": "old1", "web_search": true, "tools": `+string(withWS)+`},
	  {"session": "old2", "tools": `+string(r)+`},
	  {"session": "old3", "tools": {"grep": true, "read_file": true, "bash": false}},
	  {"session": "live", "tools": ["grep", "bash"]}]}`)
	on := true
	if _, err := c.Append(ctx, "live", nil, events.ToolsToggled{Enabled: &on}); err != nil {
		t.Fatal(err)
	}

	type report struct {
		Applied  bool `json:"applied"`
		Sessions []struct {
			Session  string        `json:"session"`
			Kind     string        `json:"kind"`
			Intent   intent.Intent `json:"intent"`
			Faithful bool          `json:"faithful"`
			Gained   []string      `json:"gained"`
			Events   []json.RawMessage
			Applied  *struct {
				LastSeq uint64 `json:"last_seq"`
				Error   string `json:"error"`
			} `json:"applied"`
		} `json:"sessions"`
	}
	out, errOut, err := semCLI(t, p, "import", file, "--json")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, errOut)
	}
	var dry report
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	kinds := func(r report) []string {
		var k []string
		for _, s := range r.Sessions {
			k = append(k, s.Session+":"+s.Kind)
		}
		return k
	}
	// Old3's dict is opencode's form: the defaults of then without bash.
	if want := []string{"old1:enabled", "old2:preset", "old3:defaults-minus", "live:picked"}; !slices.Equal(kinds(dry), want) || dry.Applied {
		t.Fatalf("dry run decisions %v; want %v", kinds(dry), want)
	}
	if s := dry.Sessions[0]; !s.Faithful || !slices.Equal(s.Gained, []string{"list_sessions", "send_message"}) {
		t.Fatalf("old1: faithful %v gains %v; want the two tools added since", s.Faithful, s.Gained)
	}
	if v, _ := c.Resolve(ctx, wire.ResolveRequest{Session: "old1"}); v.Seq != 0 {
		t.Fatalf("the dry run wrote to old1 (seq %d)", v.Seq)
	}

	out, _, err = semCLI(t, p, "import", file, "--apply", "--json")
	if err == nil {
		t.Fatalf("--apply with a session that has events exited 0")
	}
	var applied report
	if err := json.Unmarshal([]byte(out), &applied); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, s := range applied.Sessions {
		switch {
		case s.Session == "live":
			if s.Applied == nil || !strings.Contains(s.Applied.Error, "already has events") {
				t.Errorf("live session: %+v; want it left alone, saying why", s.Applied)
			}
		case s.Applied == nil || s.Applied.Error != "" || s.Applied.LastSeq == 0:
			t.Errorf("%s: not written: %+v", s.Session, s.Applied)
		}
	}
	v, err := c.Resolve(ctx, wire.ResolveRequest{Session: "old1", MinSeq: applied.Sessions[0].Applied.LastSeq})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(v.Tools, "send_message") || !slices.Contains(v.Tools, resolver.WebSearch) || v.Intent.Picked != nil || v.Intent.Enabled == nil || !*v.Intent.Enabled {
		t.Fatalf("old1 after import: intent %+v tools %v; want {enabled:true, web_search:true} with send_message", v.Intent, v.Tools)
	}
	v, _ = c.Resolve(ctx, wire.ResolveRequest{Session: "old2", MinSeq: applied.Sessions[1].Applied.LastSeq})
	if v.Intent.Preset != "research" || len(v.Tools) != len(research) {
		t.Fatalf("old2 after import: %+v %v", v.Intent, v.Tools)
	}
	// A plan against another registry than the engine's is refused.
	other := t.TempDir() + "/reg.json"
	data, _ := reg.MarshalJSON()
	writeFile(t, other, strings.Replace(string(data), `"version":"`+reg.Version()+`"`, `"version":"other-1"`, 1))
	if _, errOut, err := semCLI(t, p, "import", file, "--apply", "--registry", other); err == nil || !strings.Contains(errOut, "the engine serves "+reg.Version()) {
		t.Fatalf("--apply against another registry: %v %s", err, errOut)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
