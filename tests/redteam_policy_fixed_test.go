// Red-team findings of 2026-12-04 on the channel policy, each a
// bug on the built binary when written and fixed since (see each test's
// comment).

package tests

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// History is a read like resolve and explain: outside a turn each
// entry's tool set is resolved under the caller's channel policy, so the
// public channel's timeline never shows bash in, and agrees with explain
// until the same seq.
func TestRedteamPolicyFixedHistoryChannel(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	rpEnabled(t, p, "h1")
	pub := p.GoClient("public")
	if _, err := pub.Append(ctx, client.AppendRequest{Session: "h1", Commands: []wire.Command{client.WebSearchOn()}}); err != nil {
		t.Fatal(err)
	}
	h, err := pub.History(ctx, wire.HistoryRequest{Session: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.Entries {
		ex, err := pub.Explain(ctx, wire.ExplainRequest{Session: "h1", Tool: "bash", Until: wire.UntilSeq(e.Seq)})
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(e.Tools, "bash"); got != ex.Included {
			t.Errorf("history as public, seq %d (%s by %s): bash in tools = %v, but explain until %d as public says included = %v (%s)", e.Seq, e.Type, e.Channel, got, e.Seq, ex.Included, ex.Rule)
		}
		if slices.Contains(e.Tools, "bash") || slices.Contains(e.Tools, "send_message") || slices.Contains(e.Catalog, "send_message") {
			t.Errorf("history as public, seq %d (%s by %s): tools %v catalog %v hold withheld bash/send_message", e.Seq, e.Type, e.Channel, e.Tools, e.Catalog)
		}
	}
}

// A native rendering for channel public keeps defining
// (schema and all) deferred tools that channel tui loaded earlier in the
// session, although the policy withholds them from public.
func TestRedteamPolicyFixedNativeReferencedWithheld(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	for _, provider := range []string{"anthropic", "openai"} {
		session := "native-" + provider
		rpEnabled(t, p, session)
		tui, pub := p.GoClient("tui"), p.GoClient("public")
		if _, err := tui.TurnBegin(ctx, wire.BeginTurnRequest{Session: session, Provider: provider}); err != nil {
			t.Fatal(err)
		}
		if _, err := tui.TurnDiscover(ctx, wire.DiscoverRequest{Session: session, Provider: provider, Names: []string{"send_message", "mcp__fs__run_script"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := tui.TurnEnd(ctx, wire.TurnRequest{Session: session}); err != nil {
			t.Fatal(err)
		}
		begun, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: session, Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		// The names stay (the conversation's tool_reference blocks name
		// them, and a provider refuses a history naming a tool the list
		// lacks), as stubs: neither description nor schema of a withheld
		// tool reaches the public channel.
		sendDesc, _ := resolver.Default().Tool("send_message")
		for _, leak := range []string{"MCP tool mcp__fs__run_script", sendDesc.Description[:40]} {
			if bytes.Contains(begun.Rendering, []byte(leak)) {
				t.Errorf("%s: public turn's rendering carries %q of a withheld tool (loaded earlier by tui)", provider, leak)
			}
		}
		if !bytes.Contains(begun.Rendering, []byte(deferral.WithheldNote)) {
			t.Errorf("%s: public turn's rendering has no withheld stub: %s", provider, begun.Rendering)
		}
	}
}

// A policy that now denies a tool reaches the call-check of a turn
// frozen before it (reason "denied", wire.CallDenied: "a turn frozen
// before a policy change can hold one"), on both engines, as a disable
// stored mid-turn does.
func TestRedteamPolicyFixedTightenedMidTurnCallCheck(t *testing.T) {
	ctx := e2eCtx(t)
	a, b, natsURL := rpTwoEngines(t)
	rpEnabled(t, a, "pt")
	if _, err := a.GoClient("tui").TurnBegin(ctx, wire.BeginTurnRequest{Session: "pt"}); err != nil {
		t.Fatal(err)
	}
	if out, err := pushRegistry(rpPol2(t), natsURL, a.DataDir); err != nil {
		t.Fatalf("registry push: %v\n%s", err, out)
	}
	rpWaitRegistry(t, "builtin-2026.12.1-pol2", a, b)
	for ei, p := range []*engineProc{a, b} {
		cc, err := p.GoClient("tui").TurnCallCheck(ctx, client.CallCheckRequest{Session: "pt", Tool: "mcp__fs__run_script"})
		if err != nil {
			t.Fatal(err)
		}
		if cc.Callable || cc.Reason != "denied" {
			t.Errorf("engine %d: call-check mcp__fs__run_script in tui's turn after pol-transport-2 denies mcp__fs__* on tui: callable %v reason %s decision %s rule %s, want denied", ei, cc.Callable, cc.Reason, cc.Decision, cc.Rule)
		}
	}
}

// Call-check asked by a channel whose policy denies the tool never
// reads callable, even in a turn another channel began.
func TestRedteamPolicyFixedCallCheckFromOtherChannel(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	rpEnabled(t, p, "cc")
	tui, pub := p.GoClient("tui"), p.GoClient("public")
	if _, err := tui.TurnBegin(ctx, wire.BeginTurnRequest{Session: "cc"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mcp__fs__run_script", "write_file"} {
		cc, err := pub.TurnCallCheck(ctx, client.CallCheckRequest{Session: "cc", Tool: name})
		if err != nil {
			t.Fatal(err)
		}
		if cc.Callable {
			t.Errorf("call-check %s asked by channel public (max_permission network) in tui's turn: callable, reason %s, channel %s, rule %s", name, cc.Reason, cc.Channel, cc.Rule)
		}
	}
}

// A channel_policy rule whose channel name no request can carry
// (channels are 1 to 64 of [A-Za-z0-9_-]) is refused when the registry
// loads, naming the key: a typo such as "public " would otherwise leave
// public unrestricted without a word.
func TestRedteamPolicyFixedPolicyChannelNameValidated(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	for _, key := range []string{"public ", "pub.lic", "pub>", "públic"} {
		bad := rpRegistry(t, func(doc map[string]any) {
			doc["channel_policy"].(map[string]any)["channels"] = map[string]any{key: map[string]any{"deny": []string{"bash"}}}
		})
		out, err := p.runCLI(t, "registry", "diff", bad)
		if err == nil {
			t.Errorf("registry diff of a policy with channel %q: accepted\n%s", key, out)
		}
		bad = rpRegistry(t, func(doc map[string]any) {
			doc["channel_policy"].(map[string]any)["decisions"] = []any{map[string]any{"channel": key, "tool": "bash", "decision": "deny"}}
		})
		out, err = p.runCLI(t, "registry", "diff", bad)
		if err == nil {
			t.Errorf("registry diff of a decision rule with channel %q: accepted\n%s", key, out)
		}
	}
}

// Registry diff sees a policy change's blast radius: a
// candidate that denies mcp__fs__* on tui names the session whose last
// turn was tui's (its next tui prefix changes) and the checkpoint that
// would lose mcp__fs__run_script on resume — as a resume by tui after the
// push indeed does.
func TestRedteamPolicyFixedDiffSeesChannelPolicy(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	rpEnabled(t, p, "pt")
	tui := p.GoClient("tui")
	if _, err := tui.TurnBegin(ctx, wire.BeginTurnRequest{Session: "pt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.TurnDiscover(ctx, wire.DiscoverRequest{Session: "pt", Names: []string{"mcp__fs__run_script"}}); err != nil {
		t.Fatal(err)
	}
	end, err := tui.TurnEnd(ctx, wire.TurnRequest{Session: "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(end.Checkpoint.Loaded, "mcp__fs__run_script") {
		t.Fatalf("checkpoint %+v", end.Checkpoint)
	}
	cand, err := os.ReadFile(rpPol2(t))
	if err != nil {
		t.Fatal(err)
	}
	// registry diff reads the sessions the views bucket lists, which the
	// projection writes once per flush window, after its in-memory state
	// (what min_seq waits for): wait until pt's view holds the turn end and
	// the bucket lists pt.
	if _, err := tui.Intent(ctx, client.IntentRequest{Session: "pt", MinSeq: end.Seq}); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		l, err := tui.Sessions(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(l.Sessions, "pt") {
			return errors.New("sessions does not list pt yet")
		}
		return nil
	})
	imp, err := tui.RegistryDiff(ctx, client.RegistryDiffRequest{Registry: cand})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(imp.PrefixChanged, "pt") || len(imp.CheckpointLosses) != 1 {
		t.Errorf("registry diff of a policy denying mcp__fs__* on tui: prefix changed %v, checkpoint losses %+v (of %d checkpoints); want session pt and its checkpoint losing mcp__fs__run_script", imp.PrefixChanged, imp.CheckpointLosses, imp.Checkpoints)
	}
}

// The policy is not hashed into a contract, so a candidate
// that changes only the policy version does not change every contract
// hash, and registry diff must not say it does.
func TestRedteamPolicyFixedDiffAllHashesPolicyOnly(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	cand, err := os.ReadFile(rpRegistry(t, func(doc map[string]any) {
		doc["channel_policy"].(map[string]any)["version"] = "pol-transport-1b"
	}))
	if err != nil {
		t.Fatal(err)
	}
	imp, err := p.GoClient("tui").RegistryDiff(ctx, client.RegistryDiffRequest{Registry: cand})
	if err != nil {
		t.Fatal(err)
	}
	if imp.Diff.AllHashesChange {
		t.Errorf("registry diff of a policy-version-only change: %+v, want all_hashes_change false (the policy is not in the contract hash)", imp.Diff)
	}
}

// Resolve is a read under the caller's
// channel; while channel tui has a turn open, resolve asked by channel
// public (HTTP or NATS, any provider) must not hand it tui's frozen tools
// with bash, which explain, asked by public at the same moment, says is
// withheld.
func TestRedteamPolicyFixedResolveDuringOtherChannelsTurn(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	rpEnabled(t, p, "rt")
	if _, err := p.GoClient("tui").TurnBegin(ctx, wire.BeginTurnRequest{Session: "rt"}); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	for _, tr := range []struct {
		name string
		c    *client.Client
	}{{"http", p.GoClient("public")}, {"nats", client.NewNATS(nc, client.WithChannel("public"))}} {
		ex, err := tr.c.Explain(ctx, wire.ExplainRequest{Session: "rt", Tool: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		for _, prov := range []string{"anthropic-engine", "anthropic", "openai"} {
			v, err := tr.c.Resolve(ctx, wire.ResolveRequest{Session: "rt", Provider: prov})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(v.Tools, "bash") || bytes.Contains(v.Rendering, []byte(`"bash"`)) {
				t.Errorf("%s %s: resolve as public during tui's open turn: frozen %v, tools %v, withheld %v — holds bash, while explain as public says %s (included %v)", tr.name, prov, v.Frozen, v.Tools, v.Withheld, ex.Rule, ex.Included)
			}
		}
	}
}

// An answer recorded by a channel whose policy denies the tool does
// not allow it on another channel: public (bash denied) records
// PermissionGranted{bash, session}; tui's ask for bash stays ask.
func TestRedteamPolicyFixedGrantFromDeniedChannel(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)
	rpEnabled(t, p, "cc")
	tui, pub := p.GoClient("tui"), p.GoClient("public")
	if _, err := tui.TurnBegin(ctx, wire.BeginTurnRequest{Session: "cc"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Append(ctx, client.AppendRequest{Session: "cc", Commands: []wire.Command{{"type": "PermissionGranted", "tool": "bash", "scope": "session", "by": "mallory"}}}); err != nil {
		t.Fatal(err)
	}
	cc, err := tui.TurnCallCheck(ctx, client.CallCheckRequest{Session: "cc", Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Callable || cc.Reason != "ask" {
		t.Errorf("call-check bash in tui's turn after channel public (bash denied there) granted it: callable %v reason %s rule %s note %q, want ask", cc.Callable, cc.Reason, cc.Rule, cc.Note)
	}
}
