package checkpoint

import (
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// A checkpoint records loaded_deferred_tools (sorted,
// de-duplicated), the contract hash of the resolution they belong to, its
// registry version and the per-tool hash of each loaded tool, in loaded
// order: nothing of the tools the turn did not load.
func TestNewRecordsLoadedWithContract(t *testing.T) {
	res := resolveAll(t, base(t))
	rec := mustNew(t, 4, res, "web_fetch", "send_message", "web_fetch")

	if want := []string{"send_message", "web_fetch"}; !slices.Equal(rec.Loaded, want) {
		t.Errorf("Loaded = %v, want %v", rec.Loaded, want)
	}
	if rec.ContractHash != res.ContractHash || rec.RegistryVersion != "test-1" || rec.Turn != 4 {
		t.Errorf("record = %+v; want hash %s, version test-1, turn 4", rec, res.ContractHash)
	}
	if len(rec.Contract) != len(rec.Loaded) {
		t.Fatalf("Contract has %d entries, want one per loaded tool (%d)", len(rec.Contract), len(rec.Loaded))
	}
	for i, e := range rec.Contract {
		tool, _ := find(res.Tools, rec.Loaded[i])
		if e.Name != rec.Loaded[i] || e.Hash != resolver.ToolHash(tool) {
			t.Errorf("Contract[%d] = %+v, want %s with its ToolHash", i, e, rec.Loaded[i])
		}
	}
	if FullContract(&rec) {
		t.Error("FullContract reports the loaded-only record as a whole contract")
	}
}

// An empty loaded set is recorded as the field present and empty, not
// as the older format's missing field.
func TestNewEmptyLoadedIsPresent(t *testing.T) {
	rec := mustNew(t, 1, resolveAll(t, base(t)))
	if rec.Loaded == nil || len(rec.Loaded) != 0 {
		t.Errorf("Loaded = %#v, want a non-nil empty slice", rec.Loaded)
	}
}

// Every recorded name must belong to the contract: a name that is not
// a tool of the resolution (unknown, or a registry tool this turn does not
// have) is refused, and the error names it and the contract hash.
func TestNewRefusesNamesOutsideContract(t *testing.T) {
	reg := load(t, base(t))
	res := resolveNames(t, reg, "read_file", "tool_search", "send_message")
	_, err := New(2, res, []string{"send_message", "web_fetch", "no_such_tool"})
	if !errors.Is(err, ErrNotInContract) {
		t.Fatalf("New error = %v, want ErrNotInContract", err)
	}
	for _, want := range []string{`"web_fetch" is not in it`, `"no_such_tool" is not in it`, res.ContractHash} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `"send_message"`) {
		t.Errorf("error %q names send_message, which is a deferred tool of the contract", err)
	}
}

// Resident tools need no loading, so naming one as
// loaded is refused; tool_search is resident even if a stray deferral mark
// says otherwise.
func TestNewRefusesResidentNames(t *testing.T) {
	res := resolveAll(t, base(t))
	_, err := New(2, res, []string{"read_file", "tool_search"})
	if !errors.Is(err, ErrNotInContract) {
		t.Fatalf("New error = %v, want ErrNotInContract", err)
	}
	for _, want := range []string{`"read_file" is resident`, `"tool_search" is resident`, res.ContractHash} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	stray := *res
	stray.Tools = slices.Clone(res.Tools)
	for i := range stray.Tools {
		if stray.Tools[i].Name == resolver.ToolSearch {
			stray.Tools[i].Deferred = true
		}
	}
	if _, err := New(2, &stray, []string{resolver.ToolSearch}); !errors.Is(err, ErrNotInContract) {
		t.Errorf("New(tool_search marked deferred) error = %v, want ErrNotInContract (tool_search is never deferred)", err)
	}
}

// Without a resolution there is no contract to record against.
func TestNewNilResolution(t *testing.T) {
	if _, err := New(1, nil, nil); !errors.Is(err, ErrNoContract) {
		t.Errorf("New(nil) error = %v, want ErrNoContract", err)
	}
}

// New copies its input; a later change to the caller's slice does not
// change the record, and New does not reorder the caller's slice.
func TestNewDoesNotAlias(t *testing.T) {
	res := resolveAll(t, base(t))
	in := []string{"web_fetch", "memory_read"}
	rec := mustNew(t, 1, res, in...)
	if !slices.Equal(in, []string{"web_fetch", "memory_read"}) {
		t.Errorf("New reordered its input to %v", in)
	}
	in[0] = "changed"
	if !slices.Equal(rec.Loaded, []string{"memory_read", "web_fetch"}) {
		t.Errorf("Loaded = %v after the caller changed its slice", rec.Loaded)
	}
}

// The record travels as a CheckpointRecorded event through the
// wire codec and comes back equal.
func TestEventRoundTrip(t *testing.T) {
	rec := mustNew(t, 9, resolveAll(t, base(t)), "playwright_browser", "send_message")
	b, err := events.Encode(events.New("sess_1", "web", "engine", rec.Clone()))
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	env, err := events.Decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	p, ok := env.Payload.(events.CheckpointRecorded)
	if !ok {
		t.Fatalf("payload is %T, want events.CheckpointRecorded", env.Payload)
	}
	if got := p.Clone(); !reflect.DeepEqual(got, rec) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, rec)
	}
}

// oldCheckpointHex is a version-1 CheckpointRecorded from an older writer:
// no loaded_deferred_tools, no per-tool contract (the events package's
// v1_checkpoint_recorded wire vector).
const oldCheckpointHex = "86a26964ba30314b4456444e41303030303030303030303030303030303135a773657373696f6ea7736573735f3031a774696d655f6d73cf0000019b76daa80fa17601a474797065b2436865636b706f696e745265636f72646564a46461746183ad636f6e74726163745f68617368d94063646364636463646364636463646364636463646364636463646364636463646364636463646364636463646364636463646364636463646364636463646364b072656769737472795f76657273696f6eae6275696c74696e2d323032352e31a47475726e07"

// An old checkpoint without the loaded_deferred_tools field, read off
// the wire, restores the empty set.
func TestOldWireCheckpointRestoresEmpty(t *testing.T) {
	b, err := hex.DecodeString(oldCheckpointHex)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.Decode(b)
	if err != nil {
		t.Fatalf("decode old checkpoint: %v", err)
	}
	rec := env.Payload.(events.CheckpointRecorded).Clone()
	if rec.Loaded != nil || rec.Contract != nil || rec.Turn != 7 {
		t.Fatalf("old checkpoint read as %+v, want nil Loaded and Contract, turn 7", rec)
	}
	out := Resume(&rec, resolveAll(t, base(t)))
	if len(out.Restored) != 0 || out.Restored == nil {
		t.Errorf("Restored = %#v, want the empty set", out.Restored)
	}
	// Its contract is not the current one, and it says so; nothing was
	// loaded, so nothing is lost (OK).
	if !out.OK || !strings.Contains(out.Reason, "contract hash changed (no per-tool list recorded)") ||
		!strings.Contains(out.Reason, `"builtin-2025.1" -> "test-1"`) {
		t.Errorf("Outcome = %+v; want the empty set, naming the missing per-tool list and the version change", out)
	}
}
