package aggregate

// The user's answers to "ask" decisions fold like every other
// intent and replay to the same grants.

import (
	"errors"
	"reflect"
	"testing"

	"github.com/toolintent/engine/events"
)

func TestGrantsFoldAndReplay(t *testing.T) {
	log := stored(
		events.TurnStarted{Turn: 1},
		events.PermissionGranted{Tool: "bash", Scope: events.ScopeOnce, By: "user:alice", Turn: 1},
		events.PermissionGranted{Tool: "grep", Scope: events.ScopeSession, By: "user:alice", Turn: 1},
		events.PermissionGranted{Tool: "read_file", Scope: events.ScopeSession, By: "user:bob", Turn: 9}, // a future turn: rejected
		events.TurnEnded{Turn: 1},
		events.PermissionGranted{Tool: "bash", Scope: events.ScopeOnce, By: "user:alice", Turn: 1}, // once outside the turn: rejected
	)
	st, g := FoldGrants(testSession, log[:4])
	if _, ok := g.Allowed("bash", 1); !ok {
		t.Error("bash not allowed once in turn 1")
	}
	if gr, ok := g.Allowed("grep", 1); !ok || gr.By != "user:alice" || gr.Seq != 3 {
		t.Errorf("grep grant = %+v, %v", gr, ok)
	}
	if _, ok := g.Allowed("read_file", 1); ok || st.Rejected != 1 {
		t.Errorf("future-turn grant applied (rejected %d)", st.Rejected)
	}
	next := env(events.TurnStarted{Turn: 2})
	all := append(append([]Stored{}, log...), Stored{Seq: 7, MsgID: next.ID, Envelope: next})
	st, g = FoldGrants(testSession, all)
	if st.Rejected != 2 {
		t.Errorf("rejected %d, want 2 (the future-turn and the out-of-turn once grants)", st.Rejected)
	}
	if _, ok := g.Allowed("bash", 2); ok {
		t.Error("a once grant of turn 1 still allows bash in turn 2")
	}
	if _, ok := g.Allowed("grep", 2); !ok {
		t.Error("a session grant was lost at the next turn")
	}
	_, g2 := FoldGrants(testSession, all)
	if !reflect.DeepEqual(g, g2) {
		t.Error("two folds of one log reach different grants")
	}
}

func TestDecideGranted(t *testing.T) {
	reg := smallRegistry(t)
	s, _ := FoldGrants(testSession, stored(events.TurnStarted{Turn: 1}))
	out, err := Decide(s, reg, events.PermissionGranted{Tool: "bash", Scope: events.ScopeOnce, By: "user:alice"}, Limits{})
	if err != nil || len(out) != 1 || out[0].(events.PermissionGranted).Turn != 1 {
		t.Fatalf("decide = %v, %v", out, err)
	}
	for _, bad := range []events.PermissionGranted{
		{Tool: "nope", Scope: events.ScopeSession, By: "a"},
		{Tool: "bash", Scope: "forever", By: "a"},
		{Tool: "bash", Scope: events.ScopeSession},
		{Tool: "bash", Scope: events.ScopeSession, By: "a", Turn: 3},
	} {
		if _, err := Decide(s, reg, bad, Limits{}); !errors.Is(err, ErrInvalidCommand) && !errors.Is(err, ErrUnknownTool) {
			t.Errorf("decide %+v: err = %v", bad, err)
		}
	}
	s.InTurn = false
	if _, err := Decide(s, reg, events.PermissionGranted{Tool: "bash", Scope: events.ScopeOnce, By: "a"}, Limits{}); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("once outside a turn: %v", err)
	}
}
