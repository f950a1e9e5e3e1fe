package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// Providers the tools array can be rendered for, and how deferred tools
// reach them. Each is a row of deferral's provider table (name,
// native or not, rendering, search output), which the engine reads; the
// constants name the rows for callers. A provider's own name means its
// native deferral, the default:
//
//   - anthropic (the default), anthropic-native: provider-native deferral.
//     The array holds every tool of the turn once, deferred ones with
//     defer_loading, and never changes within a turn; tool_search's
//     result is tool_reference blocks that load the tools into the
//     context after the cached prefix.
//   - openai, openai-native: the same with OpenAI's tool_search: one
//     namespace per server, deferred functions with defer_loading,
//     tool_search's result a tool_search_output item.
//   - anthropic-native-server: as anthropic-native, with Anthropic's server
//     search tool (tool_search_tool_bm25_20251119) in place of the engine's
//     tool_search; Anthropic runs the searches, the catalog names it.
//   - anthropic-engine, openai-engine: the engine's catalog, for providers
//     or backends without native deferral. The array holds the resident
//     tools and the loaded ones; a discovered tool is appended after the
//     frozen array (no byte before it changes, the cache breakpoint stays
//     on the frozen array) and the catalog text is the turn's; the cost is
//     one cache miss of the appended tools per discovery, and the loaded
//     tools' schemas in every later request. tool_search's result is the
//     full schemas as JSON. Earlier, "anthropic" and "openai" named
//     these.
//
// Native renderings also keep every tool the session has loaded that the
// turn's resolution lacks (disabled since, or no longer permitted),
// deferred and marked not callable; CallCheck says whether a
// call may execute.
const (
	ProviderAnthropic       = "anthropic"
	ProviderOpenAI          = "openai"
	ProviderAnthropicNative = "anthropic-native"
	ProviderAnthropicServer = "anthropic-native-server"
	ProviderOpenAINative    = "openai-native"
	ProviderAnthropicEngine = "anthropic-engine"
	ProviderOpenAIEngine    = "openai-engine"
)

// Providers lists the provider values, in a fixed order: the rows of
// deferral's provider table, which says how each renders.
var Providers = deferral.ProviderNames()

// ResolveRequest qualifies a resolution.
type ResolveRequest struct {
	// Profile is the agent profile; "" for none.
	Profile string `json:"profile,omitempty"`
	// Override is a per-turn override; zero for none.
	Override intent.Override `json:"-"`
	// Provider selects the rendering: one of Providers ("anthropic", its
	// native deferral, by default).
	Provider string `json:"provider,omitempty"`
	// MinSeq asks for read-your-writes.
	MinSeq uint64 `json:"min_seq,omitempty"`
	// Channel is the channel the tools are for: the registry's
	// channel policy narrows the resolution for it. BeginTurn sets it from
	// the origin; a read (Resolve, History, Explain) names it, and ""
	// resolves under the policy's "*" rule.
	Channel string `json:"channel,omitempty"`
}

func (r ResolveRequest) validate() error {
	return validProvider(r.Provider)
}

func validProvider(p string) error {
	if _, ok := deferral.LookupProvider(p); ok {
		return nil
	}
	return fmt.Errorf("%w: provider %q unknown: use one of %s", ErrInvalid, p, strings.Join(Providers, ", "))
}

// turnView is a turn view (wire.TurnView, the reply of resolve, turn-begin
// and turn-dispatch) with what the engine keeps of it for the prompt-cache
// metrics of a dispatch (markDispatch).
type turnView struct {
	wire.TurnView
	prefix  deferral.Prefix   // of cached
	cached  []byte            // the cached part of Rendering (CachedPrefix)
	refs    map[string]string // the referenced definitions (ReferenceDefs)
	evicted bool              // the turn began with an eviction
	classes []deferral.Class  // Classification as the split holds it
}

// EvictBound is the reason of the DeferredEvicted a turn boundary appends
// when the loaded set is over deferral.LoadedBound; "evict"
// is the cause of the prefix change it makes.
const EvictBound = "bound"

