package resolver

import (
	"fmt"
	"strings"
	"testing"
)

// bigRegistryJSON builds a registry of n tools, all in DEFAULT_TOOLS, with
// tool_search among them and every tenth tool deferred.
func bigRegistryJSON(n int) []byte { return registryJSON(n, n) }

// registryJSON builds a registry of n tools whose first d are DEFAULT_TOOLS.
func registryJSON(n, d int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":"bench-1","tools":[`)
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tool_%03d", i)
		if i == n/2 {
			name = ToolSearch
		}
		names = append(names, name)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":%q,"description":"Tool number %d reads and writes things for the agent.","permission":"read",`+
			`"parameters":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"limit":{"type":"integer"}},"required":["path"]}}`, name, i)
	}
	b.WriteString(`],"default_tools":["` + strings.Join(names[:d], `","`) + `"`)
	if d <= n/2 {
		b.WriteString(`,"tool_search"`)
	}
	b.WriteString(`],"deferred_default_tools":[`)
	sep := ""
	for i, name := range names[:d] {
		if i%10 == 3 && name != ToolSearch {
			b.WriteString(sep + `"` + name + `"`)
			sep = ","
		}
	}
	b.WriteString(`],"presets":{"half":["` + strings.Join(names[:n/2+1], `","`) + `"]}}`)
	return []byte(b.String())
}

func benchRegistry(b *testing.B) *Registry {
	b.Helper()
	r, err := Load(bigRegistryJSON(500))
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// A cold expansion of a 500-tool registry, cache bypassed.
func BenchmarkResolveCold(b *testing.B) {
	r := benchRegistry(b)
	req := Request{Session: Intent{Enabled: yes, WebSearch: yes, Disabled: []string{"tool_007", "tool_123"}}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.ResolveUncached(req)
		if err != nil || len(res.Tools) != 498 {
			b.Fatalf("%v %d", err, len(res.Tools))
		}
	}
}

// A cold expansion of a typical request against a 500-tool registry:
// 40 defaults, cache bypassed.
func BenchmarkResolveColdTypical(b *testing.B) {
	r, err := Load(registryJSON(500, 40))
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Session: Intent{Enabled: yes, WebSearch: yes, Disabled: []string{"tool_007"}}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.ResolveUncached(req)
		if err != nil || len(res.Tools) != 40 {
			b.Fatalf("%v %d", err, len(res.Tools))
		}
	}
}

// A repeated request is served from the cache with 0 allocs/op.
func BenchmarkResolveCached(b *testing.B) {
	r := benchRegistry(b)
	req := Request{Session: Intent{Enabled: yes, WebSearch: yes, Disabled: []string{"tool_007", "tool_123"}}, Profile: "coder"}
	if _, err := r.Resolve(req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Resolve(req); err != nil {
			b.Fatal(err)
		}
	}
}

// Cached resolution under parallel load.
func BenchmarkResolveCachedParallel(b *testing.B) {
	r := benchRegistry(b)
	req := Request{Session: Intent{Preset: "half"}}
	if _, err := r.Resolve(req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = r.Resolve(req)
		}
	})
}

// Rendering 500 tools for Anthropic.
func BenchmarkRenderAnthropic(b *testing.B) {
	r := benchRegistry(b)
	res, _ := r.Resolve(Request{})
	b.ReportAllocs()
	for b.Loop() {
		_ = RenderAnthropic(res.Tools)
	}
}

// Loading a 500-tool registry file.
func BenchmarkLoad(b *testing.B) {
	data := bigRegistryJSON(500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
}
