package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// Until bounds a history: events up to and including Seq (0: no bound)
// and stored at or before Time (zero: no bound).
type Until struct {
	Seq  uint64
	Time time.Time
}

func (u Until) stops(r logport.Record) bool {
	return (u.Seq != 0 && r.Seq > u.Seq) || (!u.Time.IsZero() && r.Time.After(u.Time))
}

// HistoryEntry is one event of a session's timeline, its payload decoded
// (nil when undecodable), with the state it left behind and how the
// resolved tool set changed (wire.HistoryPoint).
type HistoryEntry = wire.HistoryEntryOf[events.Payload]

// registriesAt answers "which registry was in force" for one replay: the
// registry history's timeline read once, versions loaded once.
type registriesAt struct {
	e      *Engine
	live   *resolver.Registry
	marks  []jetstream.RegistryMark
	byVer  map[string]*resolver.Registry
	pruned map[string]bool          // versions whose content was pruned
	points map[pointKey]cachedPoint // cacheOf's results (historycache.go)
}

func (e *Engine) registriesAt(ctx context.Context) *registriesAt {
	r := &registriesAt{e: e, live: e.Registry(), byVer: map[string]*resolver.Registry{}, pruned: map[string]bool{}}
	if h := e.history(); h != nil {
		if marks, err := h.Timeline(ctx); err == nil {
			r.marks = marks
		} else {
			e.cfg.Logger.Warn().Err(err).Msg("registry timeline unavailable: history resolves against the live registry")
		}
	}
	return r
}

// version returns the registry of version v, or nil when no engine and
// no history holds it.
func (r *registriesAt) version(ctx context.Context, v string) *resolver.Registry {
	if reg, ok := r.byVer[v]; ok {
		return reg
	}
	reg, err := r.e.registryOf(ctx, v, nil)
	if err != nil {
		reg = nil
		r.pruned[v] = errors.Is(err, ErrRegistryPruned)
	}
	r.byVer[v] = reg
	return reg
}

// at returns the registry in force at t: the last one recorded at or
// before t, or the live one when the history has none (or t is zero).
// When the version in force at t was pruned from the registry history
// it returns nil and that version: the point cannot be resolved,
// and resolving it against another version would be a wrong answer.
func (r *registriesAt) at(ctx context.Context, t time.Time) (*resolver.Registry, string) {
	if t.IsZero() {
		return r.live, ""
	}
	i := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].Time.After(t) })
	if i == 0 {
		return r.live, ""
	}
	v := r.marks[i-1].Version
	if reg := r.version(ctx, v); reg != nil {
		return reg, ""
	}
	if r.pruned[v] {
		return nil, v
	}
	return r.live, ""
}

// prunedText is what a point under a pruned registry version says
// : a history entry's error, an explanation's detail.
func prunedText(version string) string {
	return fmt.Sprintf("registry version %s pruned: the registry history no longer holds it (serve --registry-keep), so the tools at this point cannot be resolved", version)
}

// replayedTurn is an open turn as a replay rebuilds it: turn, res, the
// registry that resolved it and the provider it was begun for, or, when
// the registry version it was frozen against was pruned, only
// pruned, that version.
type replayedTurn struct {
	turn     *deferral.Turn
	res      *resolver.Resolution
	reg      *resolver.Registry
	provider string
	pruned   string
}

// startTurn rebuilds the turn a TurnStarted stored at t opened, for a
// replay: against its recorded request and registry version, or, for an
// older event, against req and the registry in force at t.
func (e *Engine) startTurn(ctx context.Context, regs *registriesAt, ts events.TurnStarted, channel string, before aggregate.State, t time.Time, req ResolveRequest) (*replayedTurn, error) {
	var res *resolver.Resolution
	var reg *resolver.Registry
	var err error
	if ts.Recorded() {
		res, reg, _, err = e.replayTurn(ctx, ts, channel, before)
		if errors.Is(err, ErrRegistryPruned) {
			return &replayedTurn{pruned: ts.RegistryVersion}, err
		}
	} else {
		var pruned string
		reg, pruned = regs.at(ctx, t)
		if reg == nil {
			return &replayedTurn{pruned: pruned}, fmt.Errorf("rebuild turn %d of session %q: %s: %w", ts.Turn, before.Session, prunedText(pruned), ErrRegistryPruned)
		}
		res, err = reg.Resolve(resolver.Request{Override: req.Override, Session: before.Intent, Profile: req.Profile, Channel: channel})
	}
	if err != nil {
		return nil, err
	}
	return &replayedTurn{turn: deferral.Freeze(ts.Turn, res, before.InLoadOrder()), res: res, reg: reg, provider: ts.Provider}, nil
}

