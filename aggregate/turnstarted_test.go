package aggregate

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// Decide keeps TurnStarted's recorded request (after a
// TurnEnded for a turn left open), refuses an override list that is an
// expanded tool list, and never emits a TurnStarted the fold rejects.
func TestDecideTurnStartedRecordsRequest(t *testing.T) {
	reg := resolver.Default()
	ts := events.TurnStarted{Intent: &intent.Intent{Preset: "coding"}, Profile: "coder",
		Override:        &events.TurnOverride{Kind: events.OverrideNames, Names: []string{"read_file"}},
		RegistryVersion: reg.Version(), ContractHash: fmt.Sprintf("%064x", 7)}
	out := decideOK(t, State{Turn: 2, InTurn: true}, reg, ts)
	want := ts
	want.Turn = 3
	if len(out) != 2 || !reflect.DeepEqual(out[1], want) {
		t.Fatalf("decided %#v, want TurnEnded then %#v", out, want)
	}
	var many []string
	for i := range events.MaxPicked + 1 {
		many = append(many, fmt.Sprintf("t%02d", i))
	}
	decideErr(t, State{}, reg, events.TurnStarted{Override: &events.TurnOverride{Kind: events.OverrideNames, Names: many}}, Limits{}, ErrMaterialized, "expanded tool list")
	decideErr(t, State{}, reg, events.TurnStarted{Intent: &intent.Intent{Picked: many}}, Limits{}, ErrInvalidCommand, "intent.picked")
	decideErr(t, State{}, reg, events.TurnStarted{RegistryVersion: "v1"}, Limits{}, ErrInvalidCommand, "record both")
}
