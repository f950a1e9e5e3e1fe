package service

// Registry change impact: before a candidate registry is
// pushed, which live sessions would see another tools prefix and which
// checkpoints would lose tools on resume.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// MaxRegistryBytes bounds a registry file the engine stores in its
// registry history, and so a candidate registry-diff compares.
const MaxRegistryBytes = jetstream.MaxRegistryBytes

// Impact compares cand with the live registry: the registry
// diff, then every session of the projection, resolved from its stored
// intent (no profile or override: the session's own tools), for every
// channel either channel policy names and for any other channel, with
// its loaded set in load order, under both registries. A session's prefix
// changes when the rendered provider array differs; a checkpoint loses the
// loaded tools checkpoint.ResumeWith restores under the live registry but
// not under cand. The sessions whose prompt cache breaks
// (PrefixChanged) are sorted, in the provider mode their last turn was
// begun for (the default without one), by that provider's rule
// (deferral.Provider.CachedPrefix and References): what a view's
// prefix_hash and references_hash and the history's prefix changes say
// of the same change. CheckpointLosses are sorted by session. It writes
// nothing.
//
// It first waits (impactCatchUp at most) for the views to fold the log up
// to its last event: a summary from views that lag would leave out the
// sessions and checkpoints stored since, and a push checked against it
// could pass a threshold it is over. Views still behind after the wait
// are an error wrapping projection.ErrNotCaughtUp, not a short summary.
func (e *Engine) Impact(ctx context.Context, cand *resolver.Registry) (wire.RegistryImpact, error) {
	if cand == nil {
		return wire.RegistryImpact{}, fmt.Errorf("%w: no candidate registry: load the file with resolver.LoadFile first", ErrInvalid)
	}
	if err := e.viewsCaughtUp(ctx, impactCatchUp); err != nil {
		return wire.RegistryImpact{}, fmt.Errorf("impact: %w; no summary from views behind the log, ask again", err)
	}
	cur := e.Registry()
	out := wire.RegistryImpact{Diff: resolver.Diff(cur, cand)}
	sessions, err := e.Sessions(ctx)
	if err != nil {
		return out, err
	}
	slices.Sort(sessions)
	channels := impactChannels(cur, cand)
	for _, s := range sessions {
		st, err := e.Session(ctx, s, 0)
		if errors.Is(err, ErrDeleted) {
			continue // deleted since the list was read: it has no tools to change
		}
		if err != nil {
			return out, fmt.Errorf("impact: read session %q: %w", s, err)
		}
		out.Sessions++
		changed, refsOnly, lost := sessionImpact(st, cur, cand, channels, e.turnProvider(ctx, st))
		if changed {
			out.PrefixChanged = append(out.PrefixChanged, s)
		}
		if refsOnly {
			out.ReferencesChanged = append(out.ReferencesChanged, s)
		}
		if st.Checkpoint != nil && len(st.Checkpoint.Loaded) > 0 {
			out.Checkpoints++
			if len(lost) > 0 {
				out.CheckpointLosses = append(out.CheckpointLosses, wire.CheckpointLoss{Session: s, Lost: lost})
			}
		}
	}
	return out, nil
}

// impactCatchUp bounds Impact's wait for the views to reach the log's
// last event: below the clients' 30 s request timeout, so that a caller
// gets the reason rather than a timeout.
const impactCatchUp = 10 * time.Second

// impactChannels is "" (any other channel) followed by every channel
// either registry's channel policy names, sorted: the requests whose
// resolution a policy change can change. The same for every session.
func impactChannels(cur, cand *resolver.Registry) []string {
	channels := append(cur.PolicyChannels(), cand.PolicyChannels()...)
	slices.Sort(channels)
	return append([]string{""}, slices.Compact(channels)...)
}

// turnProvider is the provider mode st's last turn was begun for, as its
// TurnStarted records it ("" for none: the default), read with one get.
func (e *Engine) turnProvider(ctx context.Context, st aggregate.State) string {
	if st.TurnSeq == 0 {
		return ""
	}
	recs, err := e.log.ReadSession(ctx, st.Session, st.TurnSeq, st.TurnSeq)
	if err != nil || len(recs) != 1 || recs[0].Err != nil {
		return ""
	}
	ts, _ := recs[0].Envelope.Payload.(events.TurnStarted)
	return ts.Provider
}

// sessionImpact reports whether st's prompt cache in provider mode
// provider breaks between the two registries for any of channels
// (impactChannels), whether only its referenced definitions change, and
// the checkpoint's tools restored under cur but not cand for any of them.
func sessionImpact(st aggregate.State, cur, cand *resolver.Registry, channels []string, provider string) (bool, bool, []string) {
	changed, prefix := false, false
	var lost []string
	for _, ch := range channels {
		c, p, l := channelImpact(st, cur, cand, ch, provider)
		changed, prefix = changed || c, prefix || p
		for _, n := range l {
			if !slices.Contains(lost, n) {
				lost = append(lost, n)
			}
		}
	}
	slices.Sort(lost)
	return changed, changed && !prefix, lost
}

// channelImpact is sessionImpact for requests of one channel: whether the
// cache breaks, whether the tools prefix itself changes, and the lost
// checkpoint tools.
func channelImpact(st aggregate.State, cur, cand *resolver.Registry, channel, provider string) (bool, bool, []string) {
	req := resolver.Request{Session: st.Intent, Channel: channel}
	a, errA := cur.Resolve(req)
	b, errB := cand.Resolve(req)
	if errA != nil || errB != nil {
		c := (errA == nil) != (errB == nil)
		return c, c, nil
	}
	order := st.InLoadOrder()
	pa, _, ra := cacheOf(provider, a, cur, deferral.SplitInLoadOrder(a, order), st.Referenced)
	pb, _, rb := cacheOf(provider, b, cand, deferral.SplitInLoadOrder(b, order), st.Referenced)
	changed, prefix := pa != pb || deferral.ReferencesBroke(ra, rb), pa != pb
	if st.Checkpoint == nil || len(st.Checkpoint.Loaded) == 0 {
		return changed, prefix, nil
	}
	rec := &st.Checkpoint.Record
	kept := checkpoint.ResumeWith(rec, a, nil).Restored
	after := checkpoint.ResumeWith(rec, b, nil).Restored
	var lost []string
	for _, n := range kept {
		if !slices.Contains(after, n) {
			lost = append(lost, n)
		}
	}
	return changed, prefix, lost
}
