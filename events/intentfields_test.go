package events

import (
	"testing"

	"github.com/toolintent/engine/intent"
)

// A TurnStarted records every field of its intents: a round trip of
// an intent with all fields set (intent.Full) gives it back. A new intent
// field fails here until the intent codec (intent.Intent.Field) carries it.
func TestTurnStartedCarriesEveryIntentField(t *testing.T) {
	full := intent.Full()
	over := full.Clone()
	ts := TurnStarted{Turn: 1, Intent: &full, Override: &TurnOverride{Kind: OverrideIntent, Intent: &over}}
	b, err := Encode(New("s1", "web", "test", ts))
	if err != nil {
		t.Fatal(err)
	}
	env, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	got := env.Payload.(TurnStarted)
	if got.Intent == nil || !got.Intent.Equal(full) || got.Override == nil || got.Override.Intent == nil || !got.Override.Intent.Equal(over) {
		t.Fatalf("round trip lost intent fields:\n got %+v / %+v\nwant %+v", got.Intent, got.Override, full)
	}
}
