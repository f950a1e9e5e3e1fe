package checkpoint

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// No checkpoint at all resumes with the empty loaded set.
func TestResumeNilCheckpoint(t *testing.T) {
	out := Resume(nil, resolveAll(t, base(t)))
	if !out.OK || out.Restored == nil || len(out.Restored) != 0 || out.Err() != nil {
		t.Errorf("Resume(nil) = %+v, want OK with an empty restored set", out)
	}
}

// An unchanged contract (same hash) restores exactly the recorded
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

// An older checkpoint (nil Loaded) against an unchanged contract
// restores the empty set, OK.
func TestResumeOldCheckpointRestoresEmpty(t *testing.T) {
	res := resolveAll(t, base(t))
	rec := events.CheckpointRecorded{ContractHash: res.ContractHash, RegistryVersion: res.RegistryVersion, Turn: 2}
	out := Resume(&rec, res)
	if !out.OK || out.Restored == nil || len(out.Restored) != 0 {
		t.Fatalf("Resume(old checkpoint) = %+v, want OK and the empty set", out)
	}
	if !strings.Contains(out.Reason, "older format") {
		t.Errorf("Reason %q does not say the checkpoint is of the older format", out.Reason)
	}
}

// A changed schema of one loaded tool drops that tool only; the
// unchanged loaded tool is restored, and the decisions say why per tool.
func TestResumeSchemaChangeDropsThatTool(t *testing.T) {
	f := base(t)
	rec := mustNew(t, 5, resolveAll(t, f), "send_message", "web_fetch")

	i := toolIndex(t, f, "send_message")
	f.Tools[i].Parameters = json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`)
	out := Resume(&rec, resolveAll(t, f))

	if out.OK || !slices.Equal(out.Restored, []string{"web_fetch"}) {
		t.Fatalf("Resume = %+v, want web_fetch restored, send_message dropped", out)
	}
	want := []Change{{Tool: "send_message", Kind: ChangeSchema}}
	if got := kinds(out.Changes); !slices.Equal(got, want) {
		t.Errorf("Changes = %v, want %v", got, want)
	}
	if got := decisionKinds(out.Tools); !slices.Equal(got, []string{"send_message:changed", "web_fetch:restored"}) {
		t.Errorf("Tools = %v, want send_message changed, web_fetch restored", got)
	}
	for _, s := range []string{`tool "send_message" changed`, "restored 1 of 2", "not restored: send_message (changed)"} {
		if !strings.Contains(out.Reason, s) {
			t.Errorf("Reason %q does not contain %q", out.Reason, s)
		}
	}
	err := out.Err()
	if !errors.Is(err, ErrContractChanged) || !strings.Contains(err.Error(), "send_message") {
		t.Errorf("Err() = %v, want ErrContractChanged naming send_message", err)
	}
}

// The per-tool hash covers description, permission and the deferral
// mark as well as the schema; each change is named against its tool, and
// the loaded tool it concerns is dropped: changed, or now resident.
func TestResumeOtherToolChangesNamed(t *testing.T) {
	cases := []struct {
		name string
		tool string
		edit func(f *regFile, i int)
		kind DecisionKind
	}{
		{"description", "memory_read", func(f *regFile, i int) { f.Tools[i].Description += " Newest first." }, DecisionChanged},
		{"permission", "memory_read", func(f *regFile, i int) { f.Tools[i].Permission = "write" }, DecisionChanged},
		{"made resident", "memory_read", func(f *regFile, _ int) {
			f.ResidentTools = []string{"read_file", "bash", "tool_search", "memory_read"}
		}, DecisionNowResident},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base(t)
			rec := mustNew(t, 1, resolveAll(t, f), "memory_read", "web_fetch")
			tc.edit(&f, toolIndex(t, f, tc.tool))
			out := Resume(&rec, resolveAll(t, f))
			want := []Change{{Tool: tc.tool, Kind: ChangeSchema}}
			if out.OK || !slices.Equal(out.Restored, []string{"web_fetch"}) || !slices.Equal(kinds(out.Changes), want) {
				t.Errorf("Resume = %+v, want web_fetch restored and Changes %v", out, want)
			}
			if got := decisionKinds(out.Tools); !slices.Equal(got, []string{tc.tool + ":" + string(tc.kind), "web_fetch:restored"}) {
				t.Errorf("Tools = %v, want %s %s", got, tc.tool, tc.kind)
			}
			if !strings.Contains(out.Reason, `tool "`+tc.tool+`" changed`) {
				t.Errorf("Reason %q does not name %s", out.Reason, tc.tool)
			}
		})
	}
}

// A tool added to the contract keeps every loaded tool; a loaded tool
// removed from the contract is dropped alone. Both are named, with their
// per-tool hashes.
func TestResumeToolAddedRemoved(t *testing.T) {
	reg := load(t, base(t))
	rec := mustNew(t, 1, resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch"), "send_message", "web_fetch")

	recorded := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch")
	added := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch", "memory_read")
	out := ResumeFrom(&rec, added, Sources{Recorded: recorded})
	if want := []Change{{Tool: "memory_read", Kind: ChangeAdded}}; !out.OK || !slices.Equal(out.Restored, []string{"send_message", "web_fetch"}) || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("added: Resume = %+v, want both restored and Changes %v", out, want)
	}
	if !strings.Contains(out.Reason, `tool "memory_read" added`) || !strings.Contains(out.Reason, "every loaded tool is unchanged") {
		t.Errorf("added: Reason %q does not name memory_read and the verified restore", out.Reason)
	}
	if out.Changes[0].To == "" || out.Changes[0].From != "" {
		t.Errorf("added: change %+v, want only the new hash", out.Changes[0])
	}

	removed := resolveNames(t, reg, "read_file", "tool_search", "send_message")
	out = ResumeFrom(&rec, removed, Sources{Recorded: recorded})
	if want := []Change{{Tool: "web_fetch", Kind: ChangeRemoved}}; out.OK || !slices.Equal(out.Restored, []string{"send_message"}) || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("removed: Resume = %+v, want send_message restored and Changes %v", out, want)
	}
	if !strings.Contains(out.Reason, `tool "web_fetch" removed`) {
		t.Errorf("removed: Reason %q does not name web_fetch", out.Reason)
	}
	if got := decisionKinds(out.Tools); !slices.Equal(got, []string{"send_message:restored", "web_fetch:not-permitted"}) {
		t.Errorf("removed: Tools = %v", got)
	}
}

// The same tools in another order are another contract,
// but each loaded tool is unchanged, so all are restored.
func TestResumeReordered(t *testing.T) {
	reg := load(t, base(t))
	recorded := resolveNames(t, reg, "read_file", "tool_search", "send_message")
	rec := mustNew(t, 1, recorded, "send_message")
	out := ResumeFrom(&rec, resolveNames(t, reg, "tool_search", "read_file", "send_message"), Sources{Recorded: recorded})
	if want := []Change{{Kind: ChangeReordered}}; !out.OK || !slices.Equal(out.Restored, []string{"send_message"}) || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("Resume = %+v, want send_message restored and Changes %v", out, want)
	}
}

// A registry version bump with identical tools restores exactly the
// recorded set, and names both versions.
func TestResumeRegistryVersionBumpRestores(t *testing.T) {
	f := base(t)
	rec := mustNew(t, 1, resolveAll(t, f), "web_fetch", "send_message")
	f.Version = "test-2"
	out := Resume(&rec, resolveAll(t, f))
	want := []Change{{Kind: ChangeRegistryVersion, From: "test-1", To: "test-2"}}
	if !out.OK || !slices.Equal(out.Restored, []string{"send_message", "web_fetch"}) || !slices.Equal(out.Changes, want) {
		t.Errorf("Resume = %+v, want both restored and Changes %v", out, want)
	}
	if !strings.Contains(out.Reason, `registry version "test-1" -> "test-2"`) {
		t.Errorf("Reason %q does not name both versions", out.Reason)
	}
}

// A loaded tool the intent no longer permits is dropped with the
// explain rule that leaves it out; one the registry lost is "removed", one
// it cannot run is "unavailable"; a name the checkpoint's contract lacks
// is "not-recorded".
func TestResumePerToolReasons(t *testing.T) {
	rec := mustNew(t, 1, resolveAll(t, base(t)), "memory_read", "send_message", "web_fetch", "playwright_browser")

	// The session now disables web_fetch and the registry dropped
	// memory_read and made playwright_browser unavailable.
	g := base(t)
	g.Version = "test-2"
	g.Tools = slices.Delete(g.Tools, toolIndex(t, g, "memory_read"), toolIndex(t, g, "memory_read")+1)
	g.Tools[toolIndex(t, g, "playwright_browser")].Available = boolp(false)
	g.Presets = map[string][]string{"everything": {"read_file", "bash", "tool_search", "send_message", "playwright_browser", "web_fetch"}}
	reg2 := load(t, g)
	req := resolver.Request{Override: intent.Override{Kind: intent.OverrideIntent,
		Intent: intent.Intent{Preset: "everything", Disabled: []string{"web_fetch"}}}}
	cur, err := reg2.Resolve(req)
	if err != nil {
		t.Fatal(err)
	}
	out := ResumeWith(&rec, cur, func(tool string) resolver.Explanation { return reg2.Explain(req, tool) })
	got := decisionKinds(out.Tools)
	want := []string{"memory_read:removed", "playwright_browser:unavailable", "send_message:restored", "web_fetch:not-permitted"}
	if !slices.Equal(got, want) || !slices.Equal(out.Restored, []string{"send_message"}) || out.OK {
		t.Fatalf("Tools = %v restored %v; want %v, [send_message]", got, out.Restored, want)
	}
	if d := out.Tools[3]; d.Rule != "disabled-by-override" || !strings.Contains(d.Reason, "switched off by hand") {
		t.Errorf("web_fetch decision %+v; want the rule that leaves it out", d)
	}

	// A checkpoint whose contract lacks a loaded name proves nothing of it.
	bad := rec
	bad.Contract = slices.DeleteFunc(slices.Clone(rec.Contract), func(e events.ContractEntry) bool { return e.Name == "send_message" })
	out = Resume(&bad, resolveAll(t, g2(t)))
	if got := decisionKinds(out.Tools); !slices.Contains(got, "send_message:not-recorded") || slices.Contains(out.Restored, "send_message") {
		t.Errorf("checkpoint without send_message's entry: %v restored %v", got, out.Restored)
	}
}

// Without the whole recorded contract (a loaded-only checkpoint
// and no registry history), Changes lists what changed of the loaded tools
// and the registry version, and the per-tool decisions are the same as
// with it: a tool added to the contract restores everything, a removed
// loaded tool is named.
func TestResumeLoadedOnlyChanges(t *testing.T) {
	reg := load(t, base(t))
	recorded := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch")
	rec := mustNew(t, 1, recorded, "send_message", "web_fetch")

	added := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch", "memory_read")
	out := Resume(&rec, added)
	if want := []Change{{Kind: ChangeUnlisted}}; !out.OK || !slices.Equal(out.Restored, []string{"send_message", "web_fetch"}) || !slices.Equal(out.Changes, want) {
		t.Errorf("added: Resume = %+v, want both restored and Changes %v (no loaded tool changed)", out, want)
	}
	if !strings.Contains(out.Reason, "tools outside the loaded set changed") {
		t.Errorf("added: Reason %q does not say the change is outside the loaded set", out.Reason)
	}
	with := ResumeFrom(&rec, added, Sources{Recorded: recorded})
	if !slices.Equal(with.Restored, out.Restored) || !slices.Equal(decisionKinds(with.Tools), decisionKinds(out.Tools)) {
		t.Errorf("decisions differ with the recorded contract: %v vs %v", decisionKinds(with.Tools), decisionKinds(out.Tools))
	}

	removed := resolveNames(t, reg, "read_file", "tool_search", "send_message")
	out = Resume(&rec, removed)
	if want := []Change{{Tool: "web_fetch", Kind: ChangeRemoved}}; out.OK || !slices.Equal(out.Restored, []string{"send_message"}) || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("removed: Resume = %+v, want send_message restored and Changes %v", out, want)
	}

	// A recorded contract whose hash is not the checkpoint's proves
	// nothing and is not used.
	other := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch", "bash")
	if out := ResumeFrom(&rec, added, Sources{Recorded: other}); !slices.Equal(out.Changes, []Change{{Kind: ChangeUnlisted}}) {
		t.Errorf("a recorded contract of another hash was used: %v", out.Changes)
	}
}

// A checkpoint of an older writer that lists the whole contract
// still resumes and reports every change of the contract from its own
// list.
func TestResumeFullContractRecord(t *testing.T) {
	reg := load(t, base(t))
	recorded := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch")
	rec := mustNew(t, 1, recorded, "send_message", "web_fetch")
	rec.Contract = nil
	for i := range recorded.Tools {
		rec.Contract = append(rec.Contract, events.ContractEntry{Name: recorded.Tools[i].Name, Hash: resolver.ToolHash(recorded.Tools[i])})
	}
	if !FullContract(&rec) {
		t.Fatal("FullContract does not recognise the whole contract")
	}
	added := resolveNames(t, reg, "read_file", "tool_search", "send_message", "web_fetch", "memory_read")
	out := Resume(&rec, added)
	if want := []Change{{Tool: "memory_read", Kind: ChangeAdded}}; !out.OK || !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("Resume = %+v, want both restored and Changes %v", out, want)
	}
}

// A checkpoint without per-tool hashes is decided per tool when
// the registry history gives back its recorded contract.
func TestResumeNoPerToolListWithRecorded(t *testing.T) {
	f := base(t)
	recorded := resolveAll(t, f)
	rec := mustNew(t, 1, recorded, "web_fetch", "send_message")
	rec.Contract = nil
	f.Tools[toolIndex(t, f, "web_fetch")].Description = "Fetch."
	out := ResumeFrom(&rec, resolveAll(t, f), Sources{Recorded: recorded})
	if got := decisionKinds(out.Tools); !slices.Equal(got, []string{"send_message:restored", "web_fetch:changed"}) {
		t.Errorf("Tools = %v, want send_message restored, web_fetch changed", got)
	}
	if want := []Change{{Tool: "web_fetch", Kind: ChangeSchema}}; !slices.Equal(kinds(out.Changes), want) {
		t.Errorf("Changes = %v, want %v", out.Changes, want)
	}
}

// g2 is the base registry under another version, same tools.
func g2(t tb) regFile {
	f := base(t)
	f.Version = "test-2"
	return f
}

func boolp(b bool) *bool { return &b }

func decisionKinds(ds []Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Tool + ":" + string(d.Kind)
	}
	return out
}

// A checkpoint of an older writer without a per-tool list can only say
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

// With no current contract there is nothing to verify against, so
// nothing is restored.
func TestResumeNilCurrent(t *testing.T) {
	rec := mustNew(t, 1, resolveAll(t, base(t)), "web_fetch")
	out := Resume(&rec, nil)
	if out.OK || len(out.Restored) != 0 || !errors.Is(out.Err(), ErrContractChanged) {
		t.Errorf("Resume(rec, nil) = %+v, want a refusal", out)
	}
}

// A checkpoint from another writer that names a tool its own
// (unchanged) contract does not defer is not trusted at all.
func TestResumeRefusesCheckpointNamingAToolItsContractDoesNotDefer(t *testing.T) {
	res := resolveAll(t, base(t))
	for _, bad := range []string{"read_file", "no_such_tool"} {
		rec := events.CheckpointRecorded{Loaded: []string{"web_fetch", bad}, ContractHash: res.ContractHash, RegistryVersion: res.RegistryVersion}
		out := Resume(&rec, res)
		if out.OK || len(out.Restored) != 0 || !errors.Is(out.Err(), ErrNotInContract) || !strings.Contains(out.Reason, bad) {
			t.Errorf("Resume(loaded %q) = %+v (err %v), want nothing restored, ErrNotInContract naming it", bad, out, out.Err())
		}
	}
}

// Resume reads nothing but the record and the current resolution: it
// does not add a deferred tool the record does not name, even one that is
// in the contract, and it does not modify its arguments.
func TestResumeInfersNothing(t *testing.T) {
	res := resolveAll(t, base(t))
	rec := mustNew(t, 1, res, "web_fetch")
	before := rec.Clone()
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

// Err is nil exactly when OK.
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
