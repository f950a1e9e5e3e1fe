package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// Each provider value renders the turn through its row of the
// provider table exactly as the engine rendered it before the table: the
// catalog rows the split's provider tools (Anthropic or OpenAI form), the
// native rows every tool of the turn (Anthropic with or without the
// server search tool, OpenAI with namespaces); and tool_search answers in
// the row's form.
func TestProvidersRenderThroughTheirRow(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "provider-rows"
	if _, err := e.Apply(ctx, s, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	begun, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(begun.Catalog) == 0 {
		t.Fatal("the turn has no deferred tool to search for")
	}
	reg := e.Registry()
	for _, p := range append([]string{""}, service.Providers...) {
		v, err := e.Resolve(ctx, s, service.ResolveRequest{Provider: p})
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		var tools []resolver.Tool
		for _, n := range v.Provider {
			tool, ok := reg.Tool(n)
			if !ok {
				t.Fatalf("%q: %s not in the registry", p, n)
			}
			tool.Deferred = false
			if row, _ := deferral.LookupProvider(p); row.Native {
				tool.Deferred = slices.Contains(begun.Catalog, n)
			}
			tools = append(tools, tool)
		}
		var want []byte
		switch p {
		case service.ProviderAnthropicEngine:
			want = resolver.RenderAnthropic(tools)
		case service.ProviderOpenAIEngine:
			want = resolver.RenderOpenAI(tools)
		case "", service.ProviderAnthropic, service.ProviderAnthropicNative: // Native by default
			want = resolver.RenderAnthropicNative(tools, "")
		case service.ProviderAnthropicServer:
			want = resolver.RenderAnthropicNative(tools, resolver.AnthropicSearchBM25)
		case service.ProviderOpenAI, service.ProviderOpenAINative:
			want = nil // namespaces needed: compared by form below
		}
		wantFor := p
		if p == "" {
			wantFor = service.ProviderAnthropic
		}
		if v.RenderedFor != wantFor {
			t.Errorf("%q: rendered for %q, want %q", p, v.RenderedFor, wantFor)
		}
		if want != nil && !bytes.Equal(v.Rendering, want) {
			t.Errorf("%q: rendering differs from the provider's renderer:\n got %.200s\nwant %.200s", p, v.Rendering, want)
		}
		if !json.Valid(v.Rendering) {
			t.Errorf("%q: rendering is not JSON", p)
		}
	}
	for p, mark := range map[string]string{
		service.ProviderAnthropicEngine: `"tools"`,
		service.ProviderAnthropic:       `tool_reference`,
		service.ProviderOpenAI:          `tool_search_output`,
		service.ProviderAnthropicNative: `tool_reference`,
		service.ProviderOpenAINative:    `tool_search_output`,
	} {
		d, err := e.Discover(ctx, s, web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: begun.Catalog[:1]}, Provider: p, CallID: "call_1"})
		if err != nil {
			t.Fatalf("discover for %q: %v", p, err)
		}
		if !strings.Contains(string(d.Output), mark) {
			t.Errorf("discover for %q: output %.200s lacks %s", p, d.Output, mark)
		}
	}
}
