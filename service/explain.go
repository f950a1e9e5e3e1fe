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
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/wire"
)

// Explain says why tool is or is not in the session's resolved set at
// until (zero: now), naming the rule (preset, profile, registry rule,
// override) and the event that last changed the outcome or the rule. It
// replays the session's events, explaining the tool after each event that
// changes the intent (see aggregate.Blame), with req's profile and
// override, against the registry in force at that point: the open turn's
// recorded version when until falls inside a turn, else the version in
// force when the last event explained was stored, else (until zero and
// outside a turn) the live registry. RegistryVersion says which. The
// Event is the one that last changed the outcome or rule (nil when none
// did: the profile, the registry or a per-turn override decides; a
// SessionCompacted when the event that set it was compacted). Evicted is
// the DeferredEvicted that unloaded the tool at a turn boundary when no
// load since has loaded it again. A session deleted at until answers
// ErrDeleted.
func (e *Engine) Explain(ctx context.Context, session, tool string, until Until, req ResolveRequest) (wire.Explanation, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return wire.Explanation{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	var recs []logport.Record
	var evs []aggregate.Stored
	st := aggregate.State{Session: session}
	version := ""
	stop := errors.New("stop")
	err := e.scanSession(ctx, session, until.Seq, func(r logport.Record) error {
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
		return wire.Explanation{}, err
	}
	if len(recs) == 0 {
		// A point before a compaction says so.
		if err := e.compactedBefore(ctx, session, until); err != nil {
			return wire.Explanation{}, err
		}
	}
	if err := alive(session, st); err != nil {
		// A deleted session has no tools to explain; a point before
		// the delete (until) still explains.
		return wire.Explanation{}, err
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
		return wire.Explanation{Tool: tool, Rule: RulePruned,
			Detail:          prunedText(pruned) + "; whether " + tool + " was in or out is not recomputed",
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
	x := blame.Explanation()
	return wire.Explanation{Tool: x.Tool, Included: x.Included, Rule: x.Rule, Detail: x.Detail,
		Event: last, RegistryVersion: reg.Version(), Evicted: evicted, Seq: bst.LastSeq}, nil
}
