package checkpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// ChangeKind names how a tool contract changed between a checkpoint and
// the current resolution.
type ChangeKind string

// The kinds of Change, in the order Resume reports them.
const (
	// ChangeRemoved: a tool of the recorded contract is not in the
	// current one.
	ChangeRemoved ChangeKind = "removed"
	// ChangeSchema: a tool is in both but its per-tool hash differs: its
	// parameter schema, description, permission, availability or deferral
	// mark changed.
	ChangeSchema ChangeKind = "schema-changed"
	// ChangeAdded: a tool of the current contract was not recorded.
	ChangeAdded ChangeKind = "added"
	// ChangeReordered: the same tools with the same hashes, in another
	// order (order is part of the contract).
	ChangeReordered ChangeKind = "reordered"
	// ChangeRegistryVersion: the registry version differs.
	ChangeRegistryVersion ChangeKind = "registry-version"
	// ChangeUnlisted: the contract changed in tools the checkpoint does
	// not list (it records its loaded tools only) and the registry
	// history could not give back the recorded contract: which tools
	// changed is not known, only that no loaded one did.
	ChangeUnlisted ChangeKind = "unlisted"
)

// Change is one difference between a recorded contract and the current
// one.
type Change struct {
	// Tool is the tool name; "" for ChangeRegistryVersion and
	// ChangeReordered.
	Tool string
	// Kind says what changed.
	Kind ChangeKind
	// From and To are the recorded and current values: the per-tool hashes
	// for ChangeSchema (one of them "" for ChangeRemoved / ChangeAdded),
	// the registry versions for ChangeRegistryVersion.
	From, To string
}

// String describes the change in a few words, e.g. `tool "bash" removed`.
func (c Change) String() string {
	switch c.Kind {
	case ChangeRemoved:
		return "tool " + strconv.Quote(c.Tool) + " removed"
	case ChangeAdded:
		return "tool " + strconv.Quote(c.Tool) + " added"
	case ChangeSchema:
		return "tool " + strconv.Quote(c.Tool) + " changed (schema, description, permission, availability or deferral mark)"
	case ChangeReordered:
		return "tool order changed"
	case ChangeRegistryVersion:
		return "registry version " + strconv.Quote(c.From) + " -> " + strconv.Quote(c.To)
	case ChangeUnlisted:
		return "tools outside the loaded set changed (the checkpoint lists only its loaded tools)"
	}
	return string(c.Kind) + " " + strconv.Quote(c.Tool)
}

// DecisionKind says what Resume did with one loaded deferred tool of a
// checkpoint.
type DecisionKind string

// The kinds of Decision.
const (
	// DecisionRestored: the tool is loaded again.
	DecisionRestored DecisionKind = "restored"
	// DecisionRemoved: the registry no longer has the tool.
	DecisionRemoved DecisionKind = "removed"
	// DecisionUnavailable: the registry has the tool but it cannot run in
	// this deployment.
	DecisionUnavailable DecisionKind = "unavailable"
	// DecisionNotPermitted: the current resolution (the session's intent,
	// the profile, the override or the registry's lists) leaves the tool
	// out; Rule says which rule.
	DecisionNotPermitted DecisionKind = "not-permitted"
	// DecisionNowResident: the tool is resident now, so it is in the
	// provider array without loading.
	DecisionNowResident DecisionKind = "now-resident"
	// DecisionChanged: the tool's own contract entry differs: its schema,
	// description, permission or availability changed, so the model's
	// copy is stale; tool_search loads the new one.
	DecisionChanged DecisionKind = "changed"
	// DecisionNotRecorded: the checkpoint's per-tool contract has no entry
	// for the tool (its writer broke the checkpoint rules), so nothing proves it unchanged.
	DecisionNotRecorded DecisionKind = "not-recorded"
	// DecisionUnverifiable: the contract changed and the checkpoint
	// recorded no per-tool contract (an older writer), so no tool can be
	// proved unchanged.
	DecisionUnverifiable DecisionKind = "unverifiable"
	// DecisionRefused: the checkpoint breaks the checkpoint rules against its own,
	// unchanged contract; none of it is trusted.
	DecisionRefused DecisionKind = "refused"
)

