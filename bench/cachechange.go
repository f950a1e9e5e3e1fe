package bench

// The "prompt cache, registry change" lines: what one registry change does
// to a session's prompt cache in each provider mode, by the provider's
// documented rule (docs/semantics.md#prompt-cache), measured through the
// engine's own figures: a session that loaded one deferred tool dispatches
// in every mode, the registry changes one tool, and the next turn's
// dispatch either keeps the cache key (the tools prefix, and in
// Anthropic's native modes the definitions its history references) or
// breaks it. Three changes: the description of a deferred tool the session
// never loaded, of the tool it loaded, and of a resident tool.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// A registry change of the lines: which tool's description changes.
const (
	ChangeDeferred = "a deferred tool never loaded"
	ChangeLoaded   = "a loaded tool"
	ChangeResident = "a resident tool"
	namePCChange   = "prompt cache, registry change to %s: provider modes whose cache breaks"
)

// The tools of the changes, in the default registry: exit_plan_mode is
// deferred and never loaded, send_message deferred and loaded by the
// session, read_file resident.
var cacheChangeTools = map[string]string{ChangeDeferred: "exit_plan_mode", ChangeLoaded: "send_message", ChangeResident: "read_file"}

// CacheChanges lists the changes in line order.
var CacheChanges = []string{ChangeDeferred, ChangeLoaded, ChangeResident}

// cacheChangeModes are the provider modes the lines compare: one of each
// row kind of the provider table.
var cacheChangeModes = []string{service.ProviderAnthropic, service.ProviderOpenAI, service.ProviderAnthropicEngine, service.ProviderOpenAIEngine}

func cacheChangeLineNames() []string {
	out := make([]string, len(CacheChanges))
	for i, c := range CacheChanges {
		out[i] = fmt.Sprintf(namePCChange, c)
	}
	return out
}

// CacheHeld reports, for change (one of CacheChanges) of registry base,
// whether a session's prompt cache holds across it in each provider mode
// of cacheChangeModes, as the engine's dispatches report it: the cache key
// (prefix_hash, and references_hash where the provider expands
// references) of the first dispatch after the change equals the last one
// before. session names the session it uses.
func CacheHeld(ctx context.Context, eng *service.Engine, base *resolver.Registry, session, change string) (map[string]bool, error) {
	changed, err := cacheChanged(base, cacheChangeTools[change])
	if err != nil {
		return nil, err
	}
	live := eng.Registry()
	eng.SetRegistry(base)
	defer eng.SetRegistry(live)
	if _, err := eng.Apply(ctx, session, origin, nil, events.ToolsToggled{Enabled: bptr(true)}); err != nil {
		return nil, err
	}
	if _, err := eng.BeginTurn(ctx, session, origin, service.ResolveRequest{}); err != nil {
		return nil, err
	}
	if _, err := eng.Discover(ctx, session, origin, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{cacheChangeTools[ChangeLoaded]}}}); err != nil {
		return nil, err
	}
	// keys dispatches the open turn in every mode, then ends the turn.
	keys := func() (map[string]string, error) {
		out := map[string]string{}
		for _, m := range cacheChangeModes {
			v, err := eng.Dispatch(ctx, session, m)
			if err != nil {
				return nil, err
			}
			out[m] = v.PrefixHash + "/" + v.ReferencesHash
		}
		_, err := eng.EndTurn(ctx, session, origin)
		return out, err
	}
	before, err := keys()
	if err != nil {
		return nil, err
	}
	eng.SetRegistry(changed)
	if _, err := eng.BeginTurn(ctx, session, origin, service.ResolveRequest{}); err != nil {
		return nil, err
	}
	after, err := keys()
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, m := range cacheChangeModes {
		held[m] = before[m] == after[m]
	}
	return held, nil
}

// CacheChanged returns base with the description of tool changed, under
// another version: the candidate of a change.
func CacheChanged(base *resolver.Registry, change string) (*resolver.Registry, error) {
	return cacheChanged(base, cacheChangeTools[change])
}

func cacheChanged(base *resolver.Registry, tool string) (*resolver.Registry, error) {
	return editRegistry(base, func(doc map[string]any) error {
		doc["version"] = base.Version() + "+" + tool + "-described"
		found := false
		for _, x := range doc["tools"].([]any) {
			if m := x.(map[string]any); m["name"] == tool {
				m["description"] = m["description"].(string) + " Described anew."
				found = true
			}
		}
		if !found {
			return fmt.Errorf("registry %s has no tool %q to change", base.Version(), tool)
		}
		return nil
	})
}

// editRegistry is base with its registry file (JSON) changed by edit.
func editRegistry(base *resolver.Registry, edit func(doc map[string]any) error) (*resolver.Registry, error) {
	data, err := base.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := edit(doc); err != nil {
		return nil, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return resolver.Load(out)
}

// cacheChangeLines adds one line per change: how many of the compared
// modes see their cache break, which ones in the note.
func (h *harness) cacheChangeLines(ctx context.Context) error {
	base := resolver.Default()
	for i, c := range CacheChanges {
		session := fmt.Sprintf("pcrc-%s-%d", h.started.Format("150405"), i)
		held, err := CacheHeld(ctx, h.eng, base, session, c)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		n := 0
		var parts []string
		for _, m := range cacheChangeModes {
			what := "holds"
			if !held[m] {
				what, n = "breaks", n+1
			}
			parts = append(parts, m+" "+what)
		}
		h.add(Line{Name: fmt.Sprintf(namePCChange, c), Unit: "modes", Engine: float64(n), Runs: 1,
			Note: "the description of " + cacheChangeTools[c] + " changes: " + strings.Join(parts, ", ") + " (docs/semantics.md#prompt-cache)"})
	}
	return nil
}
