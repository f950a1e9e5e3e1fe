package bench

// The "prompt cache" lines: seeded simulated conversations replayed
// through the engine (service.Engine on the embedded server, no HTTP),
// each provider request rendered in every mode, and what each mode does
// to the provider's prompt cache: the share of requests whose tools array
// and catalog text are byte-identical to the previous request's, and the
// input tokens billed per turn with cached tokens at 0.1x.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// Shape of the simulated conversations.
const (
	pcTurns          = 30
	pcConversations  = 1000
	pcQuickConvs     = 200
	pcCachedPrice    = 0.1 // a cached input token costs 0.1 of an uncached one
	pcModeMaterial   = "materialized list"
	pcModeNoDeferral = "no deferral"
	namePCReuse      = "prompt cache, %s: requests whose tools prefix and catalog equal the previous request's"
	namePCTokens     = "prompt cache, %s: input tokens billed per turn (cached at 0.1x)"
)

// pcModes are the modes the lines compare, engine renderings first.
var pcModes = []string{service.ProviderAnthropic, service.ProviderOpenAI, service.ProviderAnthropicEngine, service.ProviderOpenAIEngine, pcModeNoDeferral, pcModeMaterial}

func promptCacheLineNames() []string {
	var out []string
	for _, m := range pcModes {
		out = append(out, fmt.Sprintf(namePCReuse, m))
	}
	for _, m := range pcModes {
		out = append(out, fmt.Sprintf(namePCTokens, m))
	}
	return out
}

// pcKind classifies a request by what happened since the previous one.
type pcKind int

const (
	pcSteady    pcKind = iota // intent and registry unchanged, nothing loaded
	pcDiscovery               // a tool_search loaded tools
	pcChanged                 // the intent or the registry changed
	pcFirst                   // the conversation's first request
	pcKinds
)

// pcStats is one mode's tally.
type pcStats struct {
	requests, same [pcKinds]int
	missDiscovery  int // discovery requests whose prefix was not reused
	billed, full   float64
	turns          int
	prevArr        []byte
	prevCat        string
	prevTokens     int // context tokens of the previous request's tools and catalog
	prevTools      int // of which the tools array
}

// request tallies one provider request: arr and cat as sent, tokens the
// context tokens of the tools array (toolTokens) and the catalog and of
// tools the provider inserted into the messages.
func (s *pcStats) request(kind pcKind, arr []byte, cat string, tokens, toolTokens int, native bool, newLoaded int) {
	same := s.prevArr != nil && bytes.Equal(arr, s.prevArr) && cat == s.prevCat
	s.requests[kind]++
	if same {
		s.same[kind]++
	} else if kind == pcDiscovery {
		s.missDiscovery++
	}
	cached := 0
	switch {
	case same && native:
		cached = tokens - newLoaded // the loaded definitions arrive after the cached prefix
	case same:
		cached = min(tokens, s.prevTokens)
	case s.prevArr != nil && bytes.HasPrefix(arr, bytes.TrimSuffix(s.prevArr, []byte("]"))):
		cached = s.prevTools // tools appended: the system prompt and messages after them miss
	}
	cached = max(cached, 0)
	s.billed += float64(tokens-cached) + pcCachedPrice*float64(cached)
	s.full += float64(tokens)
	s.prevArr, s.prevCat, s.prevTokens, s.prevTools = arr, cat, tokens, toolTokens
}

func (s *pcStats) share(kinds ...pcKind) (float64, int) {
	n, same := 0, 0
	for _, k := range kinds {
		n += s.requests[k]
		same += s.same[k]
	}
	if n == 0 {
		return 100, 0
	}
	return 100 * float64(same) / float64(n), n
}

