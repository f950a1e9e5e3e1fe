package resolver

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Tools/list results become namespaced, deferred registry
// tools; names outside the provider rule are rewritten and reported;
// equal inputs give equal bytes.
func TestImportMCP(t *testing.T) {
	k8s := []byte(`{"tools":[
		{"name":"pods.list","description":"List pods.","inputSchema":{"type":"object","properties":{"namespace":{"type":"string"}}}},
		{"name":"user-profile/update","description":"","inputSchema":{"type":"object"}},
		{"name":"` + strings.Repeat("verylongname", 6) + `","description":"Long.","inputSchema":{"type":"object"}}
	]}`)
	gh := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"create_issue","description":"Create an issue.","inputSchema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}]}}`)
	servers := []MCPServer{{Name: "k8s", Description: "Kubernetes.", ToolsList: k8s}, {Name: "github", ToolsList: gh}}
	out, rep, err := ImportMCP(DefaultRegistryJSON(), servers, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := ImportMCP(DefaultRegistryJSON(), servers, ImportOptions{})
	if string(out) != string(again) {
		t.Errorf("import is not deterministic")
	}
	if rep.Servers != 2 || rep.Tools != 4 || len(rep.Notes) != 4 {
		t.Errorf("report %+v", rep)
	}
	r, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	long := MCPPrefix + "k8s__" + strings.Repeat("verylongname", 6)
	for _, name := range []string{"mcp__k8s__pods_list", "mcp__k8s__user-profile_update", "mcp__github__create_issue", long[:55]} {
		var found *Tool
		for _, tl := range r.Tools() {
			if strings.HasPrefix(tl.Name, name) {
				found = &tl
			}
		}
		if found == nil {
			t.Errorf("%s not imported", name)
			continue
		}
		if !found.Deferred || !strings.HasPrefix(found.Permission, "mcp:") || len(found.Name) > 64 {
			t.Errorf("%s: %+v; want deferred, permission mcp:<server>, at most 64 bytes", name, found)
		}
	}
	if tl, _ := r.Tool("mcp__k8s__user-profile_update"); !strings.Contains(tl.Description, "user-profile/update") {
		t.Errorf("missing description not filled in: %q", tl.Description)
	}
	if ns, ok := r.Namespace("k8s"); !ok || ns.Description != "Kubernetes." || ns.Defer == nil || !*ns.Defer {
		t.Errorf("namespace k8s = %+v", ns)
	}
	if !slices.Contains(r.DefaultTools(), "mcp__github__create_issue") || r.Version() != "builtin-2026.12.1+mcp" {
		t.Errorf("defaults %v version %s", r.DefaultTools(), r.Version())
	}
	res, err := r.Resolve(Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Namespaces) != 2 {
		t.Errorf("resolution namespaces %+v", res.Namespaces)
	}

	// Deferral by budget: no flags, auto_defer written.
	out, _, err = ImportMCP(DefaultRegistryJSON(), servers[1:], ImportOptions{AutoDefer: AutoDefer{ContextWindow: 200000, MaxShare: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ = Load(out)
	if ns, _ := r.Namespace("github"); ns.Defer != nil || r.AutoDefer().Budget() != 10000 {
		t.Errorf("auto import: namespace %+v, budget %d", ns, r.AutoDefer().Budget())
	}

	// Resident servers, out of the defaults.
	out, _, err = ImportMCP(DefaultRegistryJSON(), servers[1:], ImportOptions{Resident: true, NotDefaults: true, Version: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	r, _ = Load(out)
	if tl, _ := r.Tool("mcp__github__create_issue"); tl.Deferred || slices.Contains(r.DefaultTools(), tl.Name) || r.Version() != "v2" {
		t.Errorf("resident import: %+v in defaults %v", tl, slices.Contains(r.DefaultTools(), tl.Name))
	}

	for _, bad := range []struct {
		servers []MCPServer
		want    string
	}{
		{[]MCPServer{{Name: "a__b", ToolsList: gh}}, "a__b"},
		{[]MCPServer{{Name: "gh", ToolsList: []byte(`{"tools":"x"}`)}}, "not a tools/list result"},
		{[]MCPServer{{Name: "gh", ToolsList: []byte(`{"jsonrpc":"2.0","error":{"code":-1}}`)}}, "error"},
		{[]MCPServer{{Name: "gh", ToolsList: gh}, {Name: "gh", ToolsList: gh}}, "twice"},
		{[]MCPServer{{Name: "x", ToolsList: []byte(`{"tools":[{"name":"a.b","description":"d"},{"name":"a_b","description":"d"}]}`)}}, "already has"},
	} {
		if _, _, err := ImportMCP(DefaultRegistryJSON(), bad.servers, ImportOptions{}); !errors.Is(err, ErrInvalidImport) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err %v", bad.want, err)
		}
	}
	if _, _, err := ImportMCP(DefaultRegistryJSON(), []MCPServer{{Name: "x", ToolsList: []byte(`{"tools":[{"name":"t","description":"d","inputSchema":{"type":"string"}}]}`)}}, ImportOptions{}); err == nil || !strings.Contains(err.Error(), `want "object"`) {
		t.Errorf("non-object schema: %v", err)
	}
}
