package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// A session's open turn is a function of the log and the registry history
//: its TurnStarted records the request it was frozen from (the
// session's intent, the profile, the override, the registry version and
// the contract hash), and its DeferredLoaded events, in log order, are the
// tools tool_search loaded in it. Any engine rebuilds the turn from them,
// byte for byte; the engine's memory only caches what it rebuilt (a
// bounded LRU per session), and each request first folds whatever the log
// holds after the cached turn, so that a discovery made on another engine
// is in the next request served here.

// ErrRegistryUnavailable: a turn or a past point names a registry version
// that neither this engine nor the registry history holds.
var ErrRegistryUnavailable = errors.New("registry version unavailable")

// openTurn is one session's frozen turn as rebuilt from the log.
type openTurn struct {
	turn *deferral.Turn
	res  *resolver.Resolution
	reg  *resolver.Registry // that resolved res: the definitions of referenced tools res lacks
	req  ResolveRequest
	seq  uint64 // stream sequence of the turn's TurnStarted

	search  sync.Mutex // held by a tool_search from the search to the append
	mu      sync.Mutex
	applied uint64                 // last session sequence folded into turn
	native  map[string]*nativeView // per native provider: constant for the turn
	evicted bool                   // a DeferredEvicted preceded the turn's TurnStarted
}

// servesChannel reports whether a read by channel gets the turn's frozen
// tools: for the channel that began the turn, a caller that names
// no channel (dispatch), or without a channel policy; for another channel
// under a policy only when its policy, in the turn's registry and the
// live one, denies none of the frozen tools. Otherwise the read resolves
// live under its own channel, so no channel receives a tool its policy
// withholds from it by reading another channel's turn.
func (ot *openTurn) servesChannel(channel string, live *resolver.Registry) bool {
	if channel == "" || channel == ot.req.Channel {
		return true
	}
	for _, reg := range []*resolver.Registry{ot.reg, live} {
		if reg == nil || reg.Policy() == nil {
			continue
		}
		for i := range ot.res.Tools {
			if reg.Decide(channel, ot.req.Profile, ot.res.Tools[i].Name).Decision == resolver.DecisionDeny {
				return false
			}
		}
	}
	return true
}

// turnState is the engine's bounded memory of turns, dispatches and
// registries.
type turnState struct {
	turns    *lru.Cache[string, *openTurn]
	last     *lru.Cache[string, dispatchMark]
	regs     *lru.Cache[string, []*resolver.Registry] // registries by version
	hist     RegistryHistory
	histMu   sync.RWMutex
	recorded sync.Map // *resolver.Registry → time.Time: when the history last held it
}

func newTurnState(size int) turnState {
	return turnState{turns: lru.New[string, *openTurn](size), last: lru.New[string, dispatchMark](size), regs: lru.New[string, []*resolver.Registry](16)}
}

// RegistryHistory keeps the registry versions engines served, by version
// and by time (jetstream.RegistryHistory).
type RegistryHistory interface {
	// Record stores a registry file of a version (a no-op when stored).
	Record(ctx context.Context, version string, data []byte) error
	// Lookup returns the newest content of a version.
	Lookup(ctx context.Context, version string) ([]byte, error)
	// LookupAll returns every content of a version, newest first.
	LookupAll(ctx context.Context, version string) ([][]byte, error)
	// Timeline lists the recorded versions, oldest first.
	Timeline(ctx context.Context) ([]jetstream.RegistryMark, error)
}

var _ RegistryHistory = (*jetstream.RegistryHistory)(nil)

// SetRegistryHistory makes the engine record every registry it serves in
// h before a turn names it, and look up in h the registry versions of
// turns and past points it does not hold. Without one, an engine rebuilds
// turns of the registries it served itself and of the embedded default.
func (e *Engine) SetRegistryHistory(h RegistryHistory) {
	e.ts.histMu.Lock()
	e.ts.hist = h
	e.ts.histMu.Unlock()
}

func (e *Engine) history() RegistryHistory {
	e.ts.histMu.RLock()
	defer e.ts.histMu.RUnlock()
	return e.ts.hist
}

// keepRegistry remembers a registry this engine served, by version.
func (e *Engine) keepRegistry(reg *resolver.Registry) {
	e.ts.regs.Swap(reg.Version(), func(old []*resolver.Registry, _ bool) []*resolver.Registry {
		if slices.Contains(old, reg) {
			return old
		}
		return append(slices.Clip(old), reg)
	})
}

