package checkpoint

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/toolname"
)

// longest returns a valid name of exactly n bytes ending in suffix.
func longest(n int, suffix string) string {
	return "t" + strings.Repeat("x", n-1-len(suffix)) + suffix
}

// A TurnEnded carrying a checkpoint, and a CheckpointRecorded, with
// every text field at the length the codec accepts and n loaded tools of
// the longest names, encodes to at most SizeBound(n) bytes, for every n up
// to the loaded set's bound, which keeps it under events.MaxEventBytes.
func TestSizeBoundHolds(t *testing.T) {
	if SizeBound(events.MaxListLen) > events.MaxEventBytes {
		t.Fatalf("SizeBound(%d) = %d, over the event bound %d", events.MaxListLen, SizeBound(events.MaxListLen), events.MaxEventBytes)
	}
	hash := strings.Repeat("ab", 32)
	for _, n := range []int{0, 1, 10, 100, events.MaxListLen} {
		rec := Record{Loaded: []string{}, Contract: []events.ContractEntry{}, ContractHash: hash,
			RegistryVersion: strings.Repeat("v", events.MaxTextLen), Turn: 1<<64 - 1}
		for i := range n {
			name := longest(toolname.MaxLen, fmt.Sprintf("%04d", i))
			rec.Loaded = append(rec.Loaded, name)
			rec.Contract = append(rec.Contract, events.ContractEntry{Name: name, Hash: hash})
		}
		for _, p := range []events.Payload{events.TurnEnded{Turn: 1<<64 - 1, Checkpoint: &rec}, rec} {
			env := events.New(longest(events.MaxSessionLen, "s"), strings.Repeat("c", events.MaxTextLen), strings.Repeat("a", events.MaxTextLen), p)
			b, err := events.Encode(env)
			if err != nil {
				t.Fatalf("%d loaded: encode %T: %v", n, p, err)
			}
			if len(b) > SizeBound(n) {
				t.Errorf("%d loaded: %T encodes to %d bytes, over SizeBound %d", n, p, len(b), SizeBound(n))
			}
			t.Logf("%d loaded: %T %d bytes, bound %d", n, p, len(b), SizeBound(n))
		}
	}
}