// Decision is what Resume did with one loaded tool, and why.
type Decision struct {
	// Tool is the loaded tool's name.
	Tool string
	// Kind is DecisionRestored or the reason it was dropped.
	Kind DecisionKind
	// Rule is, for DecisionNotPermitted, the explain rule that leaves the
	// tool out (e.g. "disabled-by-session", "not-in-preset:research");
	// "" otherwise or when Resume had no explainer.
	Rule string
	// Reason says it in one sentence.
	Reason string
}

// Outcome is the result of Resume.
type Outcome struct {
	// Restored is the loaded deferred set to resume with, sorted; never
	// nil.
	Restored []string
	// OK is true when every loaded tool of the checkpoint was restored
	// (or there was no checkpoint): Restored is exactly what it recorded.
	OK bool
	// Reason says in one sentence what Resume did and, when OK is false,
	// why tools were dropped.
	Reason string
	// Changes lists what changed between the recorded and the current
	// contract; nil when the hashes are equal.
	Changes []Change
	// Tools has one decision per loaded tool of the checkpoint, sorted by
	// name: restored, or dropped and why. Nil without a checkpoint
	// or when nothing was loaded.
	Tools []Decision

	cause error // sentinel Err wraps when !OK
}

// Err returns nil when o.OK, else an error wrapping ErrContractChanged
// (or ErrNotInContract, for a checkpoint that names tools its own
// unchanged contract does not defer) that carries o.Reason.
func (o Outcome) Err() error {
	if o.OK {
		return nil
	}
	cause := o.cause
	if cause == nil {
		cause = ErrContractChanged
	}
	return fmt.Errorf("resume checkpoint: %s; resume with the restored tools only, tool_search loads the others again: %w", o.Reason, cause)
}

// Explainer says why a tool is or is not in the resolution being resumed
// against: resolver.Registry.Explain bound to the resumed request. Resume
// uses it to tell a removed tool from an unavailable one or one the intent
// does not permit.
type Explainer func(tool string) resolver.Explanation

// Sources is what ResumeFrom reads besides the checkpoint and the current
// resolution. The zero value is usable.
type Sources struct {
	// Explain, when not nil, says why a tool is not in the current
	// resolution (removed, unavailable, not permitted).
	Explain Explainer
	// Recorded, when not nil, is the contract the checkpoint was recorded
	// against, rebuilt from the registry history (the checkpoint's
	// registry version and the turn's request). It is used only when its
	// contract hash equals the checkpoint's, which proves it is that
	// contract: Changes then lists every difference of the whole
	// contract, and a checkpoint without per-tool hashes is decided per
	// tool from it.
	Recorded *resolver.Resolution
}

// Resume restores the loaded deferred set of checkpoint rec against
// current, the resolution of the turn being resumed. It is
// ResumeFrom without an explainer or a recorded contract.
func Resume(rec *Record, current *resolver.Resolution) Outcome {
	return ResumeFrom(rec, current, Sources{})
}

// ResumeWith is ResumeFrom with an explainer and no recorded contract.
func ResumeWith(rec *Record, current *resolver.Resolution, explain Explainer) Outcome {
	return ResumeFrom(rec, current, Sources{Explain: explain})
}

