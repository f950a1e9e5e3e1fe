package aggregate_test

import (
	"errors"
	"fmt"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// R24, R26: fold a session's log into its current intent; an undecodable
// event is skipped and counted.
func ExampleFold() {
	on := true
	mk := func(p events.Payload) events.Envelope { return events.New("sess_01", "web", "alice", p) }
	log := []aggregate.Stored{
		{Seq: 1, Envelope: mk(events.ToolsToggled{Enabled: &on})},
		{Seq: 2, Envelope: mk(events.ToolDisabled{Name: "bash"})},
		{Seq: 3, Err: errors.New("undecodable")},
		{Seq: 4, Envelope: mk(events.TurnStarted{Turn: 1})},
		{Seq: 5, Envelope: mk(events.DeferredLoaded{Names: []string{"send_message"}, Turn: 1})},
	}
	s := aggregate.Fold("sess_01", log)
	fmt.Println(*s.Intent.Enabled, s.Intent.Disabled, s.Loaded, s.Turn, s.InTurn)
	fmt.Println("last", s.LastSeq, "applied", s.Events, "skipped", s.Skipped)
	// Output:
	// true [bash] [send_message] 1 true
	// last 5 applied 4 skipped 1
}

// R2: Decide refuses a picked list that is a whole preset and says which
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
	// decide ToolsPicked: picked list equals the whole preset "minimal", an expanded tool list, which a session never stores (R2); store the intent instead: PresetChosen{preset:"minimal"}: expanded tool list refused
	// [{Preset:minimal}] <nil>
}

// R24: a snapshot of a state for the projection's KV value.
func ExampleMarshalState() {
	s := aggregate.Fold("sess_01", []aggregate.Stored{{Seq: 1, Envelope: events.New("sess_01", "tui", "bob", events.PresetChosen{Preset: "research"})}})
	b, _ := aggregate.MarshalState(s)
	back, err := aggregate.UnmarshalState(b)
	fmt.Println(back.Intent.Preset, back.LastSeq, err)
	// Output:
	// research 1 <nil>
}
