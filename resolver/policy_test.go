package resolver

// Tests of the channel policy and permission decisions.

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// policyRegistry is the default registry plus two MCP tools and pol.
func policyRegistry(t testing.TB, pol string) *Registry {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	tools := doc["tools"].([]any)
	for _, n := range []struct{ name, perm string }{{"mcp__github__get_issue", "read"}, {"mcp__github__create_issue", "write"}} {
		tools = append(tools, map[string]any{"name": n.name, "description": "GitHub " + n.name, "parameters": map[string]any{"type": "object"}, "permission": n.perm})
	}
	doc["tools"] = tools
	doc["default_tools"] = append(doc["default_tools"].([]any), "mcp__github__*")
	var p any
	if err := json.Unmarshal([]byte(pol), &p); err != nil {
		t.Fatal(err)
	}
	doc["channel_policy"] = p
	b, _ := json.Marshal(doc)
	r, err := Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const testPolicy = `{"version":"pol-1",
 "channels":{"public":{"deny":["bash"],"max_permission":"network"},"*":{"deny":["gpu_run"]}},
 "decisions":[{"tool":"*","decision":"allow"},{"tool":"bash*","decision":"ask"},{"tool":"bash","decision":"deny","channel":"slack"},
  {"tool":"mcp__github__*","decision":"ask"},{"tool":"mcp__github__get_issue","decision":"allow"},
  {"tool":"write_file","profile":"coder","decision":"ask"},{"tool":"write_file","profile":"coder","channel":"web","decision":"allow"}]}`

// A channel denied bash never receives it, whatever the
// intent or the override asks; another channel of the same registry does.
func TestPolicyChannelNeverReceivesDenied(t *testing.T) {
	r := policyRegistry(t, testPolicy)
	reqs := []Request{
		{},
		{Session: Intent{Picked: []string{"bash", "read_file"}}},
		{Session: Intent{Preset: "full"}},
		{Override: Override{Kind: OverrideNames, Names: []string{"bash"}}},
		{Override: Override{Kind: OverrideIntent, Intent: Intent{Picked: []string{"bash"}}}},
		{Profile: "coder"},
	}
	for i, req := range reqs {
		req.Channel = "public"
		res, err := r.Resolve(req)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if slices.Contains(res.Names(), "bash") {
			t.Errorf("%d: channel public received bash: %v", i, res.Names())
		}
		if res.Policy != "pol-1" {
			t.Errorf("%d: Policy = %q, want pol-1", i, res.Policy)
		}
		ex := r.Explain(req, "bash")
		if ex.Included || (strings.Contains(strings.Join(res.Withheld, ","), "bash") && ex.Rule != "channel-deny:public:bash@pol-1") {
			t.Errorf("%d: explain bash = %+v", i, ex)
		}
		req.Channel = "tui"
		other, _ := r.Resolve(req)
		if slices.Contains(res.Withheld, "bash") && !slices.Contains(other.Names(), "bash") {
			t.Errorf("%d: channel tui lost bash too: %v", i, other.Names())
		}
	}
}

// The maximum permission holds for MCP tools matched by
// pattern, and a channel only narrows: its set is a subsequence of the
// unfiltered one.
func TestPolicyMaxPermissionNarrowsMCP(t *testing.T) {
	r := policyRegistry(t, testPolicy)
	all, _ := r.Resolve(Request{Channel: "tui"})
	pub, _ := r.Resolve(Request{Channel: "public"})
	if !slices.Contains(all.Names(), "mcp__github__create_issue") {
		t.Fatalf("tui lacks the MCP write tool: %v", all.Names())
	}
	pol := r.Policy()
	for _, tool := range pub.Tools {
		if pol.rank(tool.Permission) > pol.rank("network") {
			t.Errorf("public received %s with permission %s above network", tool.Name, tool.Permission)
		}
	}
	if slices.Contains(pub.Names(), "mcp__github__create_issue") || !slices.Contains(pub.Names(), "mcp__github__get_issue") {
		t.Errorf("public MCP tools = %v; want get_issue only", pub.Names())
	}
	k := 0
	for _, n := range all.Names() {
		if k < len(pub.Tools) && pub.Tools[k].Name == n {
			k++
		}
	}
	if k != len(pub.Tools) {
		t.Errorf("public %v is not a narrowing of %v", pub.Names(), all.Names())
	}
	if pub.ContractHash == all.ContractHash {
		t.Error("narrowed set has the same contract hash")
	}
	d := r.Decide("public", "", "mcp__github__create_issue")
	if d.Decision != DecisionDeny || d.Rule != "channel-max-permission:public:network@pol-1" {
		t.Errorf("Decide = %+v", d)
	}
}

// The result is deterministic and byte-stable per channel
// (cached and uncached agree; rendering is identical). A policy's version
// alone is not part of the contract hash: the contract is the tools, and
// the (name, ToolHash) entries of a checkpoint must add up to it;
// a policy that withholds a tool changes the contract through the tools.
func TestPolicyDeterministicPerChannel(t *testing.T) {
	r := policyRegistry(t, testPolicy)
	for _, ch := range []string{"public", "tui", "", "slack"} {
		a, _ := r.Resolve(Request{Channel: ch, Profile: "coder"})
		b, _ := r.ResolveUncached(Request{Channel: ch, Profile: "coder"})
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("channel %q: cached and uncached differ", ch)
		}
	}
	r2 := policyRegistry(t, strings.Replace(testPolicy, "pol-1", "pol-2", 1))
	a, _ := r.Resolve(Request{Channel: "tui"})
	b, _ := r2.Resolve(Request{Channel: "tui"})
	if !slices.Equal(a.Names(), b.Names()) || a.ContractHash != b.ContractHash {
		t.Error("a policy version change alone changed the tui contract")
	}
	hashes := make([]string, len(a.Tools))
	for i, tool := range a.Tools {
		hashes[i] = ToolHash(tool)
	}
	if sum, err := ContractHashFromToolHashes(a.RegistryVersion, hashes); err != nil || sum != a.ContractHash {
		t.Errorf("tool hashes of a policy registry's resolution add up to %s (%v), want its contract hash %s", sum, err, a.ContractHash)
	}
	pub, _ := r.Resolve(Request{Channel: "public"})
	if pub.ContractHash == a.ContractHash {
		t.Error("the public channel's narrowed set has the tui contract hash")
	}
	if Default().Policy() != nil {
		t.Error("the default registry has a policy")
	}
}