// History replays a session's events up to until and returns its timeline:
// at each event the intent it left, the tools it resolved to and what
// changed. Inside a turn the tools are the turn's, rebuilt from its
// TurnStarted against the registry version it recorded, with the tools
// loaded so far in it, and the entry carries the classification a
// dispatch would record. Outside a turn the intent resolves, with
// req's profile and override, against the registry in force when the
// event was stored. Each entry names the registry version it used.
//
// History holds the whole timeline in memory: a server answers with
// HistoryPage, whose memory is bounded by the page.
func (e *Engine) History(ctx context.Context, session string, until Until, req ResolveRequest) ([]HistoryEntry, aggregate.State, error) {
	var out []HistoryEntry
	st, _, err := e.HistoryPage(ctx, session, until, req, 0, func(h HistoryEntry) bool {
		out = append(out, h)
		return true
	})
	return out, st, err
}

// HistoryPage is one page of History: it folds the events up
// to after (without resolving them: only their state is carried) and
// passes each later entry, in order, to emit, until emit returns false or
// until ends. more reports whether the session has an event after the last
// one emitted (within until): the next page starts after that entry's
// Seq. st is the state after the last entry emitted (or after the events
// folded, when none was). Memory is bounded by the entries emit keeps, not
// by the session's length. Where a page ended with more is remembered for
// a while (see historyPages), so that the next page continues there: a
// client paging through a session costs time linear in its length.
func (e *Engine) HistoryPage(ctx context.Context, session string, until Until, req ResolveRequest, after uint64, emit func(HistoryEntry) bool) (st aggregate.State, more bool, err error) {
	release, err := e.reads.take(ctx)
	if err != nil {
		return aggregate.State{}, false, fmt.Errorf("history of %q: wait for a read slot: %w", session, err)
	}
	defer release()
	return e.historyPage(ctx, session, until, req, after, emit, true)
}

// historyPage is HistoryPage, starting from a history anchor when
// useAnchors and one is found.
func (e *Engine) historyPage(ctx context.Context, session string, until Until, req ResolveRequest, after uint64, emit func(HistoryEntry) bool, useAnchors bool) (st aggregate.State, more bool, err error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.State{}, false, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	if err := e.erasedHistory(ctx, session); err != nil {
		return aggregate.State{}, false, err
	}
	regs := e.registriesAt(ctx)
	rp := e.pages.take(session, after, until, req, e.clock())
	from := after + 1
	anchored := false
	if rp == nil {
		rp, from, anchored = e.historyStart(ctx, session, after, until, req, useAnchors)
	}
	full := false
	var last uint64 // the last entry emitted
	stop := errors.New("stop")
	reveal := e.actorRevealer(ctx)
	err = e.scanFrom(ctx, e.pager, session, from, until.Seq, func(r logport.Record) error {
		if until.stops(r) {
			return stop
		}
		if full {
			more = true
			return stop
		}
		show := r.Seq > after
		if show && !rp.primed {
			// The point before this page: what the last folded event left
			// (or, for a page from the start, the session without events).
			p := e.pointOf(ctx, regs, rp.st, rp.turn, rp.lastTime, rp.request(req))
			rp.prevTools, rp.prevPrefix, rp.prevRefs, rp.prevVersion, rp.prevPruned = p.Tools, p.PrefixHash, p.refs, p.RegistryVersion, p.pruned
			rp.primed = true
		}
		if anchored {
			// The first event after an anchor: a compaction since the
			// anchor was written purged what it leads to.
			anchored = false
			if compacted(r) {
				return errStaleAnchor
			}
		}
		h, st, err := e.foldEntry(ctx, regs, rp, r, req, show, reveal)
		if err != nil {
			return err
		}
		rp.lastTime = r.Time
		if !show {
			return nil
		}
		e.describeEntry(ctx, session, regs, rp, r, st, req, &h)
		last = r.Seq
		full = !emit(h)
		return nil
	})
	if errors.Is(err, errStaleAnchor) {
		e.forgetAnchors(ctx, session)
		return e.historyPage(ctx, session, until, req, after, emit, false)
	}
	if err != nil && !errors.Is(err, stop) {
		return rp.st, false, err
	}
	if from == 1 && rp.st.LastSeq == 0 {
		// Nothing before until: a point before a compaction says so.
		if err := e.compactedBefore(ctx, session, until); err != nil {
			return rp.st, false, err
		}
	}
	if more {
		e.pages.put(session, last, rp, e.clock())
	}
	return rp.st, more, nil
}

