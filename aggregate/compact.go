package aggregate

// Compaction: a session's events are replaced by one
// SessionCompacted that carries the state they fold to. Folding the
// snapshot (and any tail after it) yields the state of folding the whole
// history, whether the fold saw the replaced events or not.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolintent/engine/events"
)

// ErrTurnOpen means a compaction was asked while a turn is open: the open
// turn is rebuilt from its TurnStarted event, which a compaction
// would remove, so the session is compacted after the turn ends.
var ErrTurnOpen = errors.New("a turn is open")

// ErrNothingToCompact means the session has no event to compact.
var ErrNothingToCompact = errors.New("nothing to compact")

// Compacted describes the events a compaction replaces: the stream
// sequences of the first and the last, how many messages, their first
// and last write times (unix ms) and an optional reason.
type Compacted struct {
	FirstSeq, LastSeq, Count uint64
	FirstMs, LastMs          int64
	Reason                   string
}

// Compaction returns the SessionCompacted that replaces the events s and
// g were folded from (FoldGrants), described by c; c.LastSeq must be
// s.LastSeq. It refuses a deleted session (ErrDeleted), an open turn
// (ErrTurnOpen) and a session without events (ErrNothingToCompact). The
// result passes events.CheckStored and folds to s (with LastSeq and
// Events advanced by the snapshot itself) and g.
func Compaction(s State, g Grants, c Compacted) (events.SessionCompacted, error) {
	switch {
	case s.Deleted():
		return events.SessionCompacted{}, fmt.Errorf("compact %q: deleted at sequence %d: %w", s.Session, s.DeletedSeq, ErrDeleted)
	case s.InTurn:
		return events.SessionCompacted{}, fmt.Errorf("compact %q: turn %d is open; compact after it ends: %w", s.Session, s.Turn, ErrTurnOpen)
	case s.LastSeq == 0 || c.Count == 0:
		return events.SessionCompacted{}, fmt.Errorf("compact %q: %w", s.Session, ErrNothingToCompact)
	case c.LastSeq != s.LastSeq:
		return events.SessionCompacted{}, fmt.Errorf("compact %q: replaces events up to %d, but the state is folded up to %d: %w", s.Session, c.LastSeq, s.LastSeq, ErrInvalidCommand)
	}
	v := events.SessionCompacted{
		FirstSeq: c.FirstSeq, LastSeq: c.LastSeq, Count: c.Count, FirstMs: c.FirstMs, LastMs: c.LastMs, Reason: c.Reason,
		Intent:     s.Intent.Clone(),
		Loaded:     slices.Clone(s.InLoadOrder()),
		Referenced: slices.Clone(s.Referenced),
		Turn:       s.Turn, TurnSeq: s.TurnSeq,
		Events: s.Events, Skipped: s.Skipped, Rejected: s.Rejected,
		GrantsTurn: g.Turn,
	}
	if s.Checkpoint != nil {
		cp := s.Checkpoint.Record.Clone()
		v.Checkpoint, v.CheckpointSeq = &cp, s.Checkpoint.Seq
	}
	for _, r := range s.Rejections {
		v.Rejections = append(v.Rejections, events.CompactedRejection{Seq: r.Seq, ID: r.ID, Type: r.Type, Kind: r.Kind, Reason: r.Reason})
	}
	for _, gr := range g.Session {
		v.Grants = append(v.Grants, events.CompactedGrant{Tool: gr.Tool, Scope: gr.Scope, By: gr.By, Channel: gr.Channel, Turn: gr.Turn, Seq: gr.Seq})
	}
	for _, gr := range g.Once {
		v.Grants = append(v.Grants, events.CompactedGrant{Tool: gr.Tool, Scope: gr.Scope, By: gr.By, Channel: gr.Channel, Turn: gr.Turn, Seq: gr.Seq})
	}
	return v, nil
}

// compactedRule is the fold rule of a SessionCompacted that depends on
// the session, "" when it holds. A fold that meets the snapshot has seen
// either every event it replaces (its LastSeq is the snapshot's last_seq)
// or, when they were purged, a prefix of them (a view persisted earlier, or
// nothing at all): the verdict must be the same for both, so the rules
// are that the snapshot covers what the fold has seen, and that no turn is
// open at the point it replaces (which only a fold that has seen that
// point can tell, and the engine purges only what such a fold applied).
func compactedRule(s *State, v events.SessionCompacted) string {
	switch {
	case s.LastSeq > v.LastSeq:
		return fmt.Sprintf("SessionCompacted replaces events up to sequence %d, but the session has an event at %d after them: a snapshot covers every event before it", v.LastSeq, s.LastSeq)
	case s.LastSeq == v.LastSeq && s.InTurn:
		return fmt.Sprintf("SessionCompacted inside turn %d: the open turn is rebuilt from its TurnStarted; compact after the turn ends", s.Turn)
	case v.Turn > s.Turn && v.Turn-s.Turn > v.LastSeq-s.LastSeq:
		// Each replaced event begins at most one turn: a larger turn is a
		// state no fold reaches (a forged one could use every turn number).
		return fmt.Sprintf("SessionCompacted claims turn %d, but the events it replaces after sequence %d (turn %d) can begin at most %d turns", v.Turn, s.LastSeq, s.Turn, v.LastSeq-s.LastSeq)
	}
	return ""
}

// compactedState is the state a SessionCompacted carries, for session;
// LastSeq and Events are advanced by the fold as for any applied event.
func compactedState(session string, v events.SessionCompacted) State {
	s := State{
		Session:    session,
		Intent:     v.Intent.Clone(),
		Loaded:     sortedSet(v.Loaded),
		Referenced: slices.Clone(v.Referenced),
		Turn:       v.Turn,
		TurnSeq:    v.TurnSeq,
		LastSeq:    v.LastSeq,
		Events:     v.Events,
		Skipped:    v.Skipped,
		Rejected:   v.Rejected,
	}
	if len(v.Loaded) > 0 {
		s.LoadOrder = slices.Clone(v.Loaded)
	}
	if len(v.Referenced) == 0 {
		s.Referenced = nil
	}
	if v.Checkpoint != nil {
		s.Checkpoint = &Checkpoint{Record: v.Checkpoint.Clone(), Seq: v.CheckpointSeq}
	}
	for _, r := range v.Rejections {
		s.Rejections = append(s.Rejections, Rejection{Seq: r.Seq, ID: r.ID, Type: r.Type, Kind: r.Kind, Reason: r.Reason})
	}
	return s
}

// compactedGrants are the grants a SessionCompacted carries.
func compactedGrants(v events.SessionCompacted) Grants {
	g := Grants{Turn: v.GrantsTurn}
	for _, c := range v.Grants {
		gr := Grant{Tool: c.Tool, Scope: c.Scope, By: c.By, Turn: c.Turn, Seq: c.Seq, Channel: c.Channel}
		if c.Scope == events.ScopeOnce {
			g.Once = append(g.Once, gr)
		} else {
			g.Session = append(g.Session, gr)
		}
	}
	cmp := func(a, b Grant) int { return strings.Compare(a.Tool, b.Tool) }
	slices.SortFunc(g.Session, cmp)
	slices.SortFunc(g.Once, cmp)
	return g
}
