package service_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// A provider's own name, and the default, render its
// native deferral; the engine's catalog is asked for by name. Callers
// that named "anthropic" or "openai" now get the native bytes, and
// rendered_for still echoes the name they asked for.
func TestDefaultRenderingIsNative(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "native-default"
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	render := func(p string) wire.TurnView {
		t.Helper()
		v, err := e.Dispatch(ctx, s, p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		return v
	}
	for asked, same := range map[string]string{
		"":                        service.ProviderAnthropicNative,
		service.ProviderAnthropic: service.ProviderAnthropicNative,
		service.ProviderOpenAI:    service.ProviderOpenAINative,
	} {
		v, want := render(asked), render(same)
		if !bytes.Equal(v.Rendering, want.Rendering) || v.CatalogText != want.CatalogText {
			t.Errorf("%q renders otherwise than %q", asked, same)
		}
		if !bytes.Contains(v.Rendering, []byte(`"defer_loading":true`)) {
			t.Errorf("%q: no deferred tool in the array", asked)
		}
		wantFor := asked
		if asked == "" {
			wantFor = service.ProviderAnthropic
		}
		if v.RenderedFor != wantFor {
			t.Errorf("%q: rendered_for %q, want %q", asked, v.RenderedFor, wantFor)
		}
	}
	for _, p := range []string{service.ProviderAnthropicEngine, service.ProviderOpenAIEngine} {
		v := render(p)
		if bytes.Contains(v.Rendering, []byte("defer_loading")) || len(v.Provider) >= len(v.Tools) {
			t.Errorf("%s: the engine's catalog holds only resident and loaded tools; got %d of %d", p, len(v.Provider), len(v.Tools))
		}
	}
}

// In the engine's mode a discovery only appends: the earlier
// array, cache breakpoint included, is a byte prefix of the later one,
// and the catalog text is the same in every request of the turn and of
// the next turn (same intent and registry).
func TestEngineModeOnlyAppends(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "engine-append"
	if _, err := e.Apply(ctx, s, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	p := service.ProviderAnthropicEngine
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: p}); err != nil {
		t.Fatal(err)
	}
	prev, err := e.Dispatch(ctx, s, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memory_read", "send_message"} {
		if _, err := e.Discover(ctx, s, web, service.DiscoverRequest{Provider: p, Search: deferral.SearchRequest{Names: []string{name}}}); err != nil {
			t.Fatal(err)
		}
		next, err := e.Dispatch(ctx, s, p)
		if err != nil {
			t.Fatal(err)
		}
		stem := bytes.TrimSuffix(prev.Rendering, []byte("]"))
		if !bytes.HasPrefix(next.Rendering, stem) || len(next.Rendering) <= len(prev.Rendering) {
			t.Errorf("after loading %s: the previous array is not a byte prefix of the next (the cache breakpoint moved?)", name)
		}
		if next.CatalogText != prev.CatalogText {
			t.Errorf("after loading %s: the catalog text changed inside the turn", name)
		}
		prev = next
	}
	if _, err := e.EndTurn(ctx, s, web); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: p}); err != nil {
		t.Fatal(err)
	}
	first, err := e.Dispatch(ctx, s, p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Rendering, prev.Rendering) || first.CatalogText != prev.CatalogText {
		t.Errorf("the next turn's first request differs from the last one: array same %v, catalog same %v",
			bytes.Equal(first.Rendering, prev.Rendering), first.CatalogText == prev.CatalogText)
	}
}

// Anthropic-native-server's catalog names the search tool its
// array holds, Anthropic's tool_search_tool_bm25, not the engine's.
func TestServerSearchCatalogNamesItsTool(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.BeginTurn(ctx, "server-catalog", web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	v, err := e.Dispatch(ctx, "server-catalog", service.ProviderAnthropicServer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.CatalogText, "(load with "+resolver.AnthropicSearchBM25Name+")") || strings.Contains(v.CatalogText, "(load with "+resolver.ToolSearch+")") {
		t.Errorf("catalog %q: want it to name %s", v.CatalogText, resolver.AnthropicSearchBM25Name)
	}
	if !bytes.Contains(v.Rendering, []byte(resolver.AnthropicSearchBM25Name)) {
		t.Errorf("the array lacks %s", resolver.AnthropicSearchBM25Name)
	}
	if _, err := e.Dispatch(ctx, "server-catalog", "gemini"); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("an unknown provider: %v, want ErrInvalid", err)
	}
}
