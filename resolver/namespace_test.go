package resolver

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mcpRegistry is a registry with two MCP servers and builtins; %s is
// spliced into the top-level object.
const mcpRegistry = `{
 "version": "mcp-1",
 "tools": [
  {"name":"read_file","description":"Read a file.","parameters":{"type":"object"}},
  {"name":"tool_search","description":"Load deferred tools.","parameters":{"type":"object"}},
  {"name":"mcp__github__create_issue","description":"Create a GitHub issue.","parameters":{"type":"object","properties":{"title":{"type":"string"}}}},
  {"name":"mcp__github__list_issues","description":"List GitHub issues.","parameters":{"type":"object"}},
  {"name":"mcp__github__get_me","description":"Get the authenticated user.","parameters":{"type":"object"},"defer":false},
  {"name":"mcp__jira__createJiraIssue","description":"Create a Jira issue in a project; a long description: ` + "%[2]s" + `","parameters":{"type":"object"}},
  {"name":"mcp__jira__getJiraIssue","description":"Get a Jira issue.","parameters":{"type":"object"}}
 ],
 "namespaces": {"github": {"description":"GitHub issues and pull requests.","defer":true}, "jira": {"description":"Jira issues."}},
 "default_tools": ["read_file","tool_search","mcp__*"]%[1]s
}`