// promptCache replays the conversations and adds the lines.
func (h *harness) promptCache(ctx context.Context) error {
	convs := pcConversations
	if h.cfg.Quick {
		convs = pcQuickConvs
	}
	live := h.eng.Registry()
	defer h.eng.SetRegistry(live)
	stats := map[string]*pcStats{}
	for _, m := range pcModes {
		stats[m] = &pcStats{}
	}
	pushes := map[int]*resolver.Registry{}
	for i, at := range []int{convs / 3, 2 * convs / 3} {
		reg, err := pcPushed(live, fmt.Sprintf("%s+push%d", live.Version(), i+1), fmt.Sprintf("pushed_tool_%d", i+1))
		if err != nil {
			return err
		}
		pushes[at] = reg
	}
	pushTurn := pcTurns / 2
	for c := 0; c < convs; c++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(26, uint64(c)))
		session := fmt.Sprintf("pc-%s-%05d", h.started.Format("150405"), c)
		for _, s := range stats {
			s.prevArr, s.prevCat = nil, ""
		}
		var material []resolver.Tool // the list a materializing store saved
		changed, sendOff := true, false
		for turn := 1; turn <= pcTurns; turn++ {
			if reg := pushes[c]; reg != nil && turn == pushTurn {
				h.eng.SetRegistry(reg)
				changed = true
			}
			if turn > 1 {
				if cmd := pcIntentChange(rng); cmd != nil {
					if _, err := h.eng.Apply(ctx, session, origin, nil, cmd); err != nil {
						return fmt.Errorf("conversation %d turn %d: %w", c, turn, err)
					}
					changed, material = true, nil
				}
			}
			begun, err := h.eng.BeginTurn(ctx, session, origin, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
			if err != nil {
				return fmt.Errorf("conversation %d turn %d: %w", c, turn, err)
			}
			if material == nil { // saved when the user changed the intent, stale after a push
				material = pcTools(h.eng.Registry(), begun.Tools)
			}
			current := pcTools(h.eng.Registry(), begun.Tools)
			next := pcSteady
			if changed {
				next = pcChanged
			}
			if turn == 1 {
				next = pcFirst
			}
			changed = false
			newLoaded := 0
			requests := 2 + rng.IntN(3)
			for r := 0; r < requests; r++ {
				catalog, err := h.pcRequest(ctx, session, stats, next, material, current, newLoaded)
				if err != nil {
					return err
				}
				next, newLoaded = pcSteady, 0
				if r == requests-1 {
					break
				}
				switch x := rng.IntN(100); {
				case x < 25 && len(catalog) > 0:
					name := catalog[rng.IntN(len(catalog))]
					d, err := h.eng.Discover(ctx, session, origin, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{name}}})
					if err != nil {
						return fmt.Errorf("conversation %d turn %d: discover: %w", c, turn, err)
					}
					if len(d.Loaded) > 0 {
						next = pcDiscovery
						for _, t := range d.Tools {
							if rt, ok := h.eng.Registry().Tool(t.Name); ok && slices.Contains(d.Loaded, t.Name) {
								newLoaded += deferral.EstimateTool(rt)
							}
						}
					}
				case x >= 97:
					// The user toggles a tool mid-turn: the turn stays frozen.
					var cmd events.Payload = events.ToolDisabled{Name: "send_message"}
					if sendOff {
						cmd = events.ToolEnabled{Name: "send_message"}
					}
					if _, err := h.eng.Apply(ctx, session, origin, nil, cmd); err != nil {
						return err
					}
					sendOff = !sendOff
					next, changed, material = pcChanged, true, nil
				}
			}
			if _, err := h.eng.EndTurn(ctx, session, origin); err != nil {
				return err
			}
			for _, s := range stats {
				s.turns++
			}
		}
	}
	h.pcLines(convs, stats)
	return h.cacheChangeLines(ctx)
}

// pcRequest renders one provider request in every mode and tallies it;
// it returns the engine's catalog (the deferred tools not loaded).
func (h *harness) pcRequest(ctx context.Context, session string, stats map[string]*pcStats, kind pcKind, material, current []resolver.Tool, newLoaded int) ([]string, error) {
	var catalog []string
	for _, m := range pcModes[:4] {
		v, err := h.eng.Dispatch(ctx, session, m)
		if err != nil {
			return nil, err
		}
		if m == service.ProviderAnthropicEngine {
			catalog = v.Catalog
		}
		row, _ := deferral.LookupProvider(m)
		tokens, toolTokens := v.Budget.Total, v.Budget.Resident
		if row.Native {
			loaded := 0
			for _, n := range v.Loaded {
				if t, ok := h.eng.Registry().Tool(n); ok {
					loaded += deferral.EstimateTool(t)
				}
			}
			tokens += loaded // inserted into the messages by the provider
		}
		// What the provider caches (its rule): a catalog row's array as
		// sent; a native row's tools prefix, which a deferred tool's
		// definition is not part of (a discovery references it after the
		// cached prefix; the replay's pushes change no referenced tool).
		key := v.Rendering
		if row.Native {
			key = []byte(v.PrefixHash)
		}
		stats[m].request(kind, key, v.CatalogText, tokens, toolTokens, row.Native, newLoaded)
	}
	for m, tools := range map[string][]resolver.Tool{pcModeNoDeferral: current, pcModeMaterial: material} {
		arr := resolver.RenderAnthropic(tools)
		n := 0
		for _, t := range tools {
			n += deferral.EstimateTool(t)
		}
		k := kind
		if k == pcDiscovery {
			k = pcSteady // nothing to discover: every tool is in the array
		}
		stats[m].request(k, arr, "", n, n, false, 0)
	}
	return catalog, nil
}

