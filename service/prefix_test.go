package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// counts records hook calls by name and cause.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) hook(name string) func(string) {
	return func(cause string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.m[name+":"+cause]++
	}
}

func (c *counts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// The metric of prefix changes by cause proves what a
// discovery does to the prompt cache. With the engine's catalog a
// discovered tool is appended after the frozen array (prefix extended,
// never broken) and the catalog text changes; with provider-native
// deferral the array and the catalog are byte-identical across
// discoveries, and the search result is the provider's loading form.
func TestDiscoveryKeepsPrefix(t *testing.T) {
	t.Parallel()
	c := &counts{m: map[string]int{}}
	e := newEngineWith(t, service.Config{Hooks: service.Hooks{
		PrefixChanged: c.hook("broken"), PrefixExtended: c.hook("extended"), CatalogChanged: c.hook("catalog"),
	}})
	ctx := context.Background()
	searches := []deferral.SearchRequest{{Query: "take a screenshot of a web page", MaxResults: 1}, {Names: []string{"send_message"}}}
	for _, provider := range service.Providers {
		session := "p-" + provider
		if _, err := e.Apply(ctx, session, web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.BeginTurn(ctx, session, web, service.ResolveRequest{Provider: provider}); err != nil {
			t.Fatal(err)
		}
		first, err := e.Dispatch(ctx, session, provider)
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range searches {
			d, err := e.Discover(ctx, session, web, service.DiscoverRequest{Search: sr, Provider: provider, CallID: "call_1"})
			if err != nil || len(d.Loaded) != 1 {
				t.Fatalf("%s: discover %+v: %+v, %v", provider, sr, d, err)
			}
			checkOutput(t, provider, d)
			v, err := e.Dispatch(ctx, session, provider)
			if err != nil {
				t.Fatal(err)
			}
			row, _ := deferral.LookupProvider(provider)
			native := row.Native
			if native && (!bytes.Equal(v.Rendering, first.Rendering) || v.CatalogText != first.CatalogText) {
				t.Errorf("%s: a discovery changed the native array or catalog", provider)
			}
			// The raw bytes, cache breakpoint included, and the
			// catalog text: a discovery only appends.
			if !native && (!bytes.HasPrefix(v.Rendering, bytes.TrimSuffix(first.Rendering, []byte("]"))) || v.CatalogText != first.CatalogText) {
				t.Errorf("%s: the first array is not a byte prefix of the later one, or the catalog text changed", provider)
			}
		}
		broken, extended, catalog := c.get("broken:discovery"), c.get("extended:discovery"), c.get("catalog:discovery")
		t.Logf("%s: per %d discoveries, prefix broken %d, extended %d, catalog changed %d", provider, len(searches), broken, extended, catalog)
		wantExt, wantCat := 0, 0
		if row, _ := deferral.LookupProvider(provider); !row.Native {
			wantExt = len(searches) // the catalog text is the turn's
		}
		if broken != 0 || extended != wantExt || catalog != wantCat {
			t.Errorf("%s: broken %d extended %d catalog %d; want 0, %d, %d", provider, broken, extended, catalog, wantExt, wantCat)
		}
		for k := range c.m {
			delete(c.m, k)
		}
		if _, err := e.EndTurn(ctx, session, web); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOutput checks the tool result of a search in the provider's form.
func checkOutput(t *testing.T, provider string, d wire.DiscoverReply) {
	t.Helper()
	var v any
	if err := json.Unmarshal(d.Output, &v); err != nil {
		t.Fatalf("%s: output is not JSON: %v", provider, err)
	}
	want := ""
	switch provider {
	case service.ProviderAnthropic, service.ProviderAnthropicNative, service.ProviderAnthropicServer:
		want = fmt.Sprintf(`[{"type":"tool_reference","tool_name":%q}]`, d.Loaded[0])
	case service.ProviderOpenAI, service.ProviderOpenAINative:
		want = `{"type":"tool_search_output","call_id":"call_1","execution":"client","status":"completed","tools":[{"type":"function","name":"` + d.Loaded[0] + `"`
	default:
		want = `{"tools":[{"name":"` + d.Loaded[0] + `"`
	}
	if !strings.HasPrefix(string(d.Output), want) {
		t.Errorf("%s: output %.200s, want it to start with %s", provider, d.Output, want)
	}
}