func loadMCP(t *testing.T, extra string) *Registry {
	t.Helper()
	r, err := Load(fmt.Appendf(nil, mcpRegistry, extra, strings.Repeat("words ", 200)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return r
}

// Names split into namespace and tool as MCP clients write them.
func TestNamespaceOf(t *testing.T) {
	for in, want := range map[string][2]string{
		"mcp__github__create_issue": {"github", "create_issue"},
		"mcp__google_drive__search": {"google_drive", "search"},
		"mcp__a__b__c":              {"a", "b__c"},
	} {
		ns, short, ok := NamespaceOf(in)
		if !ok || ns != want[0] || short != want[1] {
			t.Errorf("NamespaceOf(%q) = %q, %q, %v", in, ns, short, ok)
		}
	}
	for _, in := range []string{"read_file", "mcp__", "mcp__x", "mcp____y", "mcp__x__", "MCP__x__y"} {
		if _, _, ok := NamespaceOf(in); ok {
			t.Errorf("NamespaceOf(%q) ok", in)
		}
	}
}

// A tool's own defer flag wins over its namespace's flag,
// which wins over RESIDENT_TOOLS; tool_search is never deferred; patterns
// in registry lists expand in registry order.
func TestDeferralFlags(t *testing.T) {
	r := loadMCP(t, "")
	want := map[string]bool{
		"read_file": false, "tool_search": false,
		"mcp__github__create_issue": true, "mcp__github__list_issues": true, // namespace flag
		"mcp__github__get_me":        false,                                   // its own flag
		"mcp__jira__createJiraIssue": false, "mcp__jira__getJiraIssue": false, // in the derived RESIDENT_TOOLS
	}
	for name, deferred := range want {
		tool, _ := r.Tool(name)
		if tool.Deferred != deferred || r.IsResident(name) == deferred {
			t.Errorf("%s: deferred %v, want %v", name, tool.Deferred, deferred)
		}
	}
	if got, want := r.DefaultTools(), []string{"read_file", "tool_search", "mcp__github__create_issue", "mcp__github__list_issues", "mcp__github__get_me", "mcp__jira__createJiraIssue", "mcp__jira__getJiraIssue"}; !slices.Equal(got, want) {
		t.Errorf("default_tools with a pattern = %v, want %v", got, want)
	}
	ns, ok := r.Namespace("github")
	if !ok || ns.Description != "GitHub issues and pull requests." || ns.Defer == nil || !*ns.Defer {
		t.Errorf("namespace github = %+v, %v", ns, ok)
	}
	res, err := r.Resolve(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Namespaces) != 2 || res.Namespaces[0].Name != "github" || res.Namespaces[1].Description != "Jira issues." {
		t.Errorf("resolution namespaces = %+v", res.Namespaces)
	}
}

// Bad namespace and flag settings are refused with the fix.
func TestNamespaceLoadErrors(t *testing.T) {
	for extra, want := range map[string]string{
		`,"auto_defer":{"context_window":10}`:                           "auto_defer.context_window",
		`,"auto_defer":{"context_window":200000,"max_share":2}`:         "auto_defer.max_share",
		`,"auto_defer":{"context_window":200000,"max_share":0.1,"x":1}`: `unknown key "x"`,
		`,"catalog_max_tokens":5`:                                       "catalog_max_tokens",
		`,"resident_tools":["mcp__nope__*"]`:                            `pattern "mcp__nope__*" matches no tool`,
		`,"presets":{"p":["mcp.*"]}`:                                    `"mcp.*" is not`,
	} {
		_, err := Load(fmt.Appendf(nil, mcpRegistry, extra, ""))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("extra %s: error %v, want one naming %s", extra, err, want)
		}
	}
	bad := strings.Replace(mcpRegistry, `"jira": {"description":"Jira issues."}`, `"jria": {"description":"typo"}, "jira": {"description":"Jira issues."}`, 1)
	if _, err := Load(fmt.Appendf(nil, bad, "", "")); err == nil || !strings.Contains(err.Error(), `no tool is named mcp__jria__`) {
		t.Errorf("namespace without tools: %v", err)
	}
	flag := strings.Replace(mcpRegistry, `"description":"Load deferred tools.","parameters":{"type":"object"}`, `"description":"Load deferred tools.","parameters":{"type":"object"},"defer":true`, 1)
	if _, err := Load(fmt.Appendf(nil, flag, "", "")); err == nil || !strings.Contains(err.Error(), "can never be deferred") {
		t.Errorf("tool_search with defer:true: %v", err)
	}
}

// The canonical encoding keeps flags, namespaces,
// auto_defer and the catalog budget, and loads back to the same registry.
func TestMarshalKeepsNamespaces(t *testing.T) {
	r := loadMCP(t, `,"auto_defer":{"context_window":200000,"max_share":0.05},"catalog_max_tokens":500`)
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"defer":false`, `"namespaces":{"github":{"description":"GitHub issues and pull requests.","defer":true}`, `"auto_defer":{"context_window":200000,"max_share":0.05}`, `"catalog_max_tokens":500`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("canonical form lacks %s:\n%s", want, b)
		}
	}
	r2, err := Load(b)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	b2, _ := r2.MarshalJSON()
	if !bytes.Equal(b, b2) {
		t.Errorf("not a fixed point:\n%s\n%s", b, b2)
	}
	for _, name := range []string{"mcp__github__get_me", "mcp__github__list_issues"} {
		a, _ := r.Tool(name)
		c, _ := r2.Tool(name)
		if a.Deferred != c.Deferred {
			t.Errorf("%s: mark changed on reload", name)
		}
	}
}

// Auto_defer defers the largest tools without an explicit
// decision while the resident ones exceed the budget, and then brings
// tool_search in; tools with a flag stay as flagged.
func TestAutoDefer(t *testing.T) {
	off := loadMCP(t, "")
	on := loadMCP(t, `,"auto_defer":{"context_window":10000,"max_share":0.02}`) // 200 tokens
	a, _ := off.Resolve(Request{})
	b, err := on.Resolve(Request{})
	if err != nil {
		t.Fatal(err)
	}
	marks := func(res *Resolution) map[string]bool {
		m := map[string]bool{}
		for _, tl := range res.Tools {
			m[tl.Name] = tl.Deferred
		}
		return m
	}
	ma, mb := marks(a), marks(b)
	if ma["mcp__jira__createJiraIssue"] || !mb["mcp__jira__createJiraIssue"] {
		t.Errorf("the large jira tool: deferred %v without, %v with auto_defer; want false, true", ma["mcp__jira__createJiraIssue"], mb["mcp__jira__createJiraIssue"])
	}
	if mb["mcp__jira__getJiraIssue"] || mb["read_file"] || mb["mcp__github__get_me"] {
		t.Errorf("small or flagged tools deferred: %v", mb)
	}
	resident := 0
	for _, tl := range b.Tools {
		if !tl.Deferred {
			resident += EstimateToolTokens(&tl)
		}
	}
	if resident > 200 {
		t.Errorf("resident tools cost %d tokens, budget 200", resident)
	}
	if a.ContractHash == b.ContractHash {
		t.Errorf("the contract hash must say a tool is sent deferred")
	}
	if b.ContractHash != ContractHash(b.RegistryVersion, b.Tools) {
		t.Errorf("contract hash does not match the tools with their budget marks")
	}
	// The cached path returns the same resolution, allocation-free.
	if c, _ := on.Resolve(Request{}); c != b {
		t.Errorf("cached resolve returned a different resolution")
	}
	// Explicit resident_tools pin their tools.
	pinned := loadMCP(t, `,"resident_tools":["read_file","tool_search","mcp__jira__*"],"auto_defer":{"context_window":10000,"max_share":0.02}`)
	p, _ := pinned.Resolve(Request{})
	if marks(p)["mcp__jira__createJiraIssue"] {
		t.Errorf("a tool named in an explicit resident_tools list was deferred by budget")
	}
}

// Patterns in disabled, picked, override names and allowed
// select every tool they match, in registry order; Explain agrees.
func TestIntentPatterns(t *testing.T) {
	r := loadMCP(t, `,"profiles":{"gh":{"allowed":["read_file","mcp__github__*"]}}`)
	on := true
	cases := []struct {
		name string
		req  Request
		want []string
	}{
		{"disabled pattern", Request{Session: Intent{Enabled: &on, Disabled: []string{"mcp__github__*"}}},
			[]string{"read_file", "tool_search", "mcp__jira__createJiraIssue", "mcp__jira__getJiraIssue"}},
		{"picked pattern", Request{Session: Intent{Picked: []string{"mcp__jira__*", "read_file"}}},
			[]string{"mcp__jira__createJiraIssue", "mcp__jira__getJiraIssue", "read_file"}},
		{"picked pattern of deferred tools", Request{Session: Intent{Picked: []string{"mcp__github__*_issue*"}}},
			[]string{"mcp__github__create_issue", "mcp__github__list_issues", "tool_search"}},
		{"override names pattern", Request{Override: Override{Kind: OverrideNames, Names: []string{"*JiraIssue"}}},
			[]string{"mcp__jira__createJiraIssue", "mcp__jira__getJiraIssue"}},
		{"override allowed pattern", Request{Override: Override{Kind: OverrideIntent, Allowed: []string{"mcp__jira__*"}}},
			[]string{"mcp__jira__createJiraIssue", "mcp__jira__getJiraIssue"}},
		{"profile allowed pattern", Request{Profile: "gh"},
			[]string{"read_file", "mcp__github__create_issue", "mcp__github__list_issues", "mcp__github__get_me", "tool_search"}},
	}
	for _, c := range cases {
		res, err := r.Resolve(c.req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := res.Names(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		for _, tl := range r.Tools() {
			if ex := r.Explain(c.req, tl.Name); ex.Included != slices.Contains(res.Names(), tl.Name) {
				t.Errorf("%s: Explain(%s) included %v (%s), Resolve says otherwise", c.name, tl.Name, ex.Included, ex.Rule)
			}
		}
	}
	res, _ := r.Resolve(Request{Session: Intent{Picked: []string{"mcp__nope__*", "read_file"}}})
	if !slices.Equal(res.Unknown, []string{"mcp__nope__*"}) {
		t.Errorf("a pattern matching nothing is unknown: %v", res.Unknown)
	}
	if got := r.Matches("mcp__github__*"); len(got) != 3 {
		t.Errorf("Matches = %v", got)
	}
	for pat, name := range map[string]string{"mcp__*": "mcp__x__y", "*_issue": "create_issue", "a?c": "abc", "a*b*c": "axxbyyc", "*": ""} {
		if !MatchName(pat, name) {
			t.Errorf("MatchName(%q, %q) = false", pat, name)
		}
	}
	for pat, name := range map[string]string{"mcp__*": "mcp_x", "a?c": "ac", "a*b*c": "axxbyy", "abc": "abd"} {
		if MatchName(pat, name) {
			t.Errorf("MatchName(%q, %q) = true", pat, name)
		}
	}
}
