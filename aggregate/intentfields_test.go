package aggregate

import (
	"testing"

	"github.com/toolintent/engine/intent"
)

// A snapshot keeps every field of the session's intent: a State
// whose intent has all fields set (intent.Full) survives MarshalState and
// UnmarshalState. A new intent field fails here until the snapshot's
// encoder and decoder carry it.
func TestSnapshotCarriesEveryIntentField(t *testing.T) {
	full := intent.Full()
	b, err := MarshalState(State{Session: "s1", Intent: full})
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Intent.Equal(full) {
		t.Fatalf("snapshot lost intent fields:\n got %+v\nwant %+v", got.Intent, full)
	}
}
