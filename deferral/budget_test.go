package deferral

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
)

// within reports whether est is within tol (a fraction) of real.
func within(est, real int, tol float64) bool {
	if real == 0 {
		return est == 0
	}
	return math.Abs(float64(est-real))/float64(real) <= tol
}

// §7.5: each half of the estimate is checked separately against a
// real BPE tokenizer on the actual payload: the rendered Anthropic tools
// array for the resident half, CatalogText for the catalog half. The two
// errors have opposite signs and could hide each other in a total.
//
// Shapes: the default registry, tiny descriptions, huge
// schemas, long prose, Chinese descriptions, MCP-style names, and 10k
// tools (whose catalog is over its budget and lists servers with counts).
func TestEstimateHalvesMatchTokenizer(t *testing.T) {
	regs := allRegistries(t)
	regs["10k tools"] = tenKRegistry(t)
	for regName, reg := range regs {
		cases := map[string]resolver.Request{"default session": defaultSession()}
		if _, ok := reg.Preset("full"); ok {
			cases["full preset"] = presetSession("full")
		}
		for caseName, req := range cases {
			s := SplitResolution(resolve(t, reg, req), nil)
			est := Estimate(s)
			resident := 0
			if len(s.Provider) > 0 {
				resident = mustCount(t, string(resolver.RenderAnthropic(s.Provider)))
			}
			catalog := mustCount(t, s.CatalogText)
			t.Logf("%s / %s: resident est %d real %d (%+.1f%%), catalog est %d real %d (%+.1f%%), %d resident / %d deferred, grouped %v",
				regName, caseName, est.Resident, resident, pct(est.Resident, resident),
				est.Catalog, catalog, pct(est.Catalog, catalog), est.ResidentTools, est.DeferredTools, s.CatalogGrouped)
			if !within(est.Resident, resident, 0.15) {
				t.Errorf("%s / %s: resident estimate %d vs real %d: off by more than 15%%", regName, caseName, est.Resident, resident)
			}
			if !within(est.Catalog, catalog, 0.15) {
				t.Errorf("%s / %s: catalog estimate %d vs real %d: off by more than 15%%", regName, caseName, est.Catalog, catalog)
			}
			if est.Total != est.Resident+est.Catalog || est.ResidentTools != len(s.Provider) || est.DeferredTools != len(s.Catalog) {
				t.Errorf("%s / %s: inconsistent budget %+v", regName, caseName, est)
			}
		}
	}
}

// Every tool loaded at once (the largest provider array a turn can
// reach) is still within 15% of the real count.
func TestEstimateAllLoadedMatchesTokenizer(t *testing.T) {
	regs := allRegistries(t)
	regs["10k tools"] = tenKRegistry(t)
	for regName, reg := range regs {
		tools := reg.Tools()
		s := SplitTools(tools, func(string) bool { return true })
		est := Estimate(s).Resident
		real := mustCount(t, string(resolver.RenderAnthropic(s.Provider)))
		t.Logf("%s all %d tools: est %d real %d (%+.1f%%)", regName, len(tools), est, real, pct(est, real))
		if !within(est, real, 0.15) {
			t.Errorf("%s: all-tools estimate %d vs real %d: off by more than 15%%", regName, est, real)
		}
	}
}

func pct(est, real int) float64 {
	if real == 0 {
		return 0
	}
	return 100 * float64(est-real) / float64(real)
}

// A resident tool costs description + schema + wrapper; a deferred
// one costs its name and a newline, never its description.
func TestEstimateCountsWhatIsSent(t *testing.T) {
	base := resolver.Tool{Name: "send_message", Description: "Send.", Parameters: json.RawMessage(`{"type":"object"}`)}
	long := base
	long.Description = strings.Repeat("Send a message to another session. ", 40)
	big := base
	big.Parameters = json.RawMessage(`{"properties":{` + strings.Repeat(`"a":{"type":"string"},`, 40) + `"b":{"type":"string"}},"type":"object"}`)
	if EstimateTool(long) <= EstimateTool(base)+200 {
		t.Errorf("description not counted: %d vs %d", EstimateTool(long), EstimateTool(base))
	}
	if EstimateTool(big) <= EstimateTool(base)+100 {
		t.Errorf("schema not counted: %d vs %d", EstimateTool(big), EstimateTool(base))
	}
	if EstimateTool(resolver.Tool{Name: "x"}) < toolWrapperTokens {
		t.Errorf("wrapper not counted")
	}
	if d := EstimateDeferred("send_message"); d != mustCount(t, "send_message\n") {
		t.Errorf("EstimateDeferred(send_message) = %d, real %d", d, mustCount(t, "send_message\n"))
	}
	s := Split{Catalog: []string{"send_message"}}
	if got, want := Estimate(s).Catalog, catalogHeaderTokens+EstimateDeferred("send_message"); got != want {
		t.Errorf("catalog estimate = %d, want %d (header + name line)", got, want)
	}
}

// The fixed catalog header's cost is what the tokenizer says.
func TestCatalogHeaderTokens(t *testing.T) {
	if n := mustCount(t, CatalogHeader+"\n"); n != catalogHeaderTokens {
		t.Errorf("header is %d tokens, catalogHeaderTokens = %d", n, catalogHeaderTokens)
	}
}

// NameTokens follows the tokenizer on the registries' names, MCP-style
// names (mcp__server__camelCase, API-post-search) as well as builtin ones,
// each group within 10%.
func TestNameTokensMatchTokenizer(t *testing.T) {
	var mcpEst, mcpReal, est, real int
	regs := allRegistries(t)
	regs["10k"] = tenKRegistry(t)
	for _, reg := range regs {
		for _, tl := range reg.Tools() {
			e, r := EstimateDeferred(tl.Name), mustCount(t, tl.Name+"\n")
			if _, _, ok := resolver.NamespaceOf(tl.Name); ok {
				mcpEst, mcpReal = mcpEst+e, mcpReal+r
			} else {
				est, real = est+e, real+r
			}
		}
	}
	t.Logf("builtin names: est %d real %d (%+.1f%%); MCP names: est %d real %d (%+.1f%%)", est, real, pct(est, real), mcpEst, mcpReal, pct(mcpEst, mcpReal))
	if !within(est, real, 0.10) || !within(mcpEst, mcpReal, 0.10) {
		t.Errorf("name lines: builtin estimate %d vs real %d, MCP %d vs %d", est, real, mcpEst, mcpReal)
	}
}

// The measuring stick is cl100k_base and counts as tiktoken does.
func TestTokenizer(t *testing.T) {
	tk := NewTokenizer()
	if tk.Encoding() != "cl100k_base" || Encoding != "cl100k_base" {
		t.Errorf("encoding = %s / %s", tk.Encoding(), Encoding)
	}
	for text, want := range map[string]int{"": 0, "hello world": 2, "tool_search\n": 3} {
		if n, err := tk.Count(text); err != nil || n != want {
			t.Errorf("Count(%q) = %d, %v; want %d", text, n, err, want)
		}
		if n := mustCount(t, text); n != want {
			t.Errorf("package Count(%q) = %d, want %d", text, n, want)
		}
	}
}
