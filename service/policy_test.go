package service_test

// The channel policy reaches every resolution of the service.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// policyRegistry is the default registry with two MCP tools and a
// channel policy: "public" is denied bash and gets at most network tools;
// bash and the MCP write tool are asked everywhere else.
func policyRegistry(t testing.TB) *resolver.Registry {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	tools := doc["tools"].([]any)
	for _, n := range []struct{ name, perm string }{{"mcp__github__get_issue", "read"}, {"mcp__github__create_issue", "write"}} {
		tools = append(tools, map[string]any{"name": n.name, "description": "GitHub " + n.name, "parameters": map[string]any{"type": "object"}, "permission": n.perm})
	}
	doc["tools"] = tools
	doc["default_tools"] = append(doc["default_tools"].([]any), "mcp__github__*")
	doc["channel_policy"] = map[string]any{
		"version":  "pol-1",
		"channels": map[string]any{"public": map[string]any{"deny": []string{"bash"}, "max_permission": "network"}},
		"decisions": []any{
			map[string]any{"tool": "bash", "decision": "ask"},
			map[string]any{"tool": "mcp__github__create_issue", "decision": "ask"},
			map[string]any{"tool": "kill_shell", "decision": "deny"},
		},
	}
	b, _ := json.Marshal(doc)
	r, err := resolver.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var public = service.Origin{Channel: "public", Actor: "mallory"}

// A channel denied bash never receives it, whatever the
// session's intent or the turn's override says, through the service's
// reads and turns, while another channel of the same session does.
func TestPolicyServiceChannelNeverReceivesBash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, policyRegistry(t), service.Config{}, true)
	res, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(true)}, events.PresetChosen{Preset: "full"})
	if err != nil {
		t.Fatal(err)
	}
	overrides := []intent.Override{{}, {Kind: intent.OverrideNames, Names: []string{"bash", "read_file"}}, {Kind: intent.OverrideIntent, Intent: intent.Intent{Picked: []string{"bash"}}}}
	for i, ov := range overrides {
		pub, err := e.Resolve(ctx, "s1", service.ResolveRequest{Channel: "public", Override: ov, MinSeq: res.Last})
		if err != nil {
			t.Fatal(err)
		}
		tui, err := e.Resolve(ctx, "s1", service.ResolveRequest{Channel: "tui", Override: ov, MinSeq: res.Last})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pub.Tools, "bash") || !slices.Contains(tui.Tools, "bash") {
			t.Errorf("override %d: public %v, tui %v: want bash only for tui", i, pub.Tools, tui.Tools)
		}
		if pub.Policy != "pol-1" || !slices.Contains(pub.Withheld, "bash") {
			t.Errorf("override %d: public view policy %q withheld %v", i, pub.Policy, pub.Withheld)
		}
		again, _ := e.Resolve(ctx, "s1", service.ResolveRequest{Channel: "public", Override: ov, MinSeq: res.Last})
		if string(again.Rendering) != string(pub.Rendering) {
			t.Errorf("override %d: public rendering is not byte-stable", i)
		}
	}
	v, err := e.BeginTurn(ctx, "s1", public, service.ResolveRequest{Override: overrides[1]})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(v.Tools, "bash") || !slices.Contains(v.Tools, "read_file") {
		t.Fatalf("public turn tools %v", v.Tools)
	}
}

