package checkpoint

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// R20: no checkpoint at all resumes with the empty loaded set.
func TestResumeNilCheckpoint(t *testing.T) {
	out := Resume(nil, resolveAll(t, base(t)))
	if !out.OK || out.Restored == nil || len(out.Restored) != 0 || out.Err() != nil {
		t.Errorf("Resume(nil) = %+v, want OK with an empty restored set", out)
	}
}

// R20: an unchanged contract (same hash) restores exactly the recorded
// names, against a resolution rebuilt from scratch by a fresh registry.
func TestResumeUnchangedRestores(t *testing.T) {
	rec := mustNew(t, 3, resolveAll(t, base(t)), "send_message", "web_fetch")
	out := Resume(&rec, resolveAll(t, base(t))) // a new Registry: nothing cached is shared
	if !out.OK || out.Err() != nil || out.Changes != nil {
		t.Fatalf("Resume = %+v, want OK", out)
	}
	if want := []string{"send_message", "web_fetch"}; !slices.Equal(out.Restored, want) {
		t.Errorf("Restored = %v, want %v", out.Restored, want)
	}
	out.Restored[0] = "x"
	if rec.Loaded[0] != "send_message" {
		t.Error("Restored aliases the record's Loaded")
	}
}

// R20: an older checkpoint (nil Loaded) against an unchanged contract
// restores the empty set, OK.
func TestResumeOldCheckpointRestoresEmpty(t *testing.T) {
	res := resolveAll(t, base(t))
	rec := FromEvent(events.CheckpointRecorded{ContractHash: res.ContractHash, RegistryVersion: res.RegistryVersion, Turn: 2})
	out := Resume(&rec, res)
	if !out.OK || out.Restored == nil || len(out.Restored) != 0 {
		t.Fatalf("Resume(old checkpoint) = %+v, want OK and the empty set", out)
	}
	if !strings.Contains(out.Reason, "older format") {
		t.Errorf("Reason %q does not say the checkpoint is of the older format", out.Reason)
	}
}