// recordRecheck is how long recordRegistry trusts that the history holds
// a registry it stored: a prune on another engine may remove a
// version this engine still serves (one outside the newest kept, that
// no open turn or checkpoint referenced yet), and the next turn begun
// after this long records it again before naming it. Asking is one direct
// get, a no-op when the history holds it.
var recordRecheck = 10 * time.Second

// recordRegistry stores reg in the registry history, before a turn names
// its version: once, and again when recordRecheck has passed and the
// history no longer holds it.
func (e *Engine) recordRegistry(ctx context.Context, reg *resolver.Registry) error {
	h := e.history()
	if h == nil {
		return nil
	}
	if at, ok := e.ts.recorded.Load(reg); ok && time.Since(at.(time.Time)) < recordRecheck {
		return nil
	}
	data, err := reg.MarshalJSON()
	if err != nil {
		return fmt.Errorf("record registry %s: %w", reg.Version(), err)
	}
	if err := h.Record(ctx, reg.Version(), data); err != nil {
		return err
	}
	e.ts.recorded.Store(reg, time.Now())
	return nil
}

// registryOf returns a registry of version for which accept holds (nil
// accepts any): the live one, one this engine served, the embedded
// default, or one from the registry history, in that order.
func (e *Engine) registryOf(ctx context.Context, version string, accept func(*resolver.Registry) bool) (*resolver.Registry, error) {
	ok := func(r *resolver.Registry) bool {
		return r != nil && r.Version() == version && (accept == nil || accept(r))
	}
	if r := e.Registry(); ok(r) {
		return r, nil
	}
	if rs, found := e.ts.regs.Get(version); found {
		for i := len(rs) - 1; i >= 0; i-- {
			if ok(rs[i]) {
				return rs[i], nil
			}
		}
	}
	if r := resolver.Default(); ok(r) {
		return r, nil
	}
	h := e.history()
	if h == nil {
		return nil, fmt.Errorf("%w: registry %q: this engine has no registry history and does not hold it", ErrRegistryUnavailable, version)
	}
	data, err := h.Lookup(ctx, version)
	if err != nil {
		if errors.Is(err, jetstream.ErrRegistryVersionPruned) {
			return nil, prunedErr(version)
		}
		if errors.Is(err, jetstream.ErrRegistryVersionUnknown) {
			return nil, fmt.Errorf("%w: %w", ErrRegistryUnavailable, err)
		}
		return nil, err
	}
	contents := [][]byte{data}
	for attempt := 0; attempt < 2; attempt++ {
		for _, d := range contents {
			r, err := resolver.Load(d)
			if err != nil {
				continue
			}
			if ok(r) {
				e.keepRegistry(r)
				return r, nil
			}
		}
		if attempt == 0 { // the version was re-pushed with other content
			if contents, err = h.LookupAll(ctx, version); err != nil {
				if errors.Is(err, jetstream.ErrRegistryVersionPruned) {
					return nil, prunedErr(version)
				}
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("%w: registry %q in the history has no content matching the recorded contract", ErrRegistryUnavailable, version)
}

// turnIntent is in as a TurnStarted records it.
func turnIntent(in intent.Intent) *intent.Intent { return &in }

// intentOf is the intent a TurnStarted records; the zero intent for none.
func intentOf(in *intent.Intent) intent.Intent {
	if in == nil {
		return intent.Intent{}
	}
	return *in
}

// turnStarted is the TurnStarted that records the turn frozen from res
// for st and req.
func turnStarted(turn uint64, st aggregate.State, req ResolveRequest, res *resolver.Resolution) events.TurnStarted {
	return events.TurnStarted{Turn: turn, Intent: turnIntent(st.Intent), Profile: req.Profile, Override: events.RecordOverride(req.Override),
		RegistryVersion: res.RegistryVersion, ContractHash: res.ContractHash, Provider: req.Provider}
}

// replayTurn resolves the request a TurnStarted records against the
// registry version it names, checking the contract hash; st is the
// session (its intent stands in for an older TurnStarted's). channel is
// the channel that wrote the TurnStarted (its envelope's), whose policy
// narrowed the turn.
func (e *Engine) replayTurn(ctx context.Context, ts events.TurnStarted, channel string, st aggregate.State) (*resolver.Resolution, *resolver.Registry, ResolveRequest, error) {
	req := ResolveRequest{Profile: ts.Profile, Override: ts.Override.Override(), Channel: channel, Provider: ts.Provider}
	if !ts.Recorded() { // written before turns recorded their request
		res, reg, err := e.resolveWith(st, req)
		return res, reg, req, err
	}
	rq := resolver.Request{Override: req.Override, Session: intentOf(ts.Intent), Profile: ts.Profile, Channel: channel}
	res, reg, err := e.resolveRecorded(ctx, ts.RegistryVersion, ts.ContractHash, rq)
	if err != nil {
		return nil, nil, req, fmt.Errorf("rebuild turn %d of session %q: %w", ts.Turn, st.Session, err)
	}
	return res, reg, req, nil
}

// resolveRecorded resolves rq against a registry of the version a turn or
// a checkpoint recorded (see registryOf) whose resolution has the recorded
// contract hash, and returns both.
func (e *Engine) resolveRecorded(ctx context.Context, version, contractHash string, rq resolver.Request) (*resolver.Resolution, *resolver.Registry, error) {
	var res *resolver.Resolution
	reg, err := e.registryOf(ctx, version, func(r *resolver.Registry) bool {
		out, err := r.Resolve(rq)
		if err != nil || out.ContractHash != contractHash {
			return false
		}
		res = out
		return true
	})
	return res, reg, err
}

// latest reads the session as the log holds it now (at least minSeq and
// the session's mark).
func (e *Engine) latest(ctx context.Context, session string, minSeq uint64) (aggregate.State, error) {
	st, err := e.read(ctx, session, projection.ReadOptions{Latest: true, MinSeq: minSeq})
	if err != nil {
		return st, err
	}
	e.remember(st) // commands decided next start from the log, not an older cache
	return st, nil
}

// frozenTurn returns the open turn of st (InTurn), rebuilt from the log
// when this engine does not hold it, and brought up to st.LastSeq: the
// tools loaded since, by any engine, are loaded in it in log order.
func (e *Engine) frozenTurn(ctx context.Context, st aggregate.State) (*openTurn, error) {
	if ot, ok := e.ts.turns.Get(st.Session); ok && ot.turn.Number() == st.Turn && (st.TurnSeq == 0 || ot.seq == st.TurnSeq) {
		if err := e.catchUp(ctx, ot, st); err != nil {
			return nil, err
		}
		return ot, nil
	}
	ot, err := e.rebuildTurn(ctx, st)
	if err != nil {
		return nil, err
	}
	e.ts.turns.Put(st.Session, ot)
	return ot, nil
}

// rebuildTurn rebuilds st's open turn from its TurnStarted and the
// events after it.
func (e *Engine) rebuildTurn(ctx context.Context, st aggregate.State) (*openTurn, error) {
	from := st.TurnSeq
	if from == 0 {
		from = 1 // a view folded before TurnSeq was kept: find the turn
	}
	// Through st.LastSeq: a replica behind the leader would end the read
	// early, and the turn would be rebuilt without its last discoveries.
	recs, err := e.log.ReadSessionThrough(ctx, st.Session, from, st.LastSeq)
	if err != nil {
		return nil, err
	}
	start := -1
	for i, r := range recs {
		if p, ok := r.Envelope.Payload.(events.TurnStarted); ok && r.Err == nil && p.Turn == st.Turn && (st.TurnSeq == 0 || r.Seq == st.TurnSeq) {
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("session %q: turn %d has no TurnStarted in the log up to %d", st.Session, st.Turn, st.LastSeq)
	}
	ts := recs[start].Envelope.Payload.(events.TurnStarted)
	evicted := false
	if pre, err := e.log.ReadSession(ctx, st.Session, recs[start].Seq-1, recs[start].Seq-1); err == nil && len(pre) == 1 && pre[0].Err == nil {
		_, evicted = pre[0].Envelope.Payload.(events.DeferredEvicted)
	}
	res, reg, req, err := e.replayTurn(ctx, ts, recs[start].Envelope.Channel, st)
	if err != nil {
		return nil, err
	}
	discovered := discoveries(recs[start+1:], st)
	initial := make([]string, 0, len(st.Loaded))
	for _, n := range st.InLoadOrder() {
		if !slices.Contains(discovered, n) {
			initial = append(initial, n)
		}
	}
	ot := &openTurn{turn: deferral.FreezeIndexed(st.Turn, res, initial, deferral.IndexFor(reg)), res: res, reg: reg, req: req, seq: recs[start].Seq, applied: st.LastSeq, evicted: evicted}
	load(ot.turn, discovered)
	return ot, nil
}

// discoveries are the names the DeferredLoaded events of st's open turn
// among recs loaded, in log order, each once; only names the fold kept
// in the loaded set count (a rejected event loads nothing).
func discoveries(recs []logport.Record, st aggregate.State) []string {
	var out []string
	for _, r := range recs {
		p, ok := r.Envelope.Payload.(events.DeferredLoaded)
		if r.Err != nil || !ok || p.Turn != st.Turn {
			continue
		}
		for _, n := range p.Names {
			if _, in := slices.BinarySearch(st.Loaded, n); in && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// load loads names into turn, in order.
func load(turn *deferral.Turn, names []string) {
	for len(names) > 0 {
		n := min(len(names), deferral.MaxSearchNames)
		turn.Load(names[:n]...)
		names = names[n:]
	}
}

// catchUp folds into ot the tools loaded after ot.applied, up to
// st.LastSeq. It waits for a tool_search of the turn in flight: that
// search has loaded tools the log may not hold yet, in an order the log
// may not keep.
func (e *Engine) catchUp(ctx context.Context, ot *openTurn, st aggregate.State) error {
	ot.search.Lock()
	defer ot.search.Unlock()
	return e.catchUpLocked(ctx, ot, st)
}

// catchUpLocked is catchUp for the holder of ot.search.
func (e *Engine) catchUpLocked(ctx context.Context, ot *openTurn, st aggregate.State) error {
	ot.mu.Lock()
	defer ot.mu.Unlock()
	if ot.applied >= st.LastSeq {
		return nil
	}
	// Through st.LastSeq, as ot.applied says below: a replica behind the
	// leader ends a direct-get read early, and the discoveries it missed
	// would be missing from the turn's tools and from the checkpoint the
	// turn's end writes (it replaces the session's loaded set).
	recs, err := e.log.ReadSessionThrough(ctx, st.Session, ot.applied+1, st.LastSeq)
	if err != nil {
		return err
	}
	load(ot.turn, discoveries(recs, st))
	ot.applied = st.LastSeq
	return nil
}

// settled records that this engine's own write of [first, last] went to
// ot: when nothing else was written since ot.applied, ot holds the log
// as it is; otherwise ot is dropped and rebuilt from the log by the next
// request, so the log's order wins.
func (e *Engine) settled(session string, ot *openTurn, first, last uint64) bool {
	ot.mu.Lock()
	defer ot.mu.Unlock()
	if first != 0 && first == ot.applied+1 {
		ot.applied = last
		return true
	}
	e.ts.turns.Remove(session)
	return false
}

// RecordRegistry stores the live registry in the registry history (a
// no-op without one, or when stored): engines call it when they start
// serving a registry, so that history can say which version was in force
// when.
func (e *Engine) RecordRegistry(ctx context.Context) error {
	return e.recordRegistry(ctx, e.Registry())
}

// ServeRegistry records reg in the registry history, then serves it
// (SetRegistry). History and explain name the registry in force at a
// point by the time of its record, so recording first means an event
// stored once reg is served is never dated before reg's record: a client
// that saw the engine serve reg and then wrote finds its write explained
// under reg. A record that fails is returned, and reg is served all the
// same (turns then rebuild only on engines that served it).
func (e *Engine) ServeRegistry(ctx context.Context, reg *resolver.Registry) error {
	err := e.recordRegistry(ctx, reg)
	e.SetRegistry(reg)
	return err
}

// withTurn runs fn with the session's open turn exactly as the log holds
// it at st.LastSeq: no tool_search of the turn is in flight on this
// engine (its loads may not be stored yet), the cache still holds the
// turn (a search whose append was not contiguous drops it), and the turn
// has folded the log up to st.LastSeq and no further. st is re-read from
// the log when a search stored more meanwhile. fn runs under the turn's
// search lock, so it may search and append itself.
func (e *Engine) withTurn(ctx context.Context, st aggregate.State, fn func(ot *openTurn, st aggregate.State) error) error {
	for attempt := 0; ; attempt++ {
		if !st.InTurn {
			return fmt.Errorf("session %q: %w: begin a turn first", st.Session, ErrNoTurn)
		}
		ot, err := e.frozenTurn(ctx, st)
		if err != nil {
			return err
		}
		ot.search.Lock()
		cur, held := e.ts.turns.Get(st.Session)
		if held && cur == ot {
			if err := e.catchUpLocked(ctx, ot, st); err != nil {
				ot.search.Unlock()
				return err
			}
			ot.mu.Lock()
			exact := ot.applied == st.LastSeq
			ot.mu.Unlock()
			if exact || attempt >= e.cfg.MaxRetries {
				err := fn(ot, st)
				ot.search.Unlock()
				return err
			}
		}
		ot.search.Unlock()
		if st, err = e.latest(ctx, st.Session, 0); err != nil {
			return err
		}
	}
}
