package resolver

import (
	"encoding/json"
	"strings"
	"testing"
)

func nativeTools() []Tool {
	return []Tool{
		{Name: "read_file", Description: "Read.", Parameters: []byte(`{"type":"object"}`)},
		{Name: "mcp__jira__getJiraIssue", Description: "Get a Jira issue.", Parameters: []byte(`{"type":"object"}`), Deferred: true},
		{Name: "tool_search", Description: "Search tools.", Parameters: []byte(`{"properties":{"query":{"type":"string"}},"type":"object"}`)},
		{Name: "playwright_browser", Description: "Browse.", Parameters: []byte(`{"type":"object"}`), Deferred: true},
		{Name: "mcp__github__create_issue", Description: "Create a GitHub issue.", Parameters: []byte(`{"type":"object"}`), Deferred: true},
		{Name: "mcp__github__get_me", Description: "Me.", Parameters: []byte(`{"type":"object"}`)},
	}
}

// The Anthropic native rendering sends every tool once: resident ones
// first with the cache breakpoint on the last of them, deferred ones after
// it with defer_loading; the server variant swaps tool_search for
// Anthropic's search tool.
func TestRenderAnthropicNative(t *testing.T) {
	b := RenderAnthropicNative(nativeTools(), "")
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	wantNames := []string{"read_file", "tool_search", "mcp__github__get_me", "mcp__jira__getJiraIssue", "playwright_browser", "mcp__github__create_issue"}
	for i, m := range got {
		if m["name"] != wantNames[i] {
			t.Errorf("tool %d = %v, want %s", i, m["name"], wantNames[i])
		}
		_, cc := m["cache_control"]
		_, dl := m["defer_loading"]
		if cc != (i == 2) || dl != (i >= 3) {
			t.Errorf("tool %d %v: cache_control %v defer_loading %v", i, m["name"], cc, dl)
		}
	}
	if string(b) != string(RenderAnthropicNative(nativeTools(), "")) {
		t.Errorf("not deterministic")
	}
	srv := string(RenderAnthropicNative(nativeTools(), AnthropicSearchBM25))
	if !strings.Contains(srv, `{"type":"tool_search_tool_bm25_20251119","name":"tool_search_tool_bm25"}`) || strings.Contains(srv, `"name":"tool_search"`) {
		t.Errorf("server variant: %s", srv)
	}
	if !strings.Contains(string(RenderAnthropicNative(nativeTools(), AnthropicSearchRegex)), `"name":"tool_search_tool_regex"`) {
		t.Errorf("regex variant")
	}
	refs := RenderToolReferences([]string{"mcp__jira__getJiraIssue"}, "not found: \"x\"")
	if string(refs) != `[{"type":"tool_reference","tool_name":"mcp__jira__getJiraIssue"},{"type":"text","text":"not found: \"x\""}]` {
		t.Errorf("tool references = %s", refs)
	}
}

// The OpenAI native rendering groups MCP tools into namespaces (sorted,
// short names, descriptions), marks deferred functions, and ends with the
// client-executed tool_search; the search output mirrors the definitions.
func TestRenderOpenAINative(t *testing.T) {
	ns := []Namespace{{Name: "github", Description: "GitHub."}, {Name: "jira", Description: "Jira."}}
	b := RenderOpenAINative(nativeTools(), ns)
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if len(got) != 5 {
		t.Fatalf("%d entries: %s", len(got), b)
	}
	if got[0]["name"] != "read_file" || got[0]["defer_loading"] != nil || got[1]["name"] != "playwright_browser" || got[1]["defer_loading"] != true {
		t.Errorf("functions: %v %v", got[0], got[1])
	}
	if got[2]["type"] != "namespace" || got[2]["name"] != "github" || got[2]["description"] != "GitHub." || got[3]["name"] != "jira" {
		t.Errorf("namespaces: %v %v", got[2], got[3])
	}
	inner := got[2]["tools"].([]any)
	if len(inner) != 2 || inner[0].(map[string]any)["name"] != "create_issue" || inner[0].(map[string]any)["defer_loading"] != true || inner[1].(map[string]any)["defer_loading"] != nil {
		t.Errorf("github tools: %v", inner)
	}
	if got[4]["type"] != "tool_search" || got[4]["execution"] != "client" || got[4]["parameters"] == nil {
		t.Errorf("tool_search: %v", got[4])
	}
	out := RenderToolSearchOutput("call_1", nativeTools()[1:2], ns)
	if string(out) != `{"type":"tool_search_output","call_id":"call_1","execution":"client","status":"completed","tools":[{"type":"namespace","name":"jira","description":"Jira.","tools":[{"type":"function","name":"getJiraIssue","description":"Get a Jira issue.","parameters":{"type":"object"},"strict":false,"defer_loading":true}]}]}` {
		t.Errorf("search output = %s", out)
	}
}
