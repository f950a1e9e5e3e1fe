package resolver

// Registry change impact: what a candidate registry changes
// against the one in force, before it is pushed.

import (
	"bytes"
	"slices"

	"github.com/toolintent/engine/wire"
)

// ToolChange is one tool present in both registries whose contract bytes
// differ (wire.ToolChange).
type ToolChange = wire.ToolChange

// RegistryDiff compares a candidate registry with the one in force: the
// reply registry-diff carries (wire.RegistryDiff).
type RegistryDiff = wire.RegistryDiff

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
