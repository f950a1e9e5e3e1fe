package checkpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	// order (order is part of the contract, R9).
	ChangeReordered ChangeKind = "reordered"
	// ChangeRegistryVersion: the registry version differs.
	ChangeRegistryVersion ChangeKind = "registry-version"
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
	}
	return string(c.Kind) + " " + strconv.Quote(c.Tool)
}

// Outcome is the result of Resume.
type Outcome struct {
	// Restored is the loaded deferred set to resume with, sorted; never
	// nil. It is empty whenever OK is false.
	Restored []string
	// OK is true when the checkpoint was verified against the current
	// contract (or there was none) and Restored is exactly what it
	// recorded.
	OK bool
	// Reason says in one sentence what Resume did and, when OK is false,
	// why nothing was restored.
	Reason string
	// Changes lists what changed between the recorded and the current
	// contract; nil when the hashes are equal.
	Changes []Change

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
	return fmt.Errorf("resume checkpoint: %s; resume with no deferred tools loaded, tool_search loads them again: %w", o.Reason, cause)
}

// Resume restores the loaded deferred set of checkpoint rec against
// current, the resolution of the turn being resumed (R20).
//
// It verifies the contract hash first. A nil rec (no checkpoint) restores
// the empty set, OK. An equal hash restores exactly rec.Loaded, sorted and
// de-duplicated; a nil rec.Loaded (an older checkpoint without
// loaded_deferred_tools) restores the empty set. A different hash, or a nil
// current, restores nothing: OK is false, Changes lists what changed,
// computed from rec.Contract against current, and Reason names it (when
// rec.Contract is empty it says the hash changed with no per-tool list
// recorded). This is the package's documented choice: a changed contract
// restores nothing of the loaded set, not even tools whose own hash is
// unchanged.
//
// Resume reads only rec and current: it never replays searches and never
// infers load state or permission from tool results. It does not modify
// its arguments.
func Resume(rec *Record, current *resolver.Resolution) Outcome {
	if rec == nil {
		return Outcome{Restored: []string{}, OK: true, Reason: "no checkpoint recorded: resume with no deferred tools loaded"}
	}
	names := slices.Clone(rec.Loaded)
	slices.Sort(names)
	names = slices.Compact(names)

	if current == nil {
		return Outcome{
			Restored: []string{},
			Reason:   "no current contract to verify checkpoint " + rec.ContractHash + " against" + notRestored(names),
		}
	}
	if rec.ContractHash != current.ContractHash {
		changes := diff(rec, current)
		var why string
		if len(rec.Contract) == 0 {
			why = "contract hash changed (no per-tool list recorded)"
			if rec.RegistryVersion != current.RegistryVersion {
				why += ", " + changes[len(changes)-1].String()
			}
		} else {
			parts := make([]string, len(changes))
			for i, c := range changes {
				parts[i] = c.String()
			}
			if len(parts) == 0 {
				parts = []string{"recorded tools and registry version match but the recorded hash does not"}
			}
			why = "contract hash changed: " + strings.Join(parts, ", ")
		}
		return Outcome{Restored: []string{}, Reason: why + notRestored(names), Changes: changes}
	}

	// Equal hashes mean an identical contract, so every name New accepted
	// is still deferred. A checkpoint from another writer may break R19;
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
	return Outcome{Restored: names, OK: true, Reason: why}
}

// notRestored is the tail of a refusal reason listing the dropped names.
func notRestored(names []string) string {
	if len(names) == 0 {
		return "; nothing was loaded"
	}
	return "; not restored: " + strings.Join(names, ", ")
}

// diff lists the changes from rec's contract to current's: removed and
// changed tools in recorded order, added tools in current order, a
// reordering, then the registry version.
func diff(rec *Record, current *resolver.Resolution) []Change {
	var out []Change
	if len(rec.Contract) > 0 {
		now := make(map[string]string, len(current.Tools))
		for i := range current.Tools {
			if _, dup := now[current.Tools[i].Name]; !dup {
				now[current.Tools[i].Name] = resolver.ToolHash(current.Tools[i])
			}
		}
		was := make(map[string]bool, len(rec.Contract))
		var wasOrder []string
		for _, e := range rec.Contract {
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
	}
	if rec.RegistryVersion != current.RegistryVersion {
		out = append(out, Change{Kind: ChangeRegistryVersion, From: rec.RegistryVersion, To: current.RegistryVersion})
	}
	return out
}
