package service

// Explain: why a tool is or is not in a session's set, and the event
// that last changed that.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// ExplainResult says why a tool is or is not in a session's set.
type ExplainResult struct {
	resolver.Explanation
	// Event is the event that last changed the explanation's outcome or
	// rule: after it the tool was in or out for this rule, and no later
	// event changed that. Nil when no event did: the explanation is
	// the one of a session without events (the profile, the registry or a
	// per-turn override decides). A SessionCompacted here means the
	// event that set it was compacted: the history's compaction entry
	// says which events the snapshot replaced.
	Event *wire.EventRef `json:"event,omitempty"`
	// RegistryVersion is the registry the explanation used.
	RegistryVersion string `json:"registry_version"`
	// Evicted is the DeferredEvicted that unloaded the tool at a turn
	// boundary (prefix-change cause "evict") when no load
	// since has loaded it again; nil otherwise. tool_search loads it again.
	Evicted *wire.EventRef `json:"evicted,omitempty"`
	// Seq is the session sequence explained.
	Seq uint64 `json:"seq"`
}

// Explain says why tool is or is not in the session's resolved set at
// until (zero: now), naming the rule (preset, profile, registry rule,
// override) and the event that last changed the outcome or the rule. It
// replays the session's events, explaining the tool after each event that
// changes the intent (see aggregate.Blame), with req's profile and
// override, against the registry in force at that point: the open turn's
// recorded version when until falls inside a turn, else the version in
// force when the last event explained was stored, else (until zero and
// outside a turn) the live registry. RegistryVersion says which. A
// session deleted at until answers ErrDeleted.
func (e *Engine) Explain(ctx context.Context, session, tool string, until Until, req ResolveRequest) (ExplainResult, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return ExplainResult{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	var recs []jetstream.Record
	var evs []aggregate.Stored
	st := aggregate.State{Session: session}
	version := ""
	stop := errors.New("stop")
	err := e.scanSession(ctx, session, until.Seq, func(r jetstream.Record) error {
		if until.stops(r) {
			return stop
		}
		ev, err := e.storedOf(ctx, r)
		if err != nil {
			return err
		}
		recs = append(recs, r)
		evs = append(evs, ev)
		if st.ApplyStored(ev) == nil {
			if p, ok := r.Envelope.Payload.(events.TurnStarted); ok {
				version = p.RegistryVersion
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return ExplainResult{}, err
	}
	if len(recs) == 0 {
		// A point before a compaction says so.
		if err := e.compactedBefore(ctx, session, until); err != nil {
			return ExplainResult{}, err
		}
	}
	if err := alive(session, st); err != nil {
		// A deleted session has no tools to explain; a point before
		// the delete (until) still explains.
		return ExplainResult{}, err
	}
	regs := e.registriesAt(ctx)
	reg, pruned := regs.live, ""
	switch {
	case st.InTurn && version != "":
		if r := regs.version(ctx, version); r != nil {
			reg = r
		} else if regs.pruned[version] {
			reg, pruned = nil, version
		}
	case !until.Time.IsZero():
		reg, pruned = regs.at(ctx, until.Time)
	case until.Seq != 0 && len(recs) > 0:
		reg, pruned = regs.at(ctx, recs[len(recs)-1].Time)
	}
	if reg == nil {
		// The registry in force at this point was pruned: say so,
		// rather than explain against another version.
		return ExplainResult{Explanation: resolver.Explanation{Tool: tool, Rule: RulePruned,
			Detail: prunedText(pruned) + "; whether " + tool + " was in or out is not recomputed"},
			RegistryVersion: pruned, Seq: st.LastSeq}, nil
	}
	blame := aggregate.NewChannelBlame(reg, session, tool, req.Override, req.Profile, req.Channel)
	var last, evicted *wire.EventRef
	for i, r := range recs {
		if blame.Apply(evs[i]) {
			ref := refOf(r)
			last = &ref
		}
		switch p := r.Envelope.Payload.(type) {
		case events.DeferredEvicted:
			if slices.Contains(p.Names, tool) && r.Err == nil {
				ref := refOf(r)
				evicted = &ref
			}
		case events.DeferredLoaded:
			if slices.Contains(p.Names, tool) {
				evicted = nil
			}
		}
	}
	bst := blame.State()
	for _, ref := range []*wire.EventRef{last, evicted} {
		if ref != nil {
			ref.Actor = e.RevealActor(ctx, ref.Actor)
		}
	}
	return ExplainResult{Explanation: blame.Explanation(), Event: last, RegistryVersion: reg.Version(), Evicted: evicted, Seq: bst.LastSeq}, nil
}