// R20: a changed schema of one loaded tool refuses the whole checkpoint —
// nothing is restored, not even the unchanged loaded tool — and the reason
// names that tool.
func TestResumeSchemaChangeRefuses(t *testing.T) {
	f := base(t)
	rec := mustNew(t, 5, resolveAll(t, f), "send_message", "web_fetch")

	i := toolIndex(t, f, "send_message")
	f.Tools[i].Parameters = json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`)
	out := Resume(&rec, resolveAll(t, f))

	if out.OK || len(out.Restored) != 0 || out.Restored == nil {
		t.Fatalf("Resume = %+v, want a refusal restoring nothing", out)
	}
	want := []Change{{Tool: "send_message", Kind: ChangeSchema}}
	if got := kinds(out.Changes); !slices.Equal(got, want) {
		t.Errorf("Changes = %v, want %v", got, want)
	}
	for _, s := range []string{`tool "send_message" changed`, "not restored: send_message, web_fetch"} {
		if !strings.Contains(out.Reason, s) {
			t.Errorf("Reason %q does not contain %q", out.Reason, s)
		}
	}
	err := out.Err()
	if !errors.Is(err, ErrContractChanged) || !strings.Contains(err.Error(), "send_message") {
		t.Errorf("Err() = %v, want ErrContractChanged naming send_message", err)
	}
}

// R20: the per-tool hash covers description, permission and the deferral
// mark as well as the schema; each change is named against its tool.
func TestResumeOtherToolChangesNamed(t *testing.T) {
	cases := []struct {
		name string
		tool string
		edit func(f *regFile, i int)
	}{
		{"description", "web_fetch", func(f *regFile, i int) { f.Tools[i].Description += " Follows redirects." }},
		{"permission", "memory_read", func(f *regFile, i int) { f.Tools[i].Permission = "write" }},
		{"made resident", "web_fetch", func(f *regFile, _ int) {
			f.ResidentTools = []string{"read_file", "bash", "tool_search", "web_fetch"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base(t)
			rec := mustNew(t, 1, resolveAll(t, f), "memory_read")
			tc.edit(&f, toolIndex(t, f, tc.tool))
			out := Resume(&rec, resolveAll(t, f))
			want := []Change{{Tool: tc.tool, Kind: ChangeSchema}}
			if out.OK || len(out.Restored) != 0 || !slices.Equal(kinds(out.Changes), want) {
				t.Errorf("Resume = %+v, want nothing restored and Changes %v", out, want)
			}
			if !strings.Contains(out.Reason, `tool "`+tc.tool+`" changed`) {
				t.Errorf("Reason %q does not name %s", out.Reason, tc.tool)
			}
		})
	}
}

// R20: a tool added to, or removed from, the contract is named, with its
// per-tool hash.
func TestResumeToolAddedRemoved(t *testing.T) {
	reg := load(t, base(t))
	rec := mustNew(t, 1, resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch"), "send_message")

	added := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch", "memory_read")
	out := Resume(&rec, added)
	if want := []Change{{Tool: "memory_read", Kind: ChangeAdded}}; out.OK || len(out.Restored) != 0 || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("added: Resume = %+v, want nothing restored and Changes %v", out, want)
	}
	if !strings.Contains(out.Reason, `tool "memory_read" added`) {
		t.Errorf("added: Reason %q does not name memory_read", out.Reason)
	}
	if out.Changes[0].To == "" || out.Changes[0].From != "" {
		t.Errorf("added: change %+v, want only the new hash", out.Changes[0])
	}

	removed := resolveNames(t, reg, "read_file", "tool_search", "send_message")
	out = Resume(&rec, removed)
	if want := []Change{{Tool: "web_fetch", Kind: ChangeRemoved}}; out.OK || len(out.Restored) != 0 || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("removed: Resume = %+v, want nothing restored and Changes %v", out, want)
	}
	if !strings.Contains(out.Reason, `tool "web_fetch" removed`) {
		t.Errorf("removed: Reason %q does not name web_fetch", out.Reason)
	}
}

// R20 (with R9): the same tools in another order are another contract.
func TestResumeReordered(t *testing.T) {
	reg := load(t, base(t))
	rec := mustNew(t, 1, resolveNames(t, reg, "read_file", "tool_search", "send_message"), "send_message")
	out := Resume(&rec, resolveNames(t, reg, "tool_search", "read_file", "send_message"))
	if want := []Change{{Kind: ChangeReordered}}; out.OK || len(out.Restored) != 0 || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("Resume = %+v, want nothing restored and Changes %v", out, want)
	}
}

// R20: a registry version change alone is named with both versions.
func TestResumeRegistryVersionNamed(t *testing.T) {
	f := base(t)
	rec := mustNew(t, 1, resolveAll(t, f), "web_fetch")
	f.Version = "test-2"
	out := Resume(&rec, resolveAll(t, f))
	want := []Change{{Kind: ChangeRegistryVersion, From: "test-1", To: "test-2"}}
	if out.OK || len(out.Restored) != 0 || !slices.Equal(out.Changes, want) {
		t.Errorf("Resume = %+v, want nothing restored and Changes %v", out, want)
	}
	if !strings.Contains(out.Reason, `registry version "test-1" -> "test-2"`) {
		t.Errorf("Reason %q does not name both versions", out.Reason)
	}
}

// R20: a checkpoint of an older writer without a per-tool list can only say
// that the hash changed.
func TestResumeNoPerToolList(t *testing.T) {
	f := base(t)
	rec := mustNew(t, 1, resolveAll(t, f), "web_fetch")
	rec.Contract = nil
	f.Tools[toolIndex(t, f, "web_fetch")].Description = "Fetch."
	out := Resume(&rec, resolveAll(t, f))
	if out.OK || len(out.Restored) != 0 || out.Changes != nil {
		t.Fatalf("Resume = %+v, want nothing restored and no per-tool changes", out)
	}
	if want := "contract hash changed (no per-tool list recorded); not restored: web_fetch"; out.Reason != want {
		t.Errorf("Reason = %q, want %q", out.Reason, want)
	}
}

// R20: with no current contract there is nothing to verify against, so
// nothing is restored.
func TestResumeNilCurrent(t *testing.T) {
	rec := mustNew(t, 1, resolveAll(t, base(t)), "web_fetch")
	out := Resume(&rec, nil)
	if out.OK || len(out.Restored) != 0 || !errors.Is(out.Err(), ErrContractChanged) {
		t.Errorf("Resume(rec, nil) = %+v, want a refusal", out)
	}
}

// R19, R20: a checkpoint from another writer that names a tool its own
// (unchanged) contract does not defer is not trusted at all.
func TestResumeRefusesCheckpointBreakingR19(t *testing.T) {
	res := resolveAll(t, base(t))
	for _, bad := range []string{"read_file", "no_such_tool"} {
		rec := FromEvent(events.CheckpointRecorded{Loaded: []string{"web_fetch", bad}, ContractHash: res.ContractHash, RegistryVersion: res.RegistryVersion})
		out := Resume(&rec, res)
		if out.OK || len(out.Restored) != 0 || !errors.Is(out.Err(), ErrNotInContract) || !strings.Contains(out.Reason, bad) {
			t.Errorf("Resume(loaded %q) = %+v (err %v), want nothing restored, ErrNotInContract naming it", bad, out, out.Err())
		}
	}
}

// R20: Resume reads nothing but the record and the current resolution: it
// does not add a deferred tool the record does not name, even one that is
// in the contract, and it does not modify its arguments.
func TestResumeInfersNothing(t *testing.T) {
	res := resolveAll(t, base(t))
	rec := mustNew(t, 1, res, "web_fetch")
	before := FromEvent(rec.Event())
	tools := slices.Clone(res.Tools)
	out := Resume(&rec, res)
	if !slices.Equal(out.Restored, []string{"web_fetch"}) {
		t.Errorf("Restored = %v, want exactly [web_fetch]", out.Restored)
	}
	if !slices.Equal(rec.Loaded, before.Loaded) || !slices.Equal(rec.Contract, before.Contract) {
		t.Error("Resume modified the record")
	}
	for i := range tools {
		if tools[i].Name != res.Tools[i].Name || resolver.ToolHash(tools[i]) != resolver.ToolHash(res.Tools[i]) {
			t.Error("Resume modified the resolution")
		}
	}
}

// R20: Err is nil exactly when OK.
func TestOutcomeErr(t *testing.T) {
	if err := (Outcome{OK: true}).Err(); err != nil {
		t.Errorf("OK outcome Err = %v", err)
	}
	err := (Outcome{Reason: "contract hash changed: tool \"x\" removed"}).Err()
	if !errors.Is(err, ErrContractChanged) || !strings.Contains(err.Error(), `tool "x" removed`) {
		t.Errorf("refused outcome Err = %v, want ErrContractChanged with the reason", err)
	}
}

// kinds strips the hashes off changes so tests compare tool and kind only.
func kinds(cs []Change) []Change {
	out := make([]Change, len(cs))
	for i, c := range cs {
		out[i] = Change{Tool: c.Tool, Kind: c.Kind}
	}
	return out
}
