package aggregate_test

import (
	"errors"
	"fmt"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// Fold a session's log into its current intent; an
// undecodable event is skipped, an event that breaks a fold rule (here a
// turn number out of order) is rejected, and both are listed.
func ExampleFold() {
	on := true
	stored := func(seq uint64, p events.Payload) aggregate.Stored {
		e := events.New("sess_01", "web", "alice", p)
		return aggregate.Stored{Seq: seq, MsgID: e.ID, Envelope: e} // MsgID: the Nats-Msg-Id header
	}
	log := []aggregate.Stored{
		stored(1, events.ToolsToggled{Enabled: &on}),
		stored(2, events.ToolDisabled{Name: "bash"}),
		{Seq: 3, Err: errors.New("undecodable")},
		stored(4, events.TurnStarted{Turn: 1}),
		stored(5, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 1}),
		stored(6, events.TurnStarted{Turn: 1<<64 - 1}),
	}
	s := aggregate.Fold("sess_01", log)
	fmt.Println(*s.Intent.Enabled, s.Intent.Disabled, s.Loaded, s.Turn, s.InTurn)
	fmt.Println("last", s.LastSeq, "applied", s.Events, "skipped", s.Skipped, "rejected", s.Rejected)
	r := s.Rejections[1]
	fmt.Println(r.Seq, r.Type, r.Kind+":", r.Reason)
	// Output:
	// true [bash] [send_message] 1 true
	// last 6 applied 4 skipped 1 rejected 1
	// 6 TurnStarted rejected: event rejected: TurnStarted turn 18446744073709551615, want the next turn 2: event breaks a fold rule
}

// Decide refuses a picked list that is a whole preset and says which
// intent to store instead.
func ExampleDecide() {
	reg := resolver.Default()
	var s aggregate.State
	_, err := aggregate.Decide(s, reg, events.ToolsPicked{Names: []string{"read_file", "edit_file", "bash", "tool_search"}}, aggregate.Limits{})
	fmt.Println(errors.Is(err, aggregate.ErrMaterialized))
	fmt.Println(err)

	out, err := aggregate.Decide(s, reg, events.PresetChosen{Preset: "minimal"}, aggregate.Limits{})
	fmt.Printf("%+v %v\n", out, err)
	// Output:
	// true
	// decide ToolsPicked: picked list equals the whole preset "minimal", an expanded tool list, which a session never stores (see docs/semantics.md#picked-lists); store the intent instead: PresetChosen{preset:"minimal"}: expanded tool list refused
	// [{Preset:minimal}] <nil>
}

// A snapshot of a state for the projection's KV value.
func ExampleMarshalState() {
	e := events.New("sess_01", "tui", "bob", events.PresetChosen{Preset: "research"})
	s := aggregate.Fold("sess_01", []aggregate.Stored{{Seq: 1, MsgID: e.ID, Envelope: e}})
	b, _ := aggregate.MarshalState(s)
	back, err := aggregate.UnmarshalState(b)
	fmt.Println(back.Intent.Preset, back.LastSeq, err)
	// Output:
	// research 1 <nil>
}