// foldEntry folds r into the replay rp and returns its history entry
// so far (the event, its actor revealed when shown, its verdict, a
// compaction's record) and the state after it; a turn's start is
// resolved as it was, a discovery loads into the replayed turn.
func (e *Engine) foldEntry(ctx context.Context, regs *registriesAt, rp *historyResume, r logport.Record, req ResolveRequest, show bool, reveal func(string) string) (HistoryEntry, aggregate.State, error) {
	h := HistoryEntry{EventRef: refOf(r)}
	if show {
		h.Actor = reveal(h.Actor) // A sealed actor reads back (or as erased)
	}
	if r.Err == nil {
		h.Payload = r.Envelope.Payload
	}
	// The state before the event matters only to a turn's start (its
	// resolution); a clone per event would cost most of a deep page.
	var before aggregate.State
	if _, ok := h.Payload.(events.TurnStarted); ok {
		before = rp.st.Clone()
	}
	applied := true
	ev, err := e.storedOf(ctx, r)
	if err != nil {
		return h, aggregate.State{}, err
	}
	if err := rp.st.ApplyStored(ev); err != nil {
		h.Error, h.Rejected = err.Error(), errors.Is(err, aggregate.ErrRejected)
		applied = false
	}
	st := rp.st
	if applied {
		switch p := h.Payload.(type) {
		case events.TurnStarted:
			t, err := e.startTurn(ctx, regs, p, r.Envelope.Channel, before, r.Time, req)
			if err != nil {
				h.Error = err.Error()
			}
			rp.turn, rp.provider = t, p.Provider
		case events.DeferredLoaded:
			if rp.turn != nil && rp.turn.turn != nil {
				load(rp.turn.turn, discoveries([]logport.Record{r}, st))
			}
		}
	}
	if c, ok := compactionOf(r); ok && applied {
		c.Actor = reveal(c.Actor)
		h.Compacted = c
	}
	if !st.InTurn {
		rp.turn = nil
	}
	return h, st, nil
}

// describeEntry fills h with what the tools were after its event (state
// st): the resolution, its hashes and dispatch, what was gained and lost
// since the point before, and why the prompt prefix changed; it moves the
// replay's point before to this one.
func (e *Engine) describeEntry(ctx context.Context, session string, regs *registriesAt, rp *historyResume, r logport.Record, st aggregate.State, req ResolveRequest, h *HistoryEntry) {
	p := e.pointOf(ctx, regs, st, rp.turn, r.Time, rp.request(req))
	if h.Error == "" {
		h.Error = p.Error
	}
	h.Intent, h.Loaded, h.Turn, h.InTurn = st.Intent, st.Loaded, st.Turn, st.InTurn
	h.Tools, h.Provider, h.Catalog = p.Tools, p.Provider, p.Catalog
	h.PrefixHash, h.ReferencesHash, h.RegistryVersion = p.PrefixHash, p.ReferencesHash, p.RegistryVersion
	if p.Dispatch != nil {
		d := wireDispatch(session, *p.Dispatch)
		h.Dispatch = &d
	}
	if !p.pruned && !rp.prevPruned {
		h.Gained, h.Lost = diff(rp.prevTools, h.Tools)
	}
	h.PrefixChanged = (p.PrefixHash != rp.prevPrefix || deferral.ReferencesBroke(rp.prevRefs, p.refs)) && !p.pruned
	if h.PrefixChanged {
		h.Cause = causeOf(r)
		if h.RegistryVersion != rp.prevVersion && rp.prevVersion != "" {
			h.Cause = "registry"
		}
	}
	rp.prevPruned = p.pruned
	if cp, ok := checkpointOf(h.Payload); ok && h.Error == "" && cp.RegistryVersion != "" && cp.RegistryVersion != h.RegistryVersion {
		h.Cause = "registry"
	}
	rp.prevTools, rp.prevPrefix, rp.prevRefs, rp.prevVersion = h.Tools, p.PrefixHash, p.refs, h.RegistryVersion
}

// point is what a history entry shows of the tools at one point of a
// replay.
type point struct {
	Tools, Provider, Catalog    []string
	PrefixHash, RegistryVersion string
	ReferencesHash              string
	refs                        map[string]string // deferral.Provider.ReferenceDefs
	Dispatch                    *checkpoint.Dispatch
	Error                       string
	pruned                      bool // RegistryVersion was pruned: no tools known
}

// prunedPoint is the point of a replay under a pruned registry version.
func prunedPoint(version string) point {
	return point{Tools: []string{}, Provider: []string{}, Catalog: []string{}, RegistryVersion: version, Error: prunedText(version), pruned: true}
}