// nativeView is a native rendering with what the view needs of it; it
// does not change within a turn, so it is computed once.
type nativeView struct {
	rendering   []byte
	tools       []resolver.Tool // rendered: the turn's, and the referenced ones it lacks
	prefix      deferral.Prefix // of cached
	cached      []byte          // the part the provider caches (CachedPrefix)
	prefixHash  string          // of cached
	hash        string          // of rendering
	catalogText string
	budget      deferral.Budget
}

func (e *Engine) resolve(st aggregate.State, req ResolveRequest) (*resolver.Resolution, error) {
	res, _, err := e.resolveWith(st, req)
	return res, err
}

// resolveWith is resolve that also returns the registry that resolved, so
// that a frozen turn searches the index of that very registry.
func (e *Engine) resolveWith(st aggregate.State, req ResolveRequest) (*resolver.Resolution, *resolver.Registry, error) {
	start := time.Now()
	reg := e.Registry()
	res, err := reg.Resolve(resolver.Request{Override: req.Override, Session: st.Intent, Profile: req.Profile, Channel: req.Channel})
	if f := e.cfg.Hooks.Resolved; f != nil {
		f(time.Since(start))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return res, reg, nil
}

func (e *Engine) view(st aggregate.State, res *resolver.Resolution, split deferral.Split, provider string) turnView {
	return e.viewOf(st, res, split, provider, nil)
}

// viewOf builds a view; ot, when not nil, caches native renderings for the
// turn.
func (e *Engine) viewOf(st aggregate.State, res *resolver.Resolution, split deferral.Split, provider string, ot *openTurn) turnView {
	v := turnView{TurnView: wire.TurnView{
		Session: st.Session, Seq: st.LastSeq, Intent: st.Intent, Source: res.Source,
		Unknown: res.Unknown, ContractHash: res.ContractHash, RegistryVersion: res.RegistryVersion,
		Catalog: split.Catalog, CatalogText: split.CatalogText,
		Classification: mapped(split.Classification, wireClass), Loaded: st.Loaded,
		RenderedFor: provider, Policy: res.Policy, Withheld: res.Withheld,
	}, classes: split.Classification}
	row, ok := deferral.LookupProvider(provider)
	if !ok { // validated by the callers; render as the default
		row, _ = deferral.LookupProvider("")
	}
	v.RenderedFor = row.Name
	for _, t := range res.Tools {
		v.Tools = append(v.Tools, t.Name)
	}
	if row.Native {
		var reg *resolver.Registry
		if ot != nil {
			reg = ot.reg
		}
		if reg == nil {
			reg = e.Registry()
		}
		nv := e.nativeRender(res, row, ot, st.Referenced, reg)
		v.Provider = v.Tools // every tool is in the array, deferred ones marked
		v.Rendering, v.PrefixHash, v.RenderingHash, v.prefix, v.cached = nv.rendering, nv.prefixHash, nv.hash, nv.prefix, nv.cached
		v.ReferencesHash, v.refs = row.ReferencesHash(nv.tools, st.Referenced), row.ReferenceDefs(nv.tools, st.Referenced)
		for _, n := range st.Referenced {
			if _, loaded := slices.BinarySearch(st.Loaded, n); !loaded {
				v.DroppableReferences = append(v.DroppableReferences, n)
			}
		}
		v.CatalogText = nv.catalogText
		v.Budget = nv.budget
		v.Budget.ResidentTools = len(split.Provider)
		return v
	}
	for _, t := range split.Provider {
		v.Provider = append(v.Provider, t.Name)
	}
	v.Budget = deferral.Estimate(split) // a native view's budget is its rendering's (nativeRender)
	v.Rendering = row.Render(split.Provider, res.Namespaces, split.Frozen)
	sum := sha256.Sum256(v.Rendering)
	v.RenderingHash = hex.EncodeToString(sum[:])
	v.cached = row.CachedPrefix(split.Provider, res.Namespaces, split.Frozen)
	v.PrefixHash = v.RenderingHash // the engine's array is cached as sent
	v.prefix = deferral.PrefixOf(v.cached)
	return v
}

// nativeRender renders res for a native provider, once per turn when ot is
// given: the array holds every tool and does not change within the turn.
// The tools the session's history references (State.Referenced, every
// tool it ever loaded) that res lacks stay defined, marked not callable
// (deferral.WithReferenced): a tool loaded in the turn is in
// res, so the set is the turn's.
func (e *Engine) nativeRender(res *resolver.Resolution, row deferral.Provider, ot *openTurn, referenced []string, reg *resolver.Registry) *nativeView {
	if ot != nil {
		ot.mu.Lock()
		defer ot.mu.Unlock()
		if nv := ot.native[row.Name]; nv != nil {
			return nv
		}
	}
	key := nativeKey(row.Name, res.ContractHash, reg.Version(), res.Withheld, referenced)
	nv := e.native.get(key)
	if nv == nil {
		// A referenced tool the channel policy withholds keeps only a stub.
		// Clipped: the view is shared, an append to it must copy.
		tools := deferral.WithReferenced(res.Tools, referenced, deferral.WithholdLookup(res.Withheld, reg.Tool))
		nv = &nativeView{rendering: slices.Clip(row.Render(tools, res.Namespaces, 0)), tools: slices.Clip(tools)}
		nv.catalogText, nv.budget = row.Context(res)
		sum := sha256.Sum256(nv.rendering)
		nv.hash = hex.EncodeToString(sum[:])
		nv.cached = row.CachedPrefix(tools, res.Namespaces, 0)
		sum = sha256.Sum256(nv.cached)
		nv.prefixHash = hex.EncodeToString(sum[:])
		nv.prefix = deferral.PrefixOf(nv.cached)
		e.native.put(key, nv)
	}
	if ot != nil {
		if ot.native == nil {
			ot.native = map[string]*nativeView{}
		}
		ot.native[row.Name] = nv
	}
	return nv
}

// Resolve resolves a session's tools against the live registry, or returns
// the frozen tools of its open turn, as rebuilt from the log by any
// engine. It writes nothing.
func (e *Engine) Resolve(ctx context.Context, session string, req ResolveRequest) (wire.TurnView, error) {
	if err := req.validate(); err != nil {
		return wire.TurnView{}, err
	}
	v, err := e.resolveView(ctx, session, req, false)
	return v.TurnView, err
}

// resolveView is Resolve; latest reads the session from the log first
// (a dispatch: the turn's discoveries on any engine count), else the
// view is read, and the log too when the session is in a turn.
func (e *Engine) resolveView(ctx context.Context, session string, req ResolveRequest, latest bool) (turnView, error) {
	var st aggregate.State
	var err error
	if latest {
		st, err = e.latest(ctx, session, req.MinSeq)
	} else if st, err = e.Session(ctx, session, req.MinSeq); err == nil && (st.InTurn || e.holdsTurn(session)) {
		st, err = e.latest(ctx, session, req.MinSeq)
	}
	if err != nil {
		return turnView{}, err
	}
	if st.InTurn && req.Override.Kind == intent.OverrideNone {
		var v turnView
		frozen := false
		err := e.withTurn(ctx, st, func(ot *openTurn, st aggregate.State) error {
			if !ot.servesChannel(req.Channel, e.Registry()) {
				return nil // another channel's turn under a policy: resolve live below
			}
			v, frozen = e.frozenView(st, ot, req.Provider), true
			return nil
		})
		if err != nil || frozen {
			return v, err
		}
	}
	res, err := e.resolve(st, req)
	if err != nil {
		return turnView{}, err
	}
	v := e.view(st, res, deferral.SplitInLoadOrder(res, st.InLoadOrder()), req.Provider)
	v.NoEvents = st.LastSeq == 0
	return v, nil
}

// holdsTurn reports whether this engine holds an open turn of session
// (the view may not show it yet).
func (e *Engine) holdsTurn(session string) bool {
	_, ok := e.ts.turns.Get(session)
	return ok
}

// frozenView is the view of the open turn ot of st.
func (e *Engine) frozenView(st aggregate.State, ot *openTurn, provider string) turnView {
	v := e.viewOf(st, ot.res, ot.turn.Request(), provider, ot)
	v.Turn, v.Frozen, v.Loaded, v.evicted = ot.turn.Number(), true, ot.turn.Loaded(), ot.evicted
	return v
}

// BeginTurn starts the next turn: it resolves the session's tools, freezes
// them with the loaded deferred set, and appends TurnStarted (closing
// a turn left open by a crash first). TurnStarted records the request, the
// registry version and the contract hash, so that any engine rebuilds the
// turn from the log; the registry is stored in the registry history
// first.
func (e *Engine) BeginTurn(ctx context.Context, session string, origin Origin, req ResolveRequest) (wire.TurnView, error) {
	if err := req.validate(); err != nil {
		return wire.TurnView{}, err
	}
	req.Channel = origin.Channel // The turn's tools are its channel's
	for attempt := 0; ; attempt++ {
		st, err := e.current(ctx, session, attempt > 0, 0)
		if err != nil {
			return wire.TurnView{}, err
		}
		res, reg, err := e.resolveWith(st, req)
		if err != nil {
			return wire.TurnView{}, err
		}
		if err := e.recordRegistry(ctx, reg); err != nil {
			// The turn still works here; another engine can rebuild it
			// only if it holds this registry version.
			e.cfg.Logger.Error().Err(err).Str("registry", reg.Version()).Msg("registry not stored in the registry history")
		}
		var cmds []events.Payload
		if st.InTurn {
			cmds = append(cmds, events.TurnEnded{Turn: st.Turn})
		}
		// The loaded set is bounded by evicting, at the turn
		// boundary, the tools loaded longest ago (an event in the log).
		evicted := deferral.Evict(st.InLoadOrder(), deferral.LoadedBound)
		if len(evicted) > 0 {
			cmds = append(cmds, events.DeferredEvicted{Names: evicted, Turn: st.Turn, Reason: EvictBound})
		}
		cmds = append(cmds, turnStarted(st.Turn+1, st, req, res))
		expected := st.LastSeq
		out, err := e.Apply(ctx, session, origin, &expected, cmds...)
		if errors.Is(err, ErrConflict) && attempt < e.cfg.MaxRetries {
			continue // someone wrote in between: re-read and start again
		}
		if err != nil {
			return wire.TurnView{}, err
		}
		fresh := st.LastSeq == 0
		st = out.State
		loaded := st.InLoadOrder() // The array the last turn ended with, less what was evicted
		turn := deferral.FreezeIndexed(st.Turn, res, loaded, deferral.IndexFor(reg))
		ot := &openTurn{turn: turn, res: res, reg: reg, req: req, seq: st.TurnSeq, applied: out.Last, evicted: len(evicted) > 0}
		e.ts.turns.Put(session, ot)
		v := e.viewOf(st, res, turn.Request(), req.Provider, ot)
		v.Turn, v.Frozen, v.NoEvents, v.evicted = st.Turn, true, fresh, ot.evicted
		return v.TurnView, nil
	}
}

// Dispatch returns the provider request for the open turn (or a live
// resolution outside a turn) and records its resident/deferred
// classification for inspection.
func (e *Engine) Dispatch(ctx context.Context, session string, provider string) (wire.TurnView, error) {
	req := ResolveRequest{Provider: provider}
	if err := req.validate(); err != nil {
		return wire.TurnView{}, err
	}
	v, err := e.resolveView(ctx, session, req, true)
	if err != nil {
		return v.TurnView, err
	}
	e.markDispatch(v)
	return v.TurnView, nil
}

// dispatchMark is what the last dispatch of a session looked like.
type dispatchMark struct {
	prefix   deferral.Prefix
	refs     map[string]string
	catalog  [sha256.Size]byte
	registry string
	contract string
	turn     uint64
	seq      uint64
	loaded   int
	at       time.Time
	view     checkpoint.Dispatch
}

// markDispatch records a dispatch's classification and measures what
// it did to the session's prompt cache: the tools array against the
// previous dispatch (same, extended by appended tools, or broken) and the
// catalog text, each reported with its cause to the hooks.
func (e *Engine) markDispatch(v turnView) {
	d := dispatchOf(v.Turn, v.ContractHash, v.classes)
	d.At = e.clock().UnixMilli()
	catalog := sha256.Sum256([]byte(v.CatalogText))
	mark := dispatchMark{prefix: v.prefix, refs: v.refs, catalog: catalog, registry: v.RegistryVersion, contract: v.ContractHash, turn: v.Turn, seq: v.Seq, loaded: len(v.Loaded), at: e.clock(), view: d}
	prev, seen := e.ts.last.Swap(v.Session, func(dispatchMark, bool) dispatchMark { return mark })
	if !seen {
		return
	}
	change := deferral.PrefixSame // equal Prefixes are the same array: no hashing
	if prev.prefix != v.prefix {
		change = prev.prefix.Compare(v.cached)
	}
	if change == deferral.PrefixSame && deferral.ReferencesBroke(prev.refs, v.refs) {
		change = deferral.PrefixBroken // a definition the history references changed: the cache breaks there
	}
	catalogChanged := prev.catalog != catalog
	if change == deferral.PrefixSame && !catalogChanged {
		return
	}
	// The resolved tools (the contract) change with the intent, the
	// profile or an override, not with loads; a new turn over the same
	// contract keeps the array, so "turn" is left for what
	// else a turn boundary may change (a resume that dropped loaded tools).
	cause := "intent"
	switch {
	case prev.registry != v.RegistryVersion:
		cause = "registry"
	case prev.contract != v.ContractHash:
		cause = "intent"
	case len(v.Loaded) > prev.loaded:
		cause = "discovery"
	case prev.turn != v.Turn && v.evicted:
		cause = "evict"
	case prev.turn != v.Turn:
		cause = "turn"
	}
	e.cfg.Logger.Debug().Str("session", v.Session).Str("cause", cause).Str("tools", change.String()).Bool("catalog_changed", catalogChanged).Msg("provider request changed")
	switch change {
	case deferral.PrefixBroken:
		if f := e.cfg.Hooks.PrefixChanged; f != nil {
			f(cause)
		}
	case deferral.PrefixExtended:
		if f := e.cfg.Hooks.PrefixExtended; f != nil {
			f(cause)
		}
	}
	if catalogChanged {
		if f := e.cfg.Hooks.CatalogChanged; f != nil {
			f(cause)
		}
	}
}

// LastDispatch returns the classification recorded by the session's last
// dispatch in this process. LastDispatchOf also answers after a
// crash, from the log.
func (e *Engine) LastDispatch(session string) (checkpoint.Dispatch, bool) {
	m, ok := e.ts.last.Get(session)
	return m.view, ok
}

// LastDispatchOf returns the classification of the session's last
// dispatch, whichever engine served it and whether or
// not it has crashed since: the one this process recorded while the log
// still holds the session as it was then, otherwise the classification a
// dispatch of the session's last turn gives as the log holds it (its
// frozen tools and the tools loaded in it, rebuilt from the log like any
// request of the turn), stamped with the time of the session's last event.
// It reports false for a session that has never started a turn.
func (e *Engine) LastDispatchOf(ctx context.Context, session string) (checkpoint.Dispatch, bool, error) {
	st, err := e.latest(ctx, session, 0)
	if err != nil {
		return checkpoint.Dispatch{}, false, err
	}
	if m, ok := e.ts.last.Get(session); ok && m.seq == st.LastSeq {
		return m.view, true, nil // nothing written since: exactly what was sent
	}
	if st.Turn == 0 {
		return checkpoint.Dispatch{}, false, nil
	}
	var d checkpoint.Dispatch
	if st.InTurn {
		err = e.withTurn(ctx, st, func(ot *openTurn, _ aggregate.State) error {
			d = dispatchOf(ot.turn.Number(), ot.res.ContractHash, ot.turn.Request().Classification)
			return nil
		})
	} else {
		// The last turn has ended: rebuild it from its TurnStarted and the
		// loads of it that the log holds.
		var ot *openTurn
		if ot, err = e.rebuildTurn(ctx, st); err == nil {
			d = dispatchOf(ot.turn.Number(), ot.res.ContractHash, ot.turn.Request().Classification)
		}
	}
	if err != nil {
		return checkpoint.Dispatch{}, false, err
	}
	recs, err := e.log.ReadSessionThrough(ctx, session, st.LastSeq, st.LastSeq)
	if err != nil {
		return checkpoint.Dispatch{}, false, err
	}
	if len(recs) > 0 {
		d.At = recs[len(recs)-1].Time.UnixMilli()
	}
	return d, true, nil
}
