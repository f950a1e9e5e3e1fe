package tests

// A channel's tool policy holds on every transport of the built
// binary — HTTP, NATS micro and sessions written by a plain JetStream
// publisher — whatever the session's intent or the turn's override says.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// policyRegistryFile writes the default registry plus three MCP tools
// matched by the default pattern mcp__* and a channel policy: "public" is
// denied bash and gets at most "network" tools; bash and the MCP write
// tool are asked everywhere else. It returns the file's path.
func policyRegistryFile(t *testing.T) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	tools := doc["tools"].([]any)
	for _, n := range []struct{ name, perm string }{
		{"mcp__github__get_issue", "read"},
		{"mcp__github__create_issue", "write"},
		{"mcp__fs__run_script", "exec"},
	} {
		tools = append(tools, map[string]any{"name": n.name, "description": "MCP tool " + n.name, "parameters": map[string]any{"type": "object"}, "permission": n.perm})
	}
	doc["tools"] = tools
	doc["default_tools"] = append(doc["default_tools"].([]any), "mcp__*")
	doc["channel_policy"] = map[string]any{
		"version":  "pol-transport-1",
		"channels": map[string]any{"public": map[string]any{"deny": []string{"bash"}, "max_permission": "network"}},
		"decisions": []any{
			map[string]any{"tool": "bash", "decision": "ask"},
			map[string]any{"tool": "mcp__github__create_issue", "decision": "ask"},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A channel denied bash never receives it, over
// HTTP or NATS, for a session written by the API or by a direct JetStream
// publisher, with no override, a names override or an intent override
// that asks for it; the channel's maximum permission withholds MCP tools
// matched by pattern; another channel of the same session keeps them;
// each channel's array is byte-stable.
func TestPolicyChannelDeniedOnEveryTransport(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry", policyRegistryFile(t))
	ctx := e2eCtx(t)

	// Session "s-api": written over HTTP by the web channel.
	web := p.GoClient("web")
	res, err := web.Append(ctx, client.AppendRequest{Session: "s-api", Commands: []wire.Command{client.Enable(), client.WebSearchOn()}})
	if err != nil {
		t.Fatal(err)
	}
	// Session "s-js": the same intent, published directly to JetStream
	// in the documented wire format by a backend.
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	w := newE2EPublisher(t, nc)
	w.publish(t, "s-js", func(id string) []byte {
		return e2eWireBody(t, id, "s-js", "backend", "svc:test", "ToolsToggled", map[string]any{"enabled": true})
	})
	lastJS := w.publish(t, "s-js", func(id string) []byte {
		return e2eWireBody(t, id, "s-js", "backend", "svc:test", "WebSearchSet", map[string]any{"enabled": true})
	})
	minSeq := map[string]uint64{"s-api": res.LastSeq, "s-js": lastJS}

	withheld := []string{"bash", "mcp__github__create_issue", "mcp__fs__run_script"}
	overrides := map[string]*wire.Override{
		"none":   nil,
		"names":  {Kind: intent.OverrideNames, Names: []string{"bash", "read_file", "mcp__github__create_issue", "mcp__fs__run_script"}},
		"intent": {Kind: intent.OverrideIntent, Intent: wire.Intent{Picked: []string{"bash", "mcp__github__create_issue", "mcp__github__get_issue"}}},
	}
	transports := map[string]func(channel string) *client.Client{
		"http": func(ch string) *client.Client { return p.GoClient(ch) },
		"nats": func(ch string) *client.Client {
			return client.NewNATS(nc, client.WithChannel(ch), client.WithActor("test"))
		},
	}
	for tname, mk := range transports {
		pub, tui := mk("public"), mk("tui")
		for session, seq := range minSeq {
			for oname, ov := range overrides {
				req := wire.ResolveRequest{Session: session, Provider: "anthropic", Override: ov, MinSeq: seq}
				pv, err := pub.Resolve(ctx, req)
				if err != nil {
					t.Fatalf("%s %s override %s: resolve as public: %v", tname, session, oname, err)
				}
				tv, err := tui.Resolve(ctx, req)
				if err != nil {
					t.Fatalf("%s %s override %s: resolve as tui: %v", tname, session, oname, err)
				}
				for _, name := range withheld {
					if slices.Contains(pv.Tools, name) || slices.Contains(pv.Provider, name) || slices.Contains(pv.Catalog, name) {
						t.Errorf("%s %s override %s: public channel received %s: tools %v catalog %v", tname, session, oname, name, pv.Tools, pv.Catalog)
					}
					if bytes.Contains(pv.Rendering, []byte(`"`+name+`"`)) {
						t.Errorf("%s %s override %s: public rendering names %s", tname, session, oname, name)
					}
				}
				if pv.Policy != "pol-transport-1" {
					t.Errorf("%s %s override %s: public view policy %q, want pol-transport-1", tname, session, oname, pv.Policy)
				}
				if oname != "names" && !slices.Contains(pv.Tools, "mcp__github__get_issue") {
					t.Errorf("%s %s override %s: public lost the read MCP tool: %v", tname, session, oname, pv.Tools)
				}
				// The other channel of the same session keeps what the
				// intent or override gives it.
				if !slices.Contains(tv.Tools, "bash") || !slices.Contains(tv.Tools, "mcp__github__create_issue") {
					t.Errorf("%s %s override %s: tui tools %v, want bash and mcp__github__create_issue", tname, session, oname, tv.Tools)
				}
				if len(tv.Withheld) != 0 {
					t.Errorf("%s %s override %s: tui withheld %v, want none", tname, session, oname, tv.Withheld)
				}
				// Byte-stable per channel.
				again, err := pub.Resolve(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again.Rendering, pv.Rendering) || again.PrefixHash != pv.PrefixHash {
					t.Errorf("%s %s override %s: public rendering changed between two reads", tname, session, oname)
				}
				if bytes.Equal(tv.Rendering, pv.Rendering) {
					t.Errorf("%s %s override %s: public and tui renderings are identical", tname, session, oname)
				}
			}
		}
	}

	// explain names the policy, its version and the rule, for the
	// caller's channel, on both transports.
	for tname, mk := range transports {
		ex, err := mk("public").Explain(ctx, wire.ExplainRequest{Session: "s-api", Tool: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Included || ex.Rule != "channel-deny:public:bash@pol-transport-1" || !strings.Contains(ex.Detail, "pol-transport-1") {
			t.Errorf("%s: explain bash as public: %+v, want withheld by channel-deny:public:bash@pol-transport-1", tname, ex)
		}
		ex, err = mk("tui").Explain(ctx, wire.ExplainRequest{Session: "s-api", Tool: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		if !ex.Included {
			t.Errorf("%s: explain bash as tui: %+v, want included", tname, ex)
		}
	}

	// A turn begun by the public channel with an override asking for bash
	// freezes no bash, and a call to bash in that turn is refused.
	pub := p.GoClient("public")
	turn, err := pub.TurnBegin(ctx, wire.BeginTurnRequest{Session: "s-js", Provider: "anthropic", Override: overrides["names"]})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(turn.Tools, "bash") || !slices.Contains(turn.Withheld, "bash") {
		t.Fatalf("public turn tools %v withheld %v: want bash withheld", turn.Tools, turn.Withheld)
	}
	cc, err := pub.TurnCallCheck(ctx, client.CallCheckRequest{Session: "s-js", Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Callable {
		t.Fatalf("call-check bash in the public turn: %+v, want not callable", cc)
	}
	cc, err = pub.TurnCallCheck(ctx, client.CallCheckRequest{Session: "s-js", Tool: "read_file"})
	if err != nil {
		t.Fatal(err)
	}
	if !cc.Callable {
		t.Fatalf("call-check read_file in the public turn: %+v, want callable", cc)
	}
	// The turn ends with a checkpoint whose contract entries add up to
	// the turn's contract hash (before: 400 on every policy registry, the
	// policy version was hashed into the contract but not the entries).
	ck, err := pub.TurnEnd(ctx, wire.TurnRequest{Session: "s-js"})
	if err != nil {
		t.Fatalf("end the public turn on a policy registry: %v", err)
	}
	if ck.Checkpoint.ContractHash != turn.ContractHash {
		t.Fatalf("public turn's checkpoint %+v, want contract hash %s", ck.Checkpoint, turn.ContractHash)
	}
	if _, err := pub.Resume(ctx, wire.ResumeRequest{Session: "s-js"}); err != nil {
		t.Fatalf("resume after the public turn: %v", err)
	}
}
