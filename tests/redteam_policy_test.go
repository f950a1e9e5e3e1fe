package tests

// Red team: the channel policy on every entry path of the built
// binary — discovery, dispatch, resume, time travel, call-check, the CLI,
// tokens, a second engine and direct publishers. Each test documents a
// behaviour that holds; the registry is policyRegistryFile's (public: deny
// bash, max_permission network; bash and mcp__github__create_issue ask).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// rpWithheld are tools policyRegistryFile withholds from channel public:
// bash by deny, the rest by max_permission network (interactive, write and
// exec rank above it). send_message and enter_plan_mode are deferred.
var rpWithheld = []string{"bash", "send_message", "enter_plan_mode", "exit_plan_mode", "mcp__fs__run_script", "mcp__github__create_issue", "write_file", "spawn_agent"}

// rpNoWithheld fails when a view of channel public names a withheld tool
// in its tools, provider array, catalog or rendering bytes. (The view's
// loaded field is the session's loaded set, names only, whatever the
// channel.)
func rpNoWithheld(t *testing.T, what string, v wire.TurnView) {
	t.Helper()
	for _, name := range rpWithheld {
		if slices.Contains(v.Tools, name) || slices.Contains(v.Provider, name) || slices.Contains(v.Catalog, name) {
			t.Errorf("%s: public view holds %s: tools %v catalog %v", what, name, v.Tools, v.Catalog)
		}
		if bytes.Contains(v.Rendering, []byte(`"`+name+`"`)) {
			t.Errorf("%s: public rendering names %s", what, name)
		}
	}
}

// rpEnabled writes ToolsToggled{enabled:true} to session as channel web.
func rpEnabled(t *testing.T, p *engineProc, session string) uint64 {
	t.Helper()
	res, err := p.GoClient("web").Append(e2eCtx(t), client.AppendRequest{Session: session, Commands: []wire.Command{client.Enable()}})
	if err != nil {
		t.Fatal(err)
	}
	return res.LastSeq
}