// ResumeFrom restores the loaded deferred set of checkpoint rec against
// current, the resolution of the turn being resumed.
//
// It verifies the contract hash first. A nil rec (no checkpoint) restores
// the empty set, OK. An equal hash restores exactly rec.Loaded, sorted and
// de-duplicated; a nil rec.Loaded (an older checkpoint without
// loaded_deferred_tools) restores the empty set. A nil current restores
// nothing.
//
// A different hash is decided per tool: a loaded tool is restored
// when its own entry in rec.Contract (or, for a checkpoint without one,
// in src.Recorded) has the hash (resolver.ToolHash) of the same tool in
// current, and current still has it deferred; otherwise it is dropped
// with its reason (removed, unavailable, not permitted by the intent, now
// resident, changed, not recorded). A checkpoint without per-tool hashes
// and without a recorded contract cannot prove any tool unchanged and
// restores nothing. Changes lists what changed in the whole contract when
// the whole recorded contract is known (an older checkpoint listing it,
// or src.Recorded), else what changed of the loaded tools and the
// registry version, or ChangeUnlisted when neither did; Reason names it. src.Explain, when not nil, refines
// why a tool is not in current.
//
// ResumeFrom reads only rec, current and src: it never replays searches
// and never infers load state or permission from tool results. It does
// not modify its arguments.
func ResumeFrom(rec *Record, current *resolver.Resolution, src Sources) Outcome {
	if rec == nil {
		return Outcome{Restored: []string{}, OK: true, Reason: "no checkpoint recorded: resume with no deferred tools loaded"}
	}
	names := slices.Clone(rec.Loaded)
	slices.Sort(names)
	names = slices.Compact(names)
	all := func(kind DecisionKind, reason string) []Decision {
		var out []Decision
		for _, n := range names {
			out = append(out, Decision{Tool: n, Kind: kind, Reason: reason})
		}
		return out
	}

	if current == nil {
		return Outcome{
			Restored: []string{},
			Reason:   "no current contract to verify checkpoint " + rec.ContractHash + " against" + notRestored(names),
			Tools:    all(DecisionUnverifiable, "no current contract to verify it against"),
		}
	}
	if rec.ContractHash != current.ContractHash {
		return perTool(rec, current, names, src)
	}

	// Equal hashes mean an identical contract, so every name New accepted
	// is still deferred. A checkpoint from another writer may break the checkpoint rules;
	// trust none of it then.
	var bad []string
	for _, name := range names {
		if t, ok := find(current.Tools, name); !ok || !isDeferred(t) {
			bad = append(bad, strconv.Quote(name))
		}
	}
	if len(bad) > 0 {
		return Outcome{
			Restored: []string{},
			Reason:   "checkpoint names tools that are not deferred in its own contract " + rec.ContractHash + ": " + strings.Join(bad, ", ") + notRestored(names),
			Tools:    all(DecisionRefused, "the checkpoint names tools that are not deferred in its own contract ("+strings.Join(bad, ", ")+"), so none of it is trusted (see docs/semantics.md#checkpoints)"),
			cause:    ErrNotInContract,
		}
	}
	why := "contract unchanged: restored " + strconv.Itoa(len(names)) + " loaded deferred tool(s)"
	if rec.Loaded == nil {
		why = "contract unchanged: checkpoint has no loaded_deferred_tools (older format), restored none"
	}
	if names == nil {
		names = []string{}
	}
	return Outcome{Restored: names, OK: true, Reason: why, Tools: all(DecisionRestored, "the contract is unchanged")}
}

