package resolver

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// The contract hash covers every contract field of every
// tool, the tool order and the registry version.
func TestContractHashCoversEveryField(t *testing.T) {
	base := []Tool{
		{Name: "a", Description: "A.", Parameters: json.RawMessage(`{"type":"object"}`), Available: true, Permission: "read"},
		{Name: "b", Description: "B.", Parameters: json.RawMessage(`{"type":"object"}`), Available: true, Permission: "exec", Deferred: true},
	}
	h0 := ContractHash("v1", base)
	if !hexSHA256.MatchString(h0) {
		t.Fatalf("hash %q is not hex sha256", h0)
	}
	if ContractHash("v1", append([]Tool{}, base...)) != h0 {
		t.Fatal("hash is not a function of its input")
	}
	muts := map[string]func(ts []Tool) []Tool{
		"name":        func(ts []Tool) []Tool { ts[0].Name = "c"; return ts },
		"description": func(ts []Tool) []Tool { ts[0].Description = "A!"; return ts },
		"parameters": func(ts []Tool) []Tool {
			ts[0].Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
			return ts
		},
		"permission": func(ts []Tool) []Tool { ts[0].Permission = "write"; return ts },
		"available":  func(ts []Tool) []Tool { ts[0].Available = false; return ts },
		"deferred":   func(ts []Tool) []Tool { ts[0].Deferred = true; return ts },
		"order":      func(ts []Tool) []Tool { ts[0], ts[1] = ts[1], ts[0]; return ts },
		"drop":       func(ts []Tool) []Tool { return ts[:1] },
		"boundary":   func(ts []Tool) []Tool { ts[0].Name, ts[0].Description = "aA", "."; return ts },
	}
	for name, mut := range muts {
		ts := mut(append([]Tool{}, base...))
		if ContractHash("v1", ts) == h0 {
			t.Errorf("changing %s does not change the contract hash", name)
		}
	}
	if ContractHash("v2", base) == h0 {
		t.Error("changing the registry version does not change the contract hash")
	}
	if ContractHash("v1", nil) == ContractHash("v2", nil) || !hexSHA256.MatchString(ContractHash("", nil)) {
		t.Error("empty contracts of two versions collide")
	}
}

// ToolHash tells which tool changed; it ignores position.
func TestToolHash(t *testing.T) {
	a := Tool{Name: "a", Description: "A.", Parameters: json.RawMessage(`{"type":"object"}`), Available: true}
	h := ToolHash(a)
	if !hexSHA256.MatchString(h) || ToolHash(a) != h {
		t.Fatalf("ToolHash %q", h)
	}
	b := a
	b.Description = "A, changed."
	if ToolHash(b) == h {
		t.Fatal("ToolHash ignores the description")
	}
	// A tool larger than toolDigest's stack buffer hashes the same way.
	long := a
	long.Description = strings.Repeat("x", 600)
	long2 := long
	long2.Description = strings.Repeat("x", 599) + "y"
	first, again := ToolHash(long), ToolHash(long) // deterministic across calls
	if first == h || first != again || first == ToolHash(long2) {
		t.Fatal("ToolHash of a large tool")
	}
}

// A resolution's hash is ContractHash over its tools, for the default
// registry too.
func TestResolutionContractHash(t *testing.T) {
	reg := Default()
	for _, req := range []Request{{}, {Session: Intent{Enabled: no}}, {Session: Intent{Preset: "full", WebSearch: yes}}} {
		res, err := reg.Resolve(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.ContractHash != ContractHash(reg.Version(), res.Tools) {
			t.Errorf("request %+v: hash mismatch", req)
		}
	}
}

// A contract hash can be recomputed from its tools' ToolHash values.
func TestContractHashFromToolHashes(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	res, err := reg.Resolve(Request{Session: Intent{Preset: "full", WebSearch: yes}})
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]string, len(res.Tools))
	for i, tool := range res.Tools {
		hashes[i] = ToolHash(tool)
	}
	got, err := ContractHashFromToolHashes(reg.Version(), hashes)
	if err != nil || got != res.ContractHash {
		t.Fatalf("got %s, %v; want %s", got, err, res.ContractHash)
	}
	if empty, _ := ContractHashFromToolHashes("v", nil); empty != ContractHash("v", nil) {
		t.Fatal("empty contract differs")
	}
	for _, bad := range []string{"", "zz", hashes[0][:63] + "g"} {
		if _, err := ContractHashFromToolHashes("v", []string{bad}); err == nil {
			t.Errorf("accepted tool hash %q", bad)
		}
	}
}

// A resolution from Registry.Resolve answers ToolHashAt from the
// digests its contract hash was computed with: the same as hashing each
// tool again, for every tool, budget-deferred ones included; a
// resolution built by hand hashes.
func TestToolHashAtMatchesToolHash(t *testing.T) {
	budget := loadMCP(t, `,"auto_defer":{"context_window":2000,"max_share":0.05}`)
	for _, reg := range []*Registry{Default(), budget} {
		res, err := reg.Resolve(Request{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.digests) != len(res.Tools)*32 {
			t.Fatalf("resolution keeps %d digest bytes for %d tools", len(res.digests), len(res.Tools))
		}
		deferred := 0
		for i := range res.Tools {
			if res.Tools[i].Deferred {
				deferred++
			}
			if got, want := res.ToolHashAt(i), ToolHash(res.Tools[i]); got != want {
				t.Errorf("%s: ToolHashAt(%d) %s = %s, want %s", reg.Version(), i, res.Tools[i].Name, got, want)
			}
		}
		if deferred == 0 {
			t.Errorf("%s: no deferred tool; the test needs one", reg.Version())
		}
		hand := Resolution{Tools: res.Tools[:2]}
		if got, want := hand.ToolHashAt(1), ToolHash(res.Tools[1]); got != want {
			t.Errorf("hand-built ToolHashAt(1) = %s, want %s", got, want)
		}
	}
}