// Most specific wins, in the documented order.
func TestPolicyDecideMostSpecific(t *testing.T) {
	r := policyRegistry(t, testPolicy)
	cases := []struct {
		channel, profile, tool, want, rule string
	}{
		{"tui", "", "read_file", DecisionAllow, "decision[0]:allow:*:*:*@pol-1"},
		{"tui", "", "bash_output", DecisionAsk, "decision[1]:ask:*:*:bash*@pol-1"},
		{"tui", "", "bash", DecisionAsk, "decision[1]:ask:*:*:bash*@pol-1"},
		{"slack", "", "bash", DecisionDeny, "decision[2]:deny:slack:*:bash@pol-1"},
		{"public", "", "bash", DecisionDeny, "channel-deny:public:bash@pol-1"},
		{"tui", "", "gpu_run", DecisionDeny, "channel-deny:*:gpu_run@pol-1"},
		{"tui", "", "mcp__github__create_issue", DecisionAsk, "decision[3]:ask:*:*:mcp__github__*@pol-1"},
		{"tui", "", "mcp__github__get_issue", DecisionAllow, "decision[4]:allow:*:*:mcp__github__get_issue@pol-1"},
		{"tui", "coder", "write_file", DecisionAsk, "decision[5]:ask:*:coder:write_file@pol-1"},
		{"web", "coder", "write_file", DecisionAllow, "decision[6]:allow:web:coder:write_file@pol-1"},
		{"web", "", "write_file", DecisionAllow, "decision[0]:allow:*:*:*@pol-1"},
	}
	for _, c := range cases {
		got := r.Decide(c.channel, c.profile, c.tool)
		if got.Decision != c.want || got.Rule != c.rule {
			t.Errorf("Decide(%q,%q,%q) = %+v; want %s by %s", c.channel, c.profile, c.tool, got, c.want, c.rule)
		}
	}
	if d := Default().Decide("x", "", "bash"); d.Decision != DecisionAllow || d.Rule != "default-allow" {
		t.Errorf("no policy: %+v", d)
	}
}

// The policy round-trips through the canonical encoding, and bad
// policies are refused naming the value.
func TestPolicyLoadAndMarshal(t *testing.T) {
	r := policyRegistry(t, testPolicy)
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Load(b)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	b2, _ := r2.MarshalJSON()
	if string(b) != string(b2) {
		t.Error("canonical encoding is not stable")
	}
	a, _ := r.Resolve(Request{Channel: "public"})
	c, _ := r2.Resolve(Request{Channel: "public"})
	if a.ContractHash != c.ContractHash {
		t.Error("reloaded registry resolves differently")
	}
	for _, bad := range []struct{ pol, want string }{
		{`{"channels":{}}`, "channel_policy.version: missing"},
		{`{"version":"p","channels":{"x":{"max_permission":"root"}}}`, `max_permission "root"`},
		{`{"version":"p","decisions":[{"tool":"bash","decision":"maybe"}]}`, `decision "maybe"`},
		{`{"version":"p","decisions":[{"tool":"bash","decision":"ask"},{"tool":"bash","decision":"allow"}]}`, "same channel, profile and tool as [0]"},
		{`{"version":"p","decisions":[{"tool":"bash","profile":"nobody","decision":"ask"}]}`, `profile "nobody"`},
		{`{"version":"p","channels":{"x":{"deny":["b a"]}}}`, `"b a"`},
		{`{"version":"p","extra":1}`, `unknown key "extra"`},
	} {
		func() {
			var doc map[string]any
			_ = json.Unmarshal(DefaultRegistryJSON(), &doc)
			var p any
			_ = json.Unmarshal([]byte(bad.pol), &p)
			doc["channel_policy"] = p
			data, _ := json.Marshal(doc)
			_, err := Load(data)
			if !errors.Is(err, ErrInvalidRegistry) || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("policy %s: err = %v; want one naming %s", bad.pol, err, bad.want)
			}
		}()
	}
}
