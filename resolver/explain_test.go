package resolver

import (
	"strings"
	"testing"
)

// Explain names the deciding rule for each case of the expansion.
func TestExplainRules(t *testing.T) {
	reg := mustLoadFile(t, "small_registry.json")
	cases := []struct {
		name     string
		req      Request
		tool     string
		included bool
		rule     string
		detail   string
	}{
		{"unknown tool", Request{}, "ghost", false, "unknown-tool", `"ghost" is not a tool of registry test-1`},
		{"error", Request{Session: Intent{Preset: "nope"}}, "bash", false, "error", "unknown preset"},
		{"override empty", Request{Override: Override{Kind: OverrideEmpty}}, "bash", false, "override-empty", "empty list"},
		{"override empty names", Request{Override: Override{Kind: OverrideNames}}, "bash", false, "override-empty", "empty list"},
		{"override names", Request{Override: Override{Kind: OverrideNames, Names: []string{"bash"}}}, "bash", true, "override-names", "exactly"},
		{"not in override names", Request{Override: Override{Kind: OverrideNames, Names: []string{"bash"}}}, "read_file", false, "not-in-override-names", "1 names"},
		{"override names unavailable", Request{Override: Override{Kind: OverrideNames, Names: []string{"gpu_run"}}}, "gpu_run", false, "unavailable", "not available"},
		{"enabled=false", Request{Session: Intent{Enabled: no}}, "bash", false, "enabled=false", "switches tools off"},
		{"enabled=false keeps web_search", Request{Session: Intent{Enabled: no, WebSearch: yes}}, "web_search", true, "web_search-overlay", "exactly [web_search]"},
		{"enabled=false drops others with web_search", Request{Session: Intent{Enabled: no, WebSearch: yes}}, "bash", false, "enabled=false", "keeps only web_search"},
		{"disabled by session", Request{Session: Intent{Disabled: []string{"bash"}}}, "bash", false, "disabled-by-session", "switched off by hand"},
		{"disabled by override", Request{Override: Override{Kind: OverrideIntent, Intent: Intent{Disabled: []string{"bash"}}}}, "bash", false, "disabled-by-override", "per-turn override intent"},
		{"overlay adds", Request{Session: Intent{WebSearch: yes}}, "web_search", true, "web_search-overlay", "adds web_search"},
		{"web_search=false keeps a preset's web_search", Request{Session: Intent{Preset: "research", WebSearch: no}}, "web_search", true, "preset:research", `preset "research"`},
		{"web_search=false adds nothing", Request{Session: Intent{Enabled: yes, WebSearch: no}}, "web_search", false, "web_search=false", "adds nothing (see docs/semantics.md#overlay), and the session intent falls back to DEFAULT_TOOLS"},
		{"web_search=false with a disabled web_search", Request{Session: Intent{Preset: "research", WebSearch: no, Disabled: []string{"web_search"}}}, "web_search", false, "web_search=false", "switched off by hand"},
		{"web_search=false with enabled=false", Request{Session: Intent{Enabled: no, WebSearch: no}}, "web_search", false, "web_search=false", "switches tools off"},
		{"enabled=false unset overlay", Request{Session: Intent{Enabled: no}}, "web_search", false, "enabled=false", "overlay is unset"},
		{"unset overlay adds nothing", Request{Session: Intent{Enabled: yes}}, "web_search", false, "not-in-defaults", "overlay is unset"},
		{"disabled web_search", Request{Session: Intent{Preset: "research", Disabled: []string{"web_search"}}}, "web_search", false, "disabled-by-session", "switched off by hand"},
		{"overlay re-adds disabled", Request{Session: Intent{Preset: "research", WebSearch: yes, Disabled: []string{"web_search"}}}, "web_search", true, "web_search-overlay", "adds"},
		{"web_search not in defaults", Request{Session: Intent{Enabled: yes}}, "web_search", false, "not-in-defaults", "DEFAULT_TOOLS"},
		{"preset keeps web_search", Request{Session: Intent{Preset: "research", WebSearch: yes}}, "web_search", true, "preset:research", `preset "research"`},
		{"picked", Request{Session: Intent{Picked: []string{"bash"}}}, "bash", true, "picked", "picks"},
		{"not picked", Request{Session: Intent{Picked: []string{"bash"}}}, "read_file", false, "not-picked", "does not name"},
		{"picked unavailable", Request{Session: Intent{Picked: []string{"gpu_run"}}}, "gpu_run", false, "unavailable", "not available"},
		{"preset", Request{Session: Intent{Preset: "research"}}, "memory_read", true, "preset:research", "includes"},
		{"not in preset", Request{Session: Intent{Preset: "research"}}, "bash", false, "not-in-preset:research", "does not include"},
		{"tool_search added for deferred picks", Request{Session: Intent{Picked: []string{"send_message"}}}, "tool_search", true, "tool_search-guard", "only way to load them"},
		{"tool_search added to a preset without it", Request{Session: Intent{Preset: "no_search"}}, "tool_search", true, "tool_search-guard", `not-in-preset:no_search`},
		{"tool_search added to override names", Request{Override: Override{Kind: OverrideNames, Names: []string{"memory_read"}}}, "tool_search", true, "tool_search-guard", "1 deferred tools"},
		{"deferred tool out without tool_search", Request{Session: Intent{Enabled: yes, Disabled: []string{"tool_search"}}}, "send_message", false, "deferred-without-tool_search", "disabled tool_search"},
		{"tool_search itself disabled", Request{Session: Intent{Enabled: yes, Disabled: []string{"tool_search"}}}, "tool_search", false, "disabled-by-session", "switched off by hand"},
		{"resident tool unaffected", Request{Session: Intent{Enabled: yes, Disabled: []string{"tool_search"}}}, "bash", true, "default-tools", "DEFAULT_TOOLS"},
		{"preset unavailable", Request{Session: Intent{Preset: "full"}}, "gpu_run", false, "unavailable", "not available"},
		{"profile preset", Request{Profile: "coder"}, "bash", true, "profile:coder", `preset "coding"`},
		{"not in profile preset", Request{Profile: "coder"}, "web_fetch", false, "not-in-profile:coder", `preset "coding" does not include`},
		{"profile tools", Request{Profile: "researcher"}, "web_fetch", true, "profile:researcher", "tools include"},
		{"not in profile tools", Request{Profile: "silent"}, "bash", false, "not-in-profile:silent", "do not include"},
		{"profile allowed", Request{Profile: "assistant"}, "send_message", true, "profile:assistant", "DEFAULT_TOOLS"},
		{"not allowed by profile", Request{Profile: "assistant"}, "bash", false, "not-allowed-by-profile:assistant", "filters the defaults"},
		{"not allowed by override", Request{Override: Override{Kind: OverrideIntent, Allowed: []string{"read_file"}}}, "bash", false, "not-allowed", "filters the defaults"},
		{"allowed adds nothing", Request{Override: Override{Kind: OverrideIntent, Allowed: []string{"memory_read"}}}, "memory_read", false, "not-in-defaults", "do not include"},
		{"default tools", Request{}, "bash", true, "default-tools", "DEFAULT_TOOLS of registry test-1"},
		{"enabled default tools", Request{Session: Intent{Enabled: yes}}, "bash", true, "default-tools", "{enabled: true}"},
		{"default unavailable", Request{}, "legacy_tool", false, "unavailable", "not available"},
		{"not in defaults", Request{}, "memory_read", false, "not-in-defaults", "do not include"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex := reg.Explain(tc.req, tc.tool)
			if ex.Tool != tc.tool || ex.Included != tc.included || ex.Rule != tc.rule || !strings.Contains(ex.Detail, tc.detail) {
				t.Fatalf("got %+v\nwant included=%v rule=%s detail~%q", ex, tc.included, tc.rule, tc.detail)
			}
			res, err := reg.Resolve(tc.req)
			if in := err == nil && contains(toolNames(res.Tools), tc.tool); in != ex.Included {
				t.Fatalf("Explain says included=%v, Resolve says %v", ex.Included, in)
			}
			if again := reg.Explain(tc.req, tc.tool); again != ex {
				t.Fatalf("Explain is not deterministic")
			}
		})
	}
}