// perTool decides each loaded tool of rec against current, whose contract
// hash differs.
func perTool(rec *Record, current *resolver.Resolution, names []string, src Sources) Outcome {
	whole := wholeContract(rec, src.Recorded)
	recorded := make(map[string]string, len(rec.Contract))
	for _, e := range rec.Contract {
		if _, dup := recorded[e.Name]; !dup {
			recorded[e.Name] = e.Hash
		}
	}
	if len(rec.Contract) == 0 && whole != nil { // an older checkpoint: the registry history proves its tools
		for _, e := range whole {
			if _, dup := recorded[e.Name]; !dup {
				recorded[e.Name] = e.Hash
			}
		}
	}
	var changes []Change
	if whole != nil {
		changes = diff(whole, rec.RegistryVersion, current)
	} else if changes = loadedDiff(names, recorded, rec.RegistryVersion, current); len(changes) == 0 && rec.Contract != nil {
		changes = []Change{{Kind: ChangeUnlisted}}
	}
	if len(recorded) == 0 {
		why := "contract hash changed (no per-tool list recorded)"
		if rec.RegistryVersion != current.RegistryVersion {
			why += ", " + changes[len(changes)-1].String()
		}
		out := Outcome{Restored: []string{}, OK: len(names) == 0, Reason: why + notRestored(names), Changes: changes}
		for _, n := range names {
			out.Tools = append(out.Tools, Decision{Tool: n, Kind: DecisionUnverifiable,
				Reason: "the contract changed and the checkpoint recorded no per-tool contract, so nothing proves it unchanged"})
		}
		return out
	}
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.String()
	}
	if len(parts) == 0 {
		parts = []string{"recorded tools and registry version match but the recorded hash does not"}
	}
	why := "contract hash changed: " + strings.Join(parts, ", ")

	out := Outcome{Restored: []string{}, Changes: changes}
	var dropped []string
	for _, name := range names {
		d := decide(name, recorded, current, src.Explain)
		out.Tools = append(out.Tools, d)
		if d.Kind == DecisionRestored {
			out.Restored = append(out.Restored, name)
		} else {
			dropped = append(dropped, name+" ("+string(d.Kind)+")")
		}
	}
	out.OK = len(dropped) == 0
	switch {
	case len(names) == 0:
		out.Reason = why + "; nothing was loaded"
	case out.OK:
		out.Reason = why + "; every loaded tool is unchanged and still permitted: restored " + strconv.Itoa(len(names)) + " loaded deferred tool(s)"
	default:
		out.Reason = why + "; restored " + strconv.Itoa(len(out.Restored)) + " of " + strconv.Itoa(len(names)) + " loaded deferred tool(s); not restored: " + strings.Join(dropped, ", ")
	}
	return out
}

// FullContract reports whether rec lists every tool of its contract (the
// form of older writers), not only its loaded tools: its entries' hashes
// add up to its contract hash.
func FullContract(rec *Record) bool {
	if rec == nil || len(rec.Contract) == 0 {
		return false
	}
	hashes := make([]string, len(rec.Contract))
	for i, e := range rec.Contract {
		hashes[i] = e.Hash
	}
	sum, err := resolver.ContractHashFromToolHashes(rec.RegistryVersion, hashes)
	return err == nil && sum == rec.ContractHash
}

// wholeContract returns every entry of the contract rec was recorded
// against, in order, when it is known: rec's own list in the older full
// form, or recorded when its hash proves it is that contract; nil
// otherwise.
func wholeContract(rec *Record, recorded *resolver.Resolution) []events.ContractEntry {
	if FullContract(rec) {
		return rec.Contract
	}
	if recorded == nil || recorded.ContractHash != rec.ContractHash {
		return nil
	}
	out := make([]events.ContractEntry, len(recorded.Tools))
	for i := range recorded.Tools {
		out[i] = events.ContractEntry{Name: recorded.Tools[i].Name, Hash: recorded.ToolHashAt(i)}
	}
	return out
}