// pointOf is the tool set of st at a point of a replay stored at t: the
// open turn's when there is one, else st's intent resolved against the
// registry in force at t (the live one for a zero t).
func (e *Engine) pointOf(ctx context.Context, regs *registriesAt, st aggregate.State, turn *replayedTurn, t time.Time, req ResolveRequest) point {
	var p point
	if turn != nil && turn.turn == nil {
		return prunedPoint(turn.pruned)
	}
	if turn != nil {
		split := turn.turn.Request()
		p.Tools, p.Provider, p.Catalog = names(turn.turn.Tools()), names(split.Provider), split.Catalog
		p.PrefixHash, p.ReferencesHash, p.refs = regs.cacheOf(turn.provider, turn.res, turn.reg, split, st.Referenced)
		p.RegistryVersion = turn.res.RegistryVersion
		d := dispatchOf(st.Turn, turn.res.ContractHash, split.Classification)
		p.Dispatch = &d
		return p
	}
	reg, pruned := regs.at(ctx, t)
	if reg == nil {
		return prunedPoint(pruned)
	}
	res, err := reg.Resolve(resolver.Request{Override: req.Override, Session: st.Intent, Profile: req.Profile, Channel: req.Channel})
	if err != nil {
		p.Error = err.Error()
		return p
	}
	split := deferral.SplitInLoadOrder(res, st.InLoadOrder())
	p.Tools, p.Provider, p.Catalog = names(res.Tools), names(split.Provider), split.Catalog
	p.PrefixHash, p.ReferencesHash, p.refs = regs.cacheOf(req.Provider, res, reg, split, st.Referenced)
	p.RegistryVersion = res.RegistryVersion
	return p
}

// cacheOf is the prefix hash, the references hash and the referenced
// definitions (deferral.Provider.ReferenceDefs) a request of res would
// have in provider mode provider ("": the default), the tools it renders
// as a view renders them (the referenced tools res lacks kept, stubs of
// withheld ones): outside a turn, and in a turn begun without a recorded
// provider, the default mode's.
func cacheOf(provider string, res *resolver.Resolution, reg *resolver.Registry, split deferral.Split, referenced []string) (string, string, map[string]string) {
	row, ok := deferral.LookupProvider(provider)
	if !ok {
		row, _ = deferral.LookupProvider("")
	}
	if !row.Native {
		return row.PrefixHash(split.Provider, res.Namespaces, split.Frozen), "", nil
	}
	tools := res.Tools
	if reg != nil {
		tools = deferral.WithReferenced(res.Tools, referenced, deferral.WithholdLookup(res.Withheld, reg.Tool))
	}
	return row.PrefixHash(tools, res.Namespaces, 0), row.ReferencesHash(tools, referenced), row.ReferenceDefs(tools, referenced)
}

// dispatchOf is the classification a dispatch of a split classified as
// classes records.
func dispatchOf(turn uint64, contractHash string, classes []deferral.Class) checkpoint.Dispatch {
	d := checkpoint.Dispatch{Turn: turn, ContractHash: contractHash}
	for _, c := range classes {
		switch {
		case c.Loaded:
			d.Loaded = append(d.Loaded, c.Name)
		case c.Deferred:
			d.Deferred = append(d.Deferred, c.Name)
		default:
			d.Resident = append(d.Resident, c.Name)
		}
	}
	return d
}

// storedOf is r as the fold takes it: with the registry in force when it
// was stored, as the projection folds it, so a replay gives the
// projection's verdicts.
func (e *Engine) storedOf(ctx context.Context, r logport.Record) (aggregate.Stored, error) {
	return e.proj.Stored(ctx, r)
}

func refOf(r logport.Record) wire.EventRef {
	return wire.EventRef{Seq: r.Seq, ID: r.Envelope.ID, Type: string(r.Envelope.Type), Channel: r.Envelope.Channel, Actor: r.Envelope.Actor, Time: r.Time}
}

func causeOf(r logport.Record) string {
	switch r.Envelope.Payload.(type) {
	case events.DeferredLoaded:
		return "discovery"
	case events.DeferredEvicted:
		return "evict"
	case events.CheckpointRecorded:
		return "checkpoint"
	case events.TurnEnded:
		if _, ok := checkpointOf(r.Envelope.Payload); ok {
			return "checkpoint" // The turn end's checkpoint sets the loaded set
		}
		return "turn"
	case events.TurnStarted:
		return "turn"
	case events.SessionCompacted:
		return "compaction"
	}
	return "intent"
}

// checkpointOf returns the checkpoint p records: a CheckpointRecorded, or
// the checkpoint a TurnEnded carries.
func checkpointOf(p events.Payload) (events.CheckpointRecorded, bool) {
	switch v := p.(type) {
	case events.CheckpointRecorded:
		return v, true
	case events.TurnEnded:
		if v.Checkpoint != nil {
			return *v.Checkpoint, true
		}
	}
	return events.CheckpointRecorded{}, false
}

func names(tools []resolver.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

// diff returns the names in b but not a, and in a but not b, each in the
// order of its own list.
func diff(a, b []string) (gained, lost []string) {
	for _, n := range b {
		if !slices.Contains(a, n) {
			gained = append(gained, n)
		}
	}
	for _, n := range a {
		if !slices.Contains(b, n) {
			lost = append(lost, n)
		}
	}
	return gained, lost
}
