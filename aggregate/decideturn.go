package aggregate

import (
	"fmt"
	"math"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// decideTurnStarted numbers the next turn (a given number must be it),
// bounds an override's names, and ends an open turn first.
func decideTurnStarted(s State, c events.TurnStarted, lim Limits) ([]events.Payload, error) {
	if s.Turn == math.MaxUint64 {
		return nil, fmt.Errorf("decide TurnStarted: the session has used every turn number (the last started turn is %d): %w", s.Turn, ErrInvalidCommand)
	}
	want := s.Turn + 1
	if c.Turn != 0 && c.Turn != want {
		return nil, fmt.Errorf("decide TurnStarted: turn %d, want %d (the last started turn is %d): %w", c.Turn, want, s.Turn, ErrInvalidCommand)
	}
	if o := c.Override; o != nil && len(o.Names) > lim.MaxPicked {
		return nil, fmt.Errorf("decide TurnStarted: override names %d tools, at most %d: a long list is an expanded tool list (docs/semantics.md#picked-lists); use an override intent (a preset, disabled names) instead: %w", len(o.Names), lim.MaxPicked, ErrMaterialized)
	}
	c.Turn = want // the recorded request goes with it
	if err := events.CheckStored(events.Envelope{ID: "decide", Payload: c}, "decide"); err != nil {
		return nil, fmt.Errorf("decide TurnStarted: %w: %w", err, ErrInvalidCommand)
	}
	if s.InTurn {
		return []events.Payload{events.TurnEnded{Turn: s.Turn}, c}, nil
	}
	return one(c), nil
}

// decideTurnEnded ends the current turn; a checkpoint with it is decided
// as a CheckpointRecorded right after the turn end, and stands alone when
// the turn has ended already.
func decideTurnEnded(s State, reg *resolver.Registry, c events.TurnEnded) ([]events.Payload, error) {
	if s.Turn == 0 {
		return nil, fmt.Errorf("decide TurnEnded: no turn has started, send TurnStarted{turn:1} first: %w", ErrInvalidCommand)
	}
	if c.Turn != 0 && c.Turn != s.Turn {
		return nil, fmt.Errorf("decide TurnEnded: turn %d, want the current turn %d: %w", c.Turn, s.Turn, ErrInvalidCommand)
	}
	if c.Checkpoint == nil {
		if !s.InTurn {
			return nil, nil
		}
		return one(events.TurnEnded{Turn: s.Turn}), nil
	}
	// The checkpoint is decided as a CheckpointRecorded right
	// after the turn end (the turn end changes no rule it follows).
	cp, err := decideCheckpoint(s, reg, *c.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("decide TurnEnded checkpoint: %w", err)
	}
	if !s.InTurn {
		return cp, nil // the turn has ended: the checkpoint alone
	}
	rec := cp[0].(events.CheckpointRecorded)
	return one(events.TurnEnded{Turn: s.Turn, Checkpoint: &rec}), nil
}
