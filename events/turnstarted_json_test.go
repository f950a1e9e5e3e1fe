package events

import (
	"encoding/json"
	"testing"

	"github.com/toolintent/engine/intent"
)

// A TurnStarted's JSON (the command form of the API) writes each
// recorded intent's picked list even when nil, so nil (unset) and empty
// (pick none) stay apart, exactly as when TurnIntent was its own type.
func TestTurnStartedJSONKeepsPicked(t *testing.T) {
	on := true
	for _, c := range []struct {
		v    TurnStarted
		want string
	}{
		{TurnStarted{Turn: 1}, `{"turn":1}`},
		{TurnStarted{Turn: 2, Intent: &intent.Intent{}}, `{"turn":2,"intent":{"picked":null}}`},
		{TurnStarted{Turn: 3, Intent: &intent.Intent{Enabled: &on, Picked: []string{}}, Profile: "coder"},
			`{"turn":3,"intent":{"enabled":true,"picked":[]},"profile":"coder"}`},
		{TurnStarted{Turn: 4, Override: &TurnOverride{Kind: OverrideIntent, Intent: &intent.Intent{Preset: "p", Picked: []string{"a"}}, Allowed: []string{"b"}},
			RegistryVersion: "v1", ContractHash: "h"},
			`{"turn":4,"override":{"kind":"intent","intent":{"preset":"p","picked":["a"]},"allowed":["b"]},"registry_version":"v1","contract_hash":"h"}`},
		{TurnStarted{Turn: 5, Override: &TurnOverride{Kind: OverrideNames, Names: []string{"a"}}}, `{"turn":5,"override":{"kind":"names","names":["a"]}}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("json of %+v = %s, %v; want %s", c.v, b, err, c.want)
		}
	}
}

// RecordOverride and Override convert both ways; a names override
// without names is recorded as empty, its meaning.
func TestRecordOverrideRoundTrip(t *testing.T) {
	for _, o := range []intent.Override{
		{},
		{Kind: intent.OverrideEmpty},
		{Kind: intent.OverrideIntent, Intent: intent.Intent{Preset: "p"}, Allowed: []string{"grep"}},
		{Kind: intent.OverrideNames, Names: []string{"a", "b"}},
	} {
		if got := RecordOverride(o).Override(); !got.Equal(o) {
			t.Errorf("round trip of %+v = %+v", o, got)
		}
	}
	if r := RecordOverride(intent.Override{Kind: intent.OverrideNames}); r == nil || r.Kind != OverrideEmpty {
		t.Errorf("names override without names recorded as %+v, want kind empty", r)
	}
}