// A session whose events were published directly (not through
// the service) resolves under the channel's policy too, and its turn,
// begun on the public channel, rebuilds on another engine with the same
// narrowed tools and contract hash (the TurnStarted's channel is replayed).
func TestPolicyDirectPublishAndReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	reg := policyRegistry(t)
	e1, log := stackOn(t, url, jetstream.LogConfig{}, reg, service.Config{}, true)
	env := []events.Envelope{
		events.New("d1", "public", "mallory", events.ToolsToggled{Enabled: on(true)}),
		events.New("d1", "public", "mallory", events.ToolsPicked{Names: []string{"bash", "read_file", "mcp__github__create_issue", "mcp__github__get_issue"}}),
	}
	ar, err := log.Append(ctx, "d1", 0, env...)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e1.Resolve(ctx, "d1", service.ResolveRequest{Channel: "public", MinSeq: ar.Last})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"read_file", "mcp__github__get_issue", "tool_search"}; !slices.Equal(v.Tools, want) {
		t.Fatalf("direct-publish session on public: %v, want %v", v.Tools, want)
	}
	turn, err := e1.BeginTurn(ctx, "d1", public, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := stackOn(t, url, jetstream.LogConfig{}, reg, service.Config{}, false)
	rebuilt, err := e2.Resolve(ctx, "d1", service.ResolveRequest{Channel: "public", MinSeq: turn.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if !rebuilt.Frozen || !slices.Equal(rebuilt.Tools, turn.Tools) || rebuilt.ContractHash != turn.ContractHash {
		t.Fatalf("rebuilt turn %v (%s), want %v (%s)", rebuilt.Tools, rebuilt.ContractHash, turn.Tools, turn.ContractHash)
	}
	// Another channel reads the turn too when its policy denies none of
	// the frozen tools (public's set is narrower than tui's)...
	other, err := e2.Resolve(ctx, "d1", service.ResolveRequest{Channel: "tui", MinSeq: turn.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if !other.Frozen || !slices.Equal(other.Tools, turn.Tools) {
		t.Fatalf("tui's read during public's turn: frozen %v tools %v, want the frozen turn %v", other.Frozen, other.Tools, turn.Tools)
	}
	// ...but a channel whose policy denies a frozen tool reads its own
	// live resolution: tui's turn holds bash, public's read does not.
	tuiTurn, err := e2.BeginTurn(ctx, "d2", service.Origin{Channel: "tui", Actor: "alice"}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pubRead, err := e1.Resolve(ctx, "d2", service.ResolveRequest{Channel: "public", MinSeq: tuiTurn.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tuiTurn.Tools, "bash") || pubRead.Frozen || slices.Contains(pubRead.Tools, "bash") {
		t.Fatalf("public's read during tui's turn (tools %v): frozen %v tools %v, want its own live tools without bash", tuiTurn.Tools, pubRead.Frozen, pubRead.Tools)
	}
}

// The call-check returns the policy's decision with its rule;
// an ask becomes allow once the user's answer is recorded, and a second
// engine that only reads the log reaches the same decisions. A "once"
// answer lasts one turn, a "session" one every turn after.
func TestPolicyCallCheckDecisionsReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	reg := policyRegistry(t)
	e1, _ := stackOn(t, url, jetstream.LogConfig{}, reg, service.Config{}, true)
	e2, _ := stackOn(t, url, jetstream.LogConfig{}, reg, service.Config{}, false)
	tui := service.Origin{Channel: "tui", Actor: "alice"}
	if _, err := e1.BeginTurn(ctx, "c1", tui, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	check := func(step string, tool, reason, decision, rule string) {
		t.Helper()
		for i, e := range []*service.Engine{e1, e2} {
			got, err := e.CallCheck(ctx, "c1", tool)
			if err != nil {
				t.Fatalf("%s: engine %d: %v", step, i+1, err)
			}
			if got.Reason != reason || got.Decision != decision || got.Rule != rule || got.Callable != (reason == wire.CallCallable) {
				t.Errorf("%s: engine %d: %s: reason %q decision %q rule %q callable %v; want %q %q %q", step, i+1, tool, got.Reason, got.Decision, got.Rule, got.Callable, reason, decision, rule)
			}
		}
	}
	check("asked", "bash", wire.CallAsk, "ask", "decision[0]:ask:*:*:bash@pol-1")
	check("allowed", "read_file", wire.CallCallable, "allow", "default-allow")
	check("denied", "kill_shell", wire.CallNotInTurn, "deny", "decision[2]:deny:*:*:kill_shell@pol-1")
	res, err := e1.Apply(ctx, "c1", tui, nil, events.PermissionGranted{Tool: "bash", Scope: events.ScopeOnce, By: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	check("once", "bash", wire.CallCallable, "allow", fmt.Sprintf("granted:once:user:alice@%d", res.Last))
	if _, err := e1.BeginTurn(ctx, "c1", tui, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	check("next turn", "bash", wire.CallAsk, "ask", "decision[0]:ask:*:*:bash@pol-1")
	res, err = e2.Apply(ctx, "c1", tui, nil, events.PermissionGranted{Tool: "bash", Scope: events.ScopeSession, By: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.BeginTurn(ctx, "c1", tui, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	check("session", "bash", wire.CallCallable, "allow", fmt.Sprintf("granted:session:user:alice@%d", res.Last))
}
