package aggregate

// The user's answers to "ask" decisions: PermissionGranted events,
// folded into a Grants set that any engine rebuilds from the log.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// Grant is one applied PermissionGranted: By allowed Tool for the session,
// or once in Turn.
type Grant struct {
	Tool  string `json:"tool"`
	Scope string `json:"scope"`
	By    string `json:"by"`
	Turn  uint64 `json:"turn"`
	// Seq is the stream sequence of the event, for audit.
	Seq uint64 `json:"seq"`
	// Channel is the channel the answer was recorded on: a compaction
	// snapshot keeps it, so an answer from a channel whose policy denies
	// the tool is refused after a compaction as before it.
	Channel string `json:"-"`
}

// Grants is the fold of a session's applied PermissionGranted events:
// the session-scoped grants (the latest per tool) and the "once" grants of
// the last started turn. The zero value is empty and ready to use.
type Grants struct {
	// Session are the session-scoped grants, sorted by tool, one per tool
	// (the latest answer).
	Session []Grant `json:"session,omitempty"`
	// Once are the "once" grants of turn Turn, sorted by tool.
	Once []Grant `json:"once,omitempty"`
	// Turn is the last started turn seen by the fold.
	Turn uint64 `json:"turn"`
}

// Observe folds one event that State.ApplyStored (or Apply) has just
// applied at seq: a PermissionGranted adds its grant, a TurnStarted drops
// the previous turn's "once" grants. Events the fold refused must not be
// observed.
func (g *Grants) Observe(seq uint64, e events.Envelope) {
	p, _ := events.PayloadValue(e.Payload)
	switch v := p.(type) {
	case events.TurnStarted:
		g.Turn, g.Once = v.Turn, nil
	case events.SessionCompacted:
		*g = compactedGrants(v)
	case events.PermissionGranted:
		gr := Grant{Tool: v.Tool, Scope: v.Scope, By: v.By, Turn: v.Turn, Seq: seq, Channel: e.Channel}
		if v.Scope == events.ScopeOnce {
			if v.Turn == g.Turn {
				g.Once = putGrant(g.Once, gr)
			}
			return
		}
		g.Session = putGrant(g.Session, gr)
	}
}

func putGrant(list []Grant, gr Grant) []Grant {
	i, found := slices.BinarySearchFunc(list, gr.Tool, func(a Grant, t string) int { return strings.Compare(a.Tool, t) })
	if found {
		list = slices.Clone(list)
		list[i] = gr
		return list
	}
	return slices.Insert(slices.Clone(list), i, gr)
}

// Allowed returns the grant that allows tool in turn, if any: a session
// grant first, else a "once" grant of that very turn.
func (g *Grants) Allowed(tool string, turn uint64) (Grant, bool) {
	cmp := func(a Grant, t string) int { return strings.Compare(a.Tool, t) }
	if i, ok := slices.BinarySearchFunc(g.Session, tool, cmp); ok {
		return g.Session[i], true
	}
	if turn == g.Turn {
		if i, ok := slices.BinarySearchFunc(g.Once, tool, cmp); ok {
			return g.Once[i], true
		}
	}
	return Grant{}, false
}

// FoldGrants folds evs into a fresh State for session and the Grants of
// the events it applies: the same verdicts as Fold, so two engines (or a
// replay) reach the same grants from the same log.
func FoldGrants(session string, evs []Stored) (State, Grants) {
	s := State{Session: session}
	var g Grants
	for _, ev := range evs {
		before := s.LastSeq
		if s.ApplyStored(ev) == nil && ev.Seq > before {
			g.Observe(ev.Seq, ev.Envelope)
		}
	}
	return s, g
}

// grantRule is the fold rule of a PermissionGranted, "" when it holds.
func grantRule(s *State, v events.PermissionGranted) string {
	switch {
	case v.Turn > s.Turn:
		return fmt.Sprintf("PermissionGranted in turn %d, but the last started turn is %d", v.Turn, s.Turn)
	case v.Scope == events.ScopeOnce && (!s.InTurn || v.Turn != s.Turn):
		return fmt.Sprintf("PermissionGranted once in turn %d, want the open turn (turn %d, open %v)", v.Turn, s.Turn, s.InTurn)
	}
	return ""
}

func decideGranted(s State, reg *resolver.Registry, c events.PermissionGranted) ([]events.Payload, error) {
	if _, ok := reg.Tool(c.Tool); !ok {
		return nil, fmt.Errorf("decide PermissionGranted: tool %q is not in registry %s; answer for a tool the call-check asked about: %w", c.Tool, reg.Version(), ErrUnknownTool)
	}
	if c.Turn == 0 {
		c.Turn = s.Turn
	}
	if c.Turn != s.Turn {
		return nil, fmt.Errorf("decide PermissionGranted: turn %d, want the current turn %d (0 means it): %w", c.Turn, s.Turn, ErrInvalidCommand)
	}
	if c.Scope != events.ScopeSession && c.Scope != events.ScopeOnce {
		return nil, fmt.Errorf("decide PermissionGranted: scope %q, want %q or %q: %w", c.Scope, events.ScopeSession, events.ScopeOnce, ErrInvalidCommand)
	}
	if c.By == "" || len(c.By) > events.MaxTextLen {
		return nil, fmt.Errorf("decide PermissionGranted: by %q, want who answered, 1 to %d bytes: %w", c.By, events.MaxTextLen, ErrInvalidCommand)
	}
	if why := grantRule(&s, c); why != "" {
		return nil, fmt.Errorf("decide PermissionGranted: %s; answer a once-ask inside the turn that asked: %w", why, ErrInvalidCommand)
	}
	return one(c), nil
}
