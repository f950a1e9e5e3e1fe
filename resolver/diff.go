package resolver

// Registry change impact: what a candidate registry changes
// against the one in force, before it is pushed.

import (
	"bytes"
	"slices"
)

// ToolChange is one tool present in both registries whose contract bytes
// differ; Fields names the parts that differ, in a fixed order:
// description, parameters, permission, available, deferred, native.
type ToolChange struct {
	Name   string   `json:"name"`
	Fields []string `json:"fields"`
}

// RegistryDiff compares a candidate registry with the one in force.
type RegistryDiff struct {
	// From and To are the two registry versions.
	From string `json:"from"`
	To   string `json:"to"`
	// Added and Removed are tool names, in the registry's order.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Changed are the tools of both whose contract bytes differ.
	Changed []ToolChange `json:"changed,omitempty"`
	// Embeddings are the tools of both whose embedding (the
	// semantic path) is added, removed or changed, in the candidate's
	// order. An embedding only ranks tool_search queries that carry a
	// vector: it is not part of the contract, so these tools change no
	// contract hash, tools prefix or checkpoint; the registry is still
	// another one, to push.
	Embeddings []string `json:"embeddings,omitempty"`
	// AllHashesChange is true when the registry versions differ: the
	// version is hashed into every contract hash, so every session's
	// contract hash changes even where its tools do not. A channel
	// policy is not hashed in: it changes contracts only through
	// the tools it withholds.
	AllHashesChange bool `json:"all_hashes_change"`
	// PolicyFrom and PolicyTo are the channel policy versions ("" none).
	PolicyFrom string `json:"policy_from,omitempty"`
	PolicyTo   string `json:"policy_to,omitempty"`
	// DefaultsChange is true when DEFAULT_TOOLS expand to other tools
	// (names, order or contract bytes).
	DefaultsChange bool `json:"defaults_change"`
	// Presets and Profiles are those, sorted, whose expansion changes
	// (other tools, order or contract bytes), or that exist in one
	// registry only.
	Presets  []string `json:"presets,omitempty"`
	Profiles []string `json:"profiles,omitempty"`
}

// Diff compares cand, a candidate registry, with cur, the one in force.
// It is deterministic and reads nothing but the two registries.
func Diff(cur, cand *Registry) RegistryDiff {
	d := RegistryDiff{From: cur.version, To: cand.version, PolicyFrom: cur.PolicyVersion(), PolicyTo: cand.PolicyVersion()}
	d.AllHashesChange = d.From != d.To // the policy is not hashed into contracts
	for i := range cand.tools {
		t := &cand.tools[i]
		old, ok := cur.Tool(t.Name)
		if !ok {
			d.Added = append(d.Added, t.Name)
			continue
		}
		if f := changedFields(&old, t); f != nil {
			d.Changed = append(d.Changed, ToolChange{Name: t.Name, Fields: f})
		}
		if !slices.Equal(old.Embedding, t.Embedding) {
			d.Embeddings = append(d.Embeddings, t.Name)
		}
	}
	for i := range cur.tools {
		if _, ok := cand.index[cur.tools[i].Name]; !ok {
			d.Removed = append(d.Removed, cur.tools[i].Name)
		}
	}
	d.DefaultsChange = !sameExpansion(cur, cand, Request{})
	for _, p := range union(cur.presetNames, cand.presetNames) {
		if !sameExpansion(cur, cand, Request{Session: Intent{Preset: p}}) {
			d.Presets = append(d.Presets, p)
		}
	}
	for _, p := range union(cur.profileNames, cand.profileNames) {
		if !sameExpansion(cur, cand, Request{Profile: p}) {
			d.Profiles = append(d.Profiles, p)
		}
	}
	return d
}

func changedFields(a, b *Tool) []string {
	var f []string
	if a.Description != b.Description {
		f = append(f, "description")
	}
	if !bytes.Equal(a.Parameters, b.Parameters) {
		f = append(f, "parameters")
	}
	if a.Permission != b.Permission {
		f = append(f, "permission")
	}
	if a.Available != b.Available {
		f = append(f, "available")
	}
	if a.Deferred != b.Deferred {
		f = append(f, "deferred")
	}
	if !bytes.Equal(a.Native.Anthropic, b.Native.Anthropic) || !bytes.Equal(a.Native.OpenAI, b.Native.OpenAI) {
		f = append(f, "native")
	}
	return f
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// sameExpansion reports whether req expands to the same tools, in the same
// order, with the same contract bytes, in both registries (the version
// aside); a request that fails in either differs unless it fails in both.
func sameExpansion(cur, cand *Registry, req Request) bool {
	a, errA := cur.Resolve(req)
	b, errB := cand.Resolve(req)
	if errA != nil || errB != nil {
		return errA != nil && errB != nil
	}
	return ContractHash("", a.Tools) == ContractHash("", b.Tools)
}