// pcTools are the named tools of reg, every one resident.
func pcTools(reg *resolver.Registry, names []string) []resolver.Tool {
	out := make([]resolver.Tool, 0, len(names))
	for _, n := range names {
		if t, ok := reg.Tool(n); ok {
			t.Deferred = false
			out = append(out, t)
		}
	}
	return out
}

// pcIntentChange is what the user changes before a turn, if anything:
// about one turn in eight.
func pcIntentChange(rng *rand.Rand) events.Payload {
	on, off := true, false
	switch rng.IntN(40) {
	case 0:
		return events.ToolDisabled{Name: "grep"}
	case 1:
		return events.ToolEnabled{Name: "grep"}
	case 2:
		return events.PresetChosen{Preset: "full"}
	case 3:
		return events.PresetChosen{}
	case 4:
		return events.WebSearchSet{Enabled: &on}
	case 5:
		return events.WebSearchSet{Enabled: &off}
	}
	return nil
}

// pcPushed is base with one more resident default tool, as version.
func pcPushed(base *resolver.Registry, version, extra string) (*resolver.Registry, error) {
	return editRegistry(base, func(doc map[string]any) error {
		doc["version"] = version
		tools, _ := doc["tools"].([]any)
		doc["tools"] = append(tools, map[string]any{"name": extra, "description": "A tool added by a registry push.", "parameters": map[string]any{"type": "object"}, "available": true})
		for _, k := range []string{"default_tools", "resident_tools"} {
			list, _ := doc[k].([]any)
			doc[k] = append(list, extra)
		}
		return nil
	})
}

// pcLines adds the lines of the replay.
func (h *harness) pcLines(convs int, stats map[string]*pcStats) {
	base := stats[pcModeMaterial]
	basePerTurn := base.billed / float64(max(base.turns, 1))
	for _, m := range pcModes {
		s := stats[m]
		all, n := s.share(pcSteady, pcDiscovery, pcChanged, pcFirst)
		steady, ns := s.share(pcSteady)
		disc, nd := s.share(pcDiscovery)
		changed, nc := s.share(pcChanged)
		row, isRow := deferral.LookupProvider(m)
		met := steady == 100
		target := "100% of the requests whose intent and registry did not change"
		switch {
		case isRow && row.Native:
			met = met && disc == 100
			target += ", and of those after a discovery"
		case isRow:
			met = met && s.missDiscovery == s.requests[pcDiscovery]
			target += "; exactly one miss per discovery"
		}
		misses := 0.0
		if s.requests[pcDiscovery] > 0 {
			misses = float64(s.missDiscovery) / float64(s.requests[pcDiscovery])
		}
		h.add(Line{Name: fmt.Sprintf(namePCReuse, m), Unit: "%", Engine: all, Runs: 1, Target: target, Met: bptr(met),
			Note: fmt.Sprintf("%d conversations x %d turns, %d requests: unchanged %.2f%% of %d, after a discovery %.2f%% of %d (%.2f misses per discovery), after an intent or registry change %.2f%% of %d",
				convs, pcTurns, n, steady, ns, disc, nd, misses, changed, nc)})
	}
	for _, m := range pcModes {
		s := stats[m]
		perTurn := s.billed / float64(max(s.turns, 1))
		ratio := 0.0
		if perTurn > 0 {
			ratio = basePerTurn / perTurn
		}
		h.add(Line{Name: fmt.Sprintf(namePCTokens, m), Unit: "tokens/turn", Engine: perTurn, Raw: basePerTurn, Ratio: ratio, Runs: 1,
			Note: fmt.Sprintf("tools array and catalog (the engine's estimate; native modes: the tools not deferred, the catalog and the loaded definitions the provider inserts), %.0f tokens/turn uncached; raw = the same conversations stored as materialized lists (seed §1.2)", s.full/float64(max(s.turns, 1)))})
	}
}