// In a turn begun by channel public, tool_search by exact names, by
// keyword query and by regex loads no tool the policy withholds and lists
// none as a match; the discovery's view and the next dispatch (engine and
// native renderings) hold none of them.
func TestRedteamPolicyDiscoverWithheld(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	for _, provider := range []string{"anthropic-engine", "anthropic", "openai-engine"} {
		session := "disc-" + provider
		rpEnabled(t, p, session)
		pub := p.GoClient("public")
		begun, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		rpNoWithheld(t, provider+" begin", begun)
		inputs := []string{
			`{"names":["send_message","mcp__fs__run_script","bash","enter_plan_mode","playwright_browser"]}`,
			`{"query":"send a message to another agent session"}`,
			`{"query":"enter plan mode"}`,
			`{"query":"run script"}`,
			`{"regex":"send_.*|.*plan.*|mcp__.*|bash.*"}`,
			`{"regex":".*","max_results":20}`,
		}
		for _, in := range inputs {
			found, err := pub.TurnDiscover(ctx, wire.DiscoverRequest{Session: session, Provider: provider, Input: json.RawMessage(in)})
			if err != nil {
				t.Fatalf("%s discover %s: %v", provider, in, err)
			}
			for _, name := range rpWithheld {
				if slices.Contains(found.Loaded, name) {
					t.Errorf("%s discover %s: loaded withheld %s: %v", provider, in, name, found.Loaded)
				}
				for _, m := range found.Matches {
					if m.Name == name {
						t.Errorf("%s discover %s: lists withheld %s as a match", provider, in, name)
					}
				}
				for _, tool := range found.Tools {
					if tool.Name == name {
						t.Errorf("%s discover %s: returns withheld tool %s", provider, in, name)
					}
				}
				if bytes.Contains(found.Output, []byte(`"name":"`+name+`"`)) {
					t.Errorf("%s discover %s: output defines withheld %s: %s", provider, in, name, found.Output)
				}
			}
			rpNoWithheld(t, provider+" discover "+in, found.View)
		}
		d, err := pub.TurnDispatch(ctx, wire.DispatchRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		rpNoWithheld(t, provider+" dispatch", d)
		if !slices.Contains(d.Loaded, "playwright_browser") && provider != "anthropic" {
			t.Errorf("%s: the allowed deferred playwright_browser was not loaded: %v", provider, d.Loaded)
		}
		if _, err := pub.TurnEnd(ctx, wire.TurnRequest{Session: session}); err != nil {
			t.Fatalf("%s end: %v", provider, err)
		}
	}
}

// A deferred tool loaded by a turn of channel tui is in the session's
// loaded set; the next turn, resolve and dispatch of channel public in the
// engine's own deferral (-engine providers) do not carry it (not in the
// array nor the catalog), a resume by public does not restore it, and
// call-check in public's turn refuses it.
func TestRedteamPolicyLoadedByOtherChannel(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	for _, provider := range []string{"anthropic-engine", "openai-engine"} {
		session := "carry-" + provider
		rpEnabled(t, p, session)
		tui, pub := p.GoClient("tui"), p.GoClient("public")
		if _, err := tui.TurnBegin(ctx, wire.BeginTurnRequest{Session: session, Provider: provider}); err != nil {
			t.Fatal(err)
		}
		found, err := tui.TurnDiscover(ctx, wire.DiscoverRequest{Session: session, Provider: provider, Names: []string{"send_message", "mcp__fs__run_script", "playwright_browser"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(found.Loaded, "send_message") || !slices.Contains(found.Loaded, "mcp__fs__run_script") {
			t.Fatalf("%s: tui loaded %v, want send_message and mcp__fs__run_script", provider, found.Loaded)
		}
		end, err := tui.TurnEnd(ctx, wire.TurnRequest{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(end.Checkpoint.Loaded, "send_message") {
			t.Fatalf("%s: tui checkpoint %+v, want send_message loaded", provider, end.Checkpoint)
		}

		rv, err := pub.Resolve(ctx, wire.ResolveRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		rpNoWithheld(t, provider+" public resolve after tui's turn", rv)
		res, err := pub.Resume(ctx, wire.ResumeRequest{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range rpWithheld {
			if slices.Contains(res.Outcome.Restored, name) {
				t.Errorf("%s: public resume restored withheld %s: %+v", provider, name, res.Outcome)
			}
		}
		begun, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		rpNoWithheld(t, provider+" public begin after tui's turn", begun)
		d, err := pub.TurnDispatch(ctx, wire.DispatchRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		rpNoWithheld(t, provider+" public dispatch after tui's turn", d)
		for _, name := range []string{"send_message", "mcp__fs__run_script", "bash"} {
			cc, err := pub.TurnCallCheck(ctx, client.CallCheckRequest{Session: session, Tool: name})
			if err != nil {
				t.Fatal(err)
			}
			if cc.Callable {
				t.Errorf("%s: call-check %s in public's turn: %+v, want not callable", provider, name, cc)
			}
		}
		if _, err := pub.TurnEnd(ctx, wire.TurnRequest{Session: session}); err != nil {
			t.Fatalf("%s: end public's turn: %v", provider, err)
		}
		// tui still gets them back.
		tv, err := tui.Resolve(ctx, wire.ResolveRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(tv.Loaded, "send_message") && !slices.Contains(tv.Tools, "send_message") {
			t.Errorf("%s: tui resolve after public's turn: loaded %v tools %v, want send_message", provider, tv.Loaded, tv.Tools)
		}
	}
}

// The engine CLI reads as the channel it is given: `engine resolve
// --channel public` and `engine explain --channel public` withhold bash,
// `turn begin --channel public` freezes no bash and `turn call-check
// --channel public` in that turn refuses it; --channel tui keeps it.
func TestRedteamPolicyCLIChannel(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	rpEnabled(t, p, "cli")
	var pv, tv wire.TurnView
	e2eCLIJSON(t, p, &pv, "resolve", "cli", "--channel", "public")
	e2eCLIJSON(t, p, &tv, "resolve", "cli", "--channel", "tui")
	rpNoWithheld(t, "engine resolve --channel public", pv)
	if !slices.Contains(pv.Withheld, "bash") || pv.Policy != "pol-transport-1" {
		t.Errorf("engine resolve --channel public: withheld %v policy %q, want bash withheld by pol-transport-1", pv.Withheld, pv.Policy)
	}
	if !slices.Contains(tv.Tools, "bash") {
		t.Errorf("engine resolve --channel tui: tools %v, want bash", tv.Tools)
	}
	var ex wire.Explanation
	e2eCLIJSON(t, p, &ex, "explain", "cli", "bash", "--channel", "public")
	if ex.Included || ex.Rule != "channel-deny:public:bash@pol-transport-1" {
		t.Errorf("engine explain --channel public: %+v, want withheld by channel-deny", ex)
	}
	var begun wire.TurnView
	e2eCLIJSON(t, p, &begun, "turn", "begin", "cli", "--channel", "public")
	rpNoWithheld(t, "engine turn begin --channel public", begun)
	var cc wire.CallCheckReply
	e2eCLIJSON(t, p, &cc, "turn", "call-check", "cli", "bash", "--channel", "public")
	if cc.Callable || cc.Channel != "public" {
		t.Errorf("engine turn call-check --channel public: %+v, want bash not callable on channel public", cc)
	}
	var end wire.CheckpointReply
	e2eCLIJSON(t, p, &end, "turn", "end", "cli", "--channel", "public")
	if end.Checkpoint.ContractHash != begun.ContractHash {
		t.Errorf("engine turn end --channel public: checkpoint %+v, want contract %s", end.Checkpoint, begun.ContractHash)
	}
}

// A PermissionGranted for a tool the channel policy denies — sent by
// the public channel over the API, or published straight to JetStream in
// the documented wire format — never makes it callable in public's turn:
// an answer never widens the set, and deny stays deny.
func TestRedteamPolicyGrantNeverWidens(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	rpEnabled(t, p, "grant")
	pub := p.GoClient("public")
	begun, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: "grant", Override: &wire.Override{Kind: intent.OverrideNames, Names: []string{"bash", "read_file", "mcp__fs__run_script", "mcp__github__create_issue"}}})
	if err != nil {
		t.Fatal(err)
	}
	rpNoWithheld(t, "public turn with an override naming bash", begun)
	if _, err := pub.Append(ctx, client.AppendRequest{Session: "grant", Commands: []wire.Command{
		{"type": "PermissionGranted", "tool": "bash", "scope": "session", "by": "mallory"},
		{"type": "PermissionGranted", "tool": "mcp__fs__run_script", "scope": "once", "by": "mallory", "turn": begun.Turn},
	}}); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	w := newE2EPublisher(t, nc)
	st, err := pub.Intent(ctx, client.IntentRequest{Session: "grant"})
	if err != nil {
		t.Fatal(err)
	}
	w.last["grant"] = st.Seq
	w.publish(t, "grant", func(id string) []byte {
		return e2eWireBody(t, id, "grant", "public", "mallory", "PermissionGranted", map[string]any{"tool": "mcp__github__create_issue", "scope": "session", "by": "mallory"})
	})
	w.publish(t, "grant", func(id string) []byte {
		return e2eWireBody(t, id, "grant", "public", "mallory", "PermissionGranted", map[string]any{"tool": "bash", "scope": "once", "by": "mallory", "turn": begun.Turn})
	})
	for _, c := range []*client.Client{pub, client.NewNATS(nc, client.WithChannel("public"))} {
		for _, name := range []string{"bash", "mcp__fs__run_script", "mcp__github__create_issue"} {
			cc, err := c.TurnCallCheck(ctx, client.CallCheckRequest{Session: "grant", Tool: name})
			if err != nil {
				t.Fatal(err)
			}
			if cc.Callable || cc.Decision != "deny" || cc.Grant != nil {
				t.Errorf("call-check %s in public's turn after grants: %+v, want deny, not callable", name, cc)
			}
		}
	}
	d, err := pub.TurnDispatch(ctx, wire.DispatchRequest{Session: "grant"})
	if err != nil {
		t.Fatal(err)
	}
	rpNoWithheld(t, "public dispatch after grants", d)
	next, err := pub.TurnEnd(ctx, wire.TurnRequest{Session: "grant"})
	if err != nil {
		t.Fatal(err)
	}
	_ = next
	again, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: "grant"})
	if err != nil {
		t.Fatal(err)
	}
	rpNoWithheld(t, "public's next turn after grants", again)
}

// rpRegistry writes policyRegistryFile's registry changed by edit.
func rpRegistry(t *testing.T, edit func(doc map[string]any)) string {
	t.Helper()
	var doc map[string]any
	b, err := os.ReadFile(policyRegistryFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A channel the policy does not name gets the "*" rule, whatever its
// case ("Public" is not "public"), over HTTP and NATS; an Engine-Channel
// header or NATS subject token with bytes outside [A-Za-z0-9_-] (or over
// 64 bytes) is refused with a message naming the byte, never resolved; with
// --http-tokens the token's channel wins: a header naming another channel
// is 403 and the token alone resolves as its channel.
func TestRedteamPolicyUnknownOddAndTokenChannels(t *testing.T) {
	reg := rpRegistry(t, func(doc map[string]any) {
		doc["channel_policy"].(map[string]any)["channels"].(map[string]any)["*"] = map[string]any{"deny": []string{"bash", "gpu_run"}}
	})
	p := startEngine(t, t.TempDir(), "--registry", reg)
	ctx := e2eCtx(t)
	rpEnabled(t, p, "odd")
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	for _, ch := range []string{"Public", "PUBLIC", "unknown", "http", "client"} {
		for tname, c := range map[string]*client.Client{"http": p.GoClient(ch), "nats": client.NewNATS(nc, client.WithChannel(ch))} {
			v, err := c.Resolve(ctx, wire.ResolveRequest{Session: "odd"})
			if err != nil {
				t.Fatalf("%s channel %q: %v", tname, ch, err)
			}
			if slices.Contains(v.Tools, "bash") || !slices.Equal(v.Withheld, []string{"bash"}) {
				t.Errorf("%s channel %q: tools %v withheld %v, want bash withheld by the \"*\" rule", tname, ch, v.Tools, v.Withheld)
			}
			ex, err := c.Explain(ctx, wire.ExplainRequest{Session: "odd", Tool: "bash"})
			if err != nil {
				t.Fatal(err)
			}
			if ex.Included || ex.Rule != "channel-deny:*:bash@pol-transport-1" {
				t.Errorf("%s channel %q: explain bash %+v, want channel-deny:*:bash@pol-transport-1", tname, ch, ex)
			}
		}
	}
	for _, ch := range []string{"pub lic", "pub.lic", "pub*", "pub>", "públic", strings.Repeat("a", 65)} {
		status, b := rtDo(t, "POST", p.HTTPURL+"/v1/sessions/odd/resolve", []byte(`{}`), "Content-Type", "application/json", "Engine-Channel", ch)
		if code, msg := rtErr(b); status != http.StatusBadRequest || code != "invalid" || !strings.Contains(msg, "Engine-Channel header") {
			t.Errorf("Engine-Channel %q: %d %s, want 400 invalid naming the header", ch, status, b)
		}
	}
	for _, ch := range []string{"pub*", "pub>"} {
		_, err := client.NewNATS(nc, client.WithChannel(ch)).Resolve(ctx, wire.ResolveRequest{Session: "odd"})
		if err == nil || !strings.Contains(err.Error(), "invalid") {
			t.Errorf("NATS channel %q: %v, want invalid", ch, err)
		}
	}

	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"public-secret-token-01","channel":"public"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	q := startEngine(t, t.TempDir(), "--registry", reg, "--http-tokens", tokens)
	tc := client.NewHTTP(q.HTTPURL, client.WithToken("public-secret-token-01"))
	if _, err := tc.Append(ctx, client.AppendRequest{Session: "tk", Commands: []wire.Command{client.Enable()}}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"tui", "Public", "http"} {
		status, b := rtDo(t, "POST", q.HTTPURL+"/v1/sessions/tk/resolve", []byte(`{}`), "Content-Type", "application/json", "Authorization", "Bearer public-secret-token-01", "Engine-Channel", ch)
		if code, _ := rtErr(b); status != http.StatusForbidden || code != "forbidden" {
			t.Errorf("public token with Engine-Channel %q: %d %s, want 403 forbidden", ch, status, b)
		}
	}
	v, err := tc.Resolve(ctx, wire.ResolveRequest{Session: "tk"})
	if err != nil {
		t.Fatal(err)
	}
	rpNoWithheld(t, "resolve with the public token", v)
	begun, err := tc.TurnBegin(ctx, wire.BeginTurnRequest{Session: "tk", Override: &wire.Override{Kind: intent.OverrideNames, Names: []string{"bash", "read_file"}}})
	if err != nil {
		t.Fatal(err)
	}
	rpNoWithheld(t, "turn begun with the public token", begun)
	cc, err := tc.TurnCallCheck(ctx, client.CallCheckRequest{Session: "tk", Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Callable || cc.Channel != "public" {
		t.Errorf("call-check bash with the public token: %+v, want refused on channel public", cc)
	}
}

// rpPol2 is the policy registry pushed mid-turn: version pol-transport-2
// denies tui bash and mcp__fs__* and no longer limits public.
func rpPol2(t *testing.T) string {
	return rpRegistry(t, func(doc map[string]any) {
		doc["version"] = "builtin-2026.12.1-pol2"
		doc["channel_policy"] = map[string]any{
			"version":  "pol-transport-2",
			"channels": map[string]any{"tui": map[string]any{"deny": []string{"bash", "mcp__fs__*"}}},
		}
	})
}

// rpTwoEngines starts two `engine serve` on one NATS server following the
// registry KV (seeded with the policy registry); B runs no projection.
func rpTwoEngines(t *testing.T) (a, b *engineProc, natsURL string) {
	t.Helper()
	srv := natstest.Server(t)
	a = startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--registry-kv", "--registry", policyRegistryFile(t))
	b = startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--registry-kv", "--no-projection")
	return a, b, srv.ClientURL()
}

// rpWaitRegistry waits until every engine serves registry version.
func rpWaitRegistry(t *testing.T, version string, ps ...*engineProc) {
	t.Helper()
	ctx := e2eCtx(t)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, p := range ps {
			r, err := p.GoClient("tui").Registry(ctx)
			if err != nil {
				return err
			}
			if r.Version != version {
				return fmt.Errorf("engine serves %s, want %s", r.Version, version)
			}
		}
		return nil
	})
}

// A policy pushed while turns are open (two engines on one
// NATS, registry in KV) changes no frozen turn on either engine: tui's turn
// keeps bash and mcp__fs__run_script, public's turn gains no bash though
// the new policy no longer limits public, and both engines answer
// dispatch and call-check the same, from any caller's channel. The next
// turns follow the new policy on both engines.
func TestRedteamPolicyPushMidTurnTwoEngines(t *testing.T) {
	ctx := e2eCtx(t)
	a, b, natsURL := rpTwoEngines(t)
	rpEnabled(t, a, "pt")
	rpEnabled(t, a, "pp")
	tuiTurn, err := a.GoClient("tui").TurnBegin(ctx, wire.BeginTurnRequest{Session: "pt"})
	if err != nil {
		t.Fatal(err)
	}
	pubTurn, err := a.GoClient("public").TurnBegin(ctx, wire.BeginTurnRequest{Session: "pp"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := pushRegistry(rpPol2(t), natsURL, a.DataDir); err != nil {
		t.Fatalf("registry push: %v\n%s", err, out)
	}
	rpWaitRegistry(t, "builtin-2026.12.1-pol2", a, b)
	type answer struct {
		rendering string
		cc        [2]string
	}
	for _, s := range []struct {
		session string
		turn    wire.TurnView
	}{{"pt", tuiTurn}, {"pp", pubTurn}} {
		var first *answer
		for ei, p := range []*engineProc{a, b} {
			for _, caller := range []string{"tui", "public"} {
				c := p.GoClient(caller)
				d, err := c.TurnDispatch(ctx, wire.DispatchRequest{Session: s.session})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(d.Rendering, s.turn.Rendering) || d.Policy != "pol-transport-1" || d.RegistryVersion != "builtin-2026.12.1" {
					t.Errorf("engine %d, caller %s: dispatch of %s after the push: policy %s registry %s tools %v, want the frozen turn (tools %v)", ei, caller, s.session, d.Policy, d.RegistryVersion, d.Tools, s.turn.Tools)
				}
				var got answer
				got.rendering = string(d.Rendering)
				for i, name := range []string{"bash", "read_file"} {
					cc, err := c.TurnCallCheck(ctx, client.CallCheckRequest{Session: s.session, Tool: name})
					if err != nil {
						t.Fatal(err)
					}
					got.cc[i] = fmt.Sprintf("%v %s %s %s %s", cc.Callable, cc.Reason, cc.Decision, cc.Rule, cc.Channel)
				}
				if first == nil {
					first = &got
				} else if got != *first {
					t.Errorf("engine %d, caller %s, %s: call-check %v, want the same as engine 0 tui: %v", ei, caller, s.session, got.cc, first.cc)
				}
			}
		}
	}
	if !slices.Contains(tuiTurn.Tools, "bash") || !slices.Contains(tuiTurn.Tools, "mcp__fs__run_script") {
		t.Fatalf("tui turn %v, want bash and mcp__fs__run_script", tuiTurn.Tools)
	}
	rpNoWithheld(t, "public turn begun before the push", pubTurn)
	for _, p := range []*engineProc{a, b} {
		cc, err := p.GoClient("public").TurnCallCheck(ctx, client.CallCheckRequest{Session: "pp", Tool: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		if cc.Callable || cc.Reason != "not_in_turn" {
			t.Errorf("call-check bash in public's frozen turn after a push allowing it: %+v, want not_in_turn", cc)
		}
	}
	// End on B, begin the next turns on B: the new policy.
	for _, s := range []struct{ ch, session string }{{"tui", "pt"}, {"public", "pp"}} {
		if _, err := b.GoClient(s.ch).TurnEnd(ctx, wire.TurnRequest{Session: s.session}); err != nil {
			t.Fatalf("end %s on B after the push: %v", s.session, err)
		}
		v, err := b.GoClient(s.ch).TurnBegin(ctx, wire.BeginTurnRequest{Session: s.session})
		if err != nil {
			t.Fatal(err)
		}
		if v.Policy != "pol-transport-2" || slices.Contains(v.Tools, "bash") != (s.ch == "public") {
			t.Errorf("next turn of %s as %s: policy %s tools %v withheld %v, want pol-transport-2 (bash only for public)", s.session, s.ch, v.Policy, v.Tools, v.Withheld)
		}
		d, err := a.GoClient(s.ch).TurnDispatch(ctx, wire.DispatchRequest{Session: s.session})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Rendering, v.Rendering) {
			t.Errorf("A's dispatch of the turn B began (%s): tools %v, want %v", s.session, d.Tools, v.Tools)
		}
	}
}

// DeferredLoaded for a withheld deferred tool, appended by channel
// public over the API or published straight to JetStream, in public's
// open turn, puts it in no -engine rendering of that turn, no call-check
// allows it, and the turn still ends with a consistent checkpoint.
func TestRedteamPolicyDirectLoadWithheld(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	pub := p.GoClient("public")
	for _, provider := range []string{"anthropic-engine", "openai-engine"} {
		session := "load-" + provider
		rpEnabled(t, p, session)
		begun, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		res, err := pub.Append(ctx, client.AppendRequest{Session: session, Commands: []wire.Command{{"type": "DeferredLoaded", "names": []string{"send_message"}, "turn": begun.Turn}}})
		if err != nil {
			t.Logf("API DeferredLoaded{send_message} refused: %v", err)
		}
		w := newE2EPublisher(t, nc)
		w.last[session] = max(res.LastSeq, begun.Seq)
		if res.LastSeq == 0 {
			st, err := pub.Intent(ctx, client.IntentRequest{Session: session})
			if err != nil {
				t.Fatal(err)
			}
			w.last[session] = st.Seq
		}
		w.publish(t, session, func(id string) []byte {
			return e2eWireBody(t, id, session, "public", "mallory", "DeferredLoaded", map[string]any{"names": []string{"mcp__fs__run_script", "enter_plan_mode"}, "turn": begun.Turn})
		})
		st, err := pub.Intent(ctx, client.IntentRequest{Session: session, MinSeq: w.last[session]})
		if err != nil {
			t.Fatal(err)
		}
		d, err := pub.TurnDispatch(ctx, wire.DispatchRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		rpNoWithheld(t, provider+" dispatch after a direct DeferredLoaded (loaded "+strings.Join(st.Loaded, ",")+")", d)
		for _, name := range []string{"send_message", "mcp__fs__run_script", "enter_plan_mode"} {
			cc, err := pub.TurnCallCheck(ctx, client.CallCheckRequest{Session: session, Tool: name})
			if err != nil {
				t.Fatal(err)
			}
			if cc.Callable {
				t.Errorf("%s: call-check %s after a direct DeferredLoaded: %+v, want not callable", provider, name, cc)
			}
		}
		end, err := pub.TurnEnd(ctx, wire.TurnRequest{Session: session})
		if err != nil {
			t.Fatalf("%s: end public's turn after a direct DeferredLoaded: %v", provider, err)
		}
		for _, name := range rpWithheld {
			if slices.Contains(end.Checkpoint.Loaded, name) {
				t.Errorf("%s: public's checkpoint %+v holds withheld %s", provider, end.Checkpoint, name)
			}
		}
	}
}

// Explain's time travel applies the policy in force at the point and
// the caller's channel: before a push, public is refused bash and the
// exec MCP tool by pol-transport-1 while tui gets them; after the push of
// pol-transport-2 the answers swap, each naming its policy version.
func TestRedteamPolicyExplainUntilAcrossPush(t *testing.T) {
	ctx := e2eCtx(t)
	p := startEngine(t, t.TempDir(), "--registry-kv", "--registry", policyRegistryFile(t))
	before := rpEnabled(t, p, "tt")
	if out, err := pushRegistry(rpPol2(t), p.NATSURL, p.DataDir); err != nil {
		t.Fatalf("registry push: %v\n%s", err, out)
	}
	rpWaitRegistry(t, "builtin-2026.12.1-pol2", p)
	after, err := p.GoClient("web").Append(ctx, client.AppendRequest{Session: "tt", Commands: []wire.Command{client.WebSearchOn()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		channel, tool string
		seq           uint64
		rule          string // "" included
	}{
		{"tui", "bash", before, ""},
		{"tui", "mcp__fs__run_script", before, ""},
		{"public", "bash", before, "channel-deny:public:bash@pol-transport-1"},
		{"public", "mcp__fs__run_script", before, "channel-max-permission:public:network@pol-transport-1"},
		{"tui", "bash", after.LastSeq, "channel-deny:tui:bash@pol-transport-2"},
		{"tui", "mcp__fs__run_script", after.LastSeq, "channel-deny:tui:mcp__fs__*@pol-transport-2"},
		{"public", "bash", after.LastSeq, ""},
		{"public", "mcp__fs__run_script", after.LastSeq, ""},
	} {
		ex, err := p.GoClient(c.channel).Explain(ctx, wire.ExplainRequest{Session: "tt", Tool: c.tool, Until: wire.UntilSeq(c.seq)})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Included != (c.rule == "") || c.rule != "" && ex.Rule != c.rule {
			t.Errorf("explain %s as %s until %d: included %v rule %s, want rule %q (\"\": included)", c.tool, c.channel, c.seq, ex.Included, ex.Rule, c.rule)
		}
	}
}
