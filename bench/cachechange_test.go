package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// cacheRule is, per change and provider mode, whether the provider's
// prompt cache holds, by its documented rule (deferral.Provider.CachedPrefix,
// docs/semantics.md#prompt-cache): Anthropic's native modes keep
// deferred tools out of the system-prompt prefix and expand a loaded
// tool's definition at its tool_reference; OpenAI's model sees a deferred
// top-level function's name and description (the default registry's
// deferred tools are top-level); the engine's catalog sends the resident
// and loaded tools, names the others in its catalog text.
var cacheRule = map[string]map[string]bool{
	ChangeDeferred: {service.ProviderAnthropic: true, service.ProviderOpenAI: false, service.ProviderAnthropicEngine: true, service.ProviderOpenAIEngine: true},
	ChangeLoaded:   {service.ProviderAnthropic: false, service.ProviderOpenAI: false, service.ProviderAnthropicEngine: false, service.ProviderOpenAIEngine: false},
	ChangeResident: {service.ProviderAnthropic: false, service.ProviderOpenAI: false, service.ProviderAnthropicEngine: false, service.ProviderOpenAIEngine: false},
}

// On each of three registry changes (the description of a deferred
// tool never loaded, of a loaded tool, of a resident tool), every prompt-
// cache figure of the engine says the same as the provider's documented
// rule, in every provider mode: the bench's registry-change lines (the
// cache key of a view, prefix_hash and references_hash, before and after),
// registry diff's prefix_changed for a session whose turns were begun in
// that mode, and the history's prefix_changed at the next turn, which the
// inspector lists as a cache break.
func TestCacheFiguresAgree(t *testing.T) {
	h := fixture(t)
	ctx := context.Background()
	rh, err := h.elog.OpenRegistryHistory(ctx) // the history resolves each point against the registry then in force
	if err != nil {
		t.Fatal(err)
	}
	h.eng.SetRegistryHistory(rh)
	for ci, change := range CacheChanges {
		t.Run(change, func(t *testing.T) {
			// A registry version of its own, so that the registry
			// history's timeline says which one was in force when.
			base, err := renamed(resolver.Default(), fmt.Sprintf("agree-%d", ci))
			if err != nil {
				t.Fatal(err)
			}
			cand, err := CacheChanged(base, change)
			if err != nil {
				t.Fatal(err)
			}
			h.eng.SetRegistry(base)
			defer h.eng.SetRegistry(base)
			sessions := map[string]string{}
			for _, m := range cacheChangeModes {
				s := fmt.Sprintf("agree-%d-%s", ci, m)
				sessions[m] = s
				if _, err := h.eng.Apply(ctx, s, origin, nil, cacheToggle()); err != nil {
					t.Fatal(err)
				}
				if _, err := h.eng.BeginTurn(ctx, s, origin, service.ResolveRequest{Provider: m}); err != nil {
					t.Fatal(err)
				}
				if _, err := h.eng.Discover(ctx, s, origin, service.DiscoverRequest{Provider: m, Search: deferral.SearchRequest{Names: []string{cacheChangeTools[ChangeLoaded]}}}); err != nil {
					t.Fatal(err)
				}
				end, err := h.eng.EndTurn(ctx, s, origin)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := h.eng.Session(ctx, s, end.Seq); err != nil { // in the views registry diff reads
					t.Fatal(err)
				}
			}
			for { // until the views registry diff reads hold every session
				if all, err := h.eng.Sessions(ctx); err == nil && containsAll(all, sessions) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			im, err := h.eng.Impact(ctx, cand)
			if err != nil {
				t.Fatal(err)
			}
			h.eng.SetRegistry(cand)
			for _, m := range cacheChangeModes {
				want := cacheRule[change][m]
				if broke := slices.Contains(im.PrefixChanged, sessions[m]); broke == want {
					t.Errorf("%s: registry diff lists the session as changed: %v, the rule says the cache %s", m, broke, holds(want))
				}
				if _, err := h.eng.BeginTurn(ctx, sessions[m], origin, service.ResolveRequest{Provider: m}); err != nil {
					t.Fatal(err)
				}
				hist, _, err := h.eng.History(ctx, sessions[m], service.Until{}, service.ResolveRequest{})
				if err != nil {
					t.Fatal(err)
				}
				last := hist[len(hist)-1]
				if last.Type != "TurnStarted" || last.PrefixChanged == want || (!want && last.Cause != "registry") {
					t.Errorf("%s: the history's %s after the change has prefix_changed %v (cause %q), the rule says the cache %s", m, last.Type, last.PrefixChanged, last.Cause, holds(want))
				}
				if _, err := h.eng.EndTurn(ctx, sessions[m], origin); err != nil {
					t.Fatal(err)
				}
			}
			held, err := CacheHeld(ctx, h.eng, base, fmt.Sprintf("agree-bench-%d", ci), change)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range cacheChangeModes {
				if want := cacheRule[change][m]; held[m] != want {
					t.Errorf("%s: the bench says the cache %s, the documented rule %s", m, holds(held[m]), holds(want))
				}
			}
		})
	}
}

// containsAll reports whether every session of want is in all.
func containsAll(all []string, want map[string]string) bool {
	for _, s := range want {
		if !slices.Contains(all, s) {
			return false
		}
	}
	return true
}

// renamed is reg under another version.
func renamed(reg *resolver.Registry, version string) (*resolver.Registry, error) {
	data, err := reg.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	doc["version"] = version
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return resolver.Load(out)
}

func holds(b bool) string {
	if b {
		return "holds"
	}
	return "breaks"
}

// cacheToggle switches a session's tools on.
func cacheToggle() events.Payload { return events.ToolsToggled{Enabled: bptr(true)} }