// decide is the per-tool rule for one loaded name.
func decide(name string, recorded map[string]string, current *resolver.Resolution, explain Explainer) Decision {
	d := Decision{Tool: name}
	t, inCurrent := find(current.Tools, name)
	hash, wasRecorded := recorded[name]
	switch {
	case !inCurrent:
		d.Kind, d.Reason = DecisionNotPermitted, "it is not in the current tool set"
		if explain != nil {
			ex := explain(name)
			switch ex.Rule {
			case "unknown-tool":
				d.Kind, d.Reason = DecisionRemoved, "the registry no longer has it"
			case "unavailable":
				d.Kind, d.Reason = DecisionUnavailable, "it is not available in this deployment: "+ex.Detail
			default:
				d.Rule, d.Reason = ex.Rule, "the current intent does not permit it: "+ex.Detail
			}
		}
	case !isDeferred(t):
		d.Kind, d.Reason = DecisionNowResident, "it is resident now, in the provider array without loading"
	case !wasRecorded:
		d.Kind, d.Reason = DecisionNotRecorded, "the checkpoint's contract has no entry for it (see docs/semantics.md#checkpoints), so nothing proves it unchanged"
	case resolver.ToolHash(t) != hash:
		d.Kind, d.Reason = DecisionChanged, "its contract entry changed (schema, description, permission or availability): tool_search loads the new one"
	default:
		d.Kind, d.Reason = DecisionRestored, "its contract entry is unchanged and the intent still permits it"
	}
	return d
}

// notRestored is the tail of a refusal reason listing the dropped names.
func notRestored(names []string) string {
	if len(names) == 0 {
		return "; nothing was loaded"
	}
	return "; not restored: " + strings.Join(names, ", ")
}

// diff lists the changes from a whole recorded contract to current's:
// removed and changed tools in recorded order, added tools in current
// order, a reordering, then the registry version.
func diff(contract []events.ContractEntry, version string, current *resolver.Resolution) []Change {
	var out []Change
	now := currentHashes(current)
	was := make(map[string]bool, len(contract))
	var wasOrder []string
	for _, e := range contract {
		if was[e.Name] {
			continue
		}
		was[e.Name] = true
		h, ok := now[e.Name]
		switch {
		case !ok:
			out = append(out, Change{Tool: e.Name, Kind: ChangeRemoved, From: e.Hash})
		case h != e.Hash:
			out = append(out, Change{Tool: e.Name, Kind: ChangeSchema, From: e.Hash, To: h})
			wasOrder = append(wasOrder, e.Name)
		default:
			wasOrder = append(wasOrder, e.Name)
		}
	}
	var nowOrder []string
	seen := make(map[string]bool, len(current.Tools))
	for i := range current.Tools {
		name := current.Tools[i].Name
		if seen[name] {
			continue
		}
		seen[name] = true
		if !was[name] {
			out = append(out, Change{Tool: name, Kind: ChangeAdded, To: now[name]})
			continue
		}
		nowOrder = append(nowOrder, name)
	}
	if !slices.Equal(wasOrder, nowOrder) {
		out = append(out, Change{Kind: ChangeReordered})
	}
	return versionChange(out, version, current)
}

// loadedDiff lists what changed of the loaded tools names (their recorded
// hashes in recorded) when the whole recorded contract is unknown:
// removed and changed tools in name order, then the registry version.
func loadedDiff(names []string, recorded map[string]string, version string, current *resolver.Resolution) []Change {
	var out []Change
	now := currentHashes(current)
	for _, n := range names {
		was, ok := recorded[n]
		if !ok {
			continue
		}
		switch h, in := now[n]; {
		case !in:
			out = append(out, Change{Tool: n, Kind: ChangeRemoved, From: was})
		case h != was:
			out = append(out, Change{Tool: n, Kind: ChangeSchema, From: was, To: h})
		}
	}
	return versionChange(out, version, current)
}

// currentHashes maps each tool of current to its per-tool hash (the first
// of a name).
func currentHashes(current *resolver.Resolution) map[string]string {
	now := make(map[string]string, len(current.Tools))
	for i := range current.Tools {
		if _, dup := now[current.Tools[i].Name]; !dup {
			now[current.Tools[i].Name] = current.ToolHashAt(i)
		}
	}
	return now
}

// versionChange appends the registry version change, if any.
func versionChange(out []Change, version string, current *resolver.Resolution) []Change {
	if version != current.RegistryVersion {
		out = append(out, Change{Kind: ChangeRegistryVersion, From: version, To: current.RegistryVersion})
	}
	return out
}
