package deferral

import (
	"slices"
	"testing"
)

// Every provider value has one row; names are unique, "" is the
// default, every row renders, and a native row has a native mode.
func TestProviderTable(t *testing.T) {
	names := ProviderNames()
	want := []string{"anthropic", "openai", "anthropic-native", "anthropic-native-server", "openai-native", "anthropic-engine", "openai-engine"}
	if !slices.Equal(names, want) {
		t.Fatalf("ProviderNames() = %v, want %v", names, want)
	}
	res := resolve(t, tenKRegistry(t), defaultSession())
	for _, n := range names {
		p, ok := LookupProvider(n)
		if !ok || p.Name != n || p.Render == nil {
			t.Fatalf("row %q: %+v, %v", n, p, ok)
		}
		if p.Native != (p.Mode != ModeEngine) {
			t.Errorf("row %q: native %v with mode %q", n, p.Native, p.Mode)
		}
		if len(p.Render(res.Tools, res.Namespaces, 0)) == 0 {
			t.Errorf("row %q renders nothing", n)
		}
	}
	if p, ok := LookupProvider(""); !ok || p.Name != DefaultProvider {
		t.Errorf("the default row is %q, want %q", p.Name, DefaultProvider)
	}
	if _, ok := LookupProvider("gemini"); ok {
		t.Error("an unknown provider has a row")
	}
	if m := nativeModes(); len(m) != 2 || m[0].Mode != ModeAnthropicNative || m[1].Mode != ModeOpenAINative {
		t.Errorf("nativeModes() = %v", m)
	}
}
