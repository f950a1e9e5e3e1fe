package checkpoint

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"pgregory.net/rapid"
)

// world is a random registry file, a request naming some of its tools, and
// a loaded set drawn from the deferred tools of the resolution.
type world struct {
	file  regFile
	names []string // the request: exactly these tools, in this order
	res   *resolver.Resolution
}

func paramsFor(prop string) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"` + prop + `":{"type":"string"}}}`)
}

// drawWorld draws a registry of 1–10 tools plus tool_search, a random
// RESIDENT_TOOLS subset, and a request for a random ordered subset.
func drawWorld(t *rapid.T) world {
	names := rapid.SliceOfNDistinct(
		rapid.StringMatching(`[a-z][a-z0-9_]{0,8}`).Filter(func(s string) bool {
			return s != resolver.ToolSearch && s != resolver.WebSearch
		}), 1, 10, rapid.ID[string]).Draw(t, "names")
	names = append(names, resolver.ToolSearch)
	names = rapid.Permutation(names).Draw(t, "order")

	f := regFile{Version: rapid.StringMatching(`v[0-9]{1,3}`).Draw(t, "version")}
	for i, name := range names {
		f.Tools = append(f.Tools, toolFile{
			Name:        name,
			Description: rapid.StringMatching(`[a-z][a-z ]{0,20}`).Draw(t, "description"),
			Permission:  rapid.StringMatching(`[a-z]{0,6}`).Draw(t, "permission"),
			Parameters:  paramsFor(rapid.StringMatching(`[a-z]{1,6}`).Draw(t, "param")),
		})
		if name == resolver.ToolSearch || rapid.Bool().Draw(t, "default") {
			f.DefaultTools = append(f.DefaultTools, name)
		}
		if name == resolver.ToolSearch || rapid.Bool().Draw(t, "resident") {
			f.ResidentTools = append(f.ResidentTools, names[i])
		}
	}
	order := rapid.Permutation(names).Draw(t, "request order")
	req := order[:rapid.IntRange(0, len(order)).Draw(t, "request size")]
	return world{file: f, names: req, res: resolveNames(t, load(t, f), req...)}
}

// deferredOf returns the deferred tools of res, in resolution order.
func deferredOf(res *resolver.Resolution) []string {
	var out []string
	for _, tool := range res.Tools {
		if tool.Deferred && tool.Name != resolver.ToolSearch {
			out = append(out, tool.Name)
		}
	}
	return out
}

// drawLoaded draws a loaded set (with repeats) from the deferred tools.
func drawLoaded(t *rapid.T, res *resolver.Resolution) []string {
	d := deferredOf(res)
	if len(d) == 0 {
		return nil
	}
	return rapid.SliceOfN(rapid.SampledFrom(d), 0, 2*len(d)).Draw(t, "loaded")
}

func sortedSet(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Nothing is inferred and nothing is lost: for random registries
// and loaded sets, resuming a checkpoint against the same contract — the
// very resolution, a fresh load of the same registry, or after the event
// round-trips the wire codec — restores exactly the recorded set.
func TestPropertyUnchangedRestoresExactly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		loaded := drawLoaded(t, w.res)
		rec, err := New(rapid.Uint64().Draw(t, "turn"), w.res, loaded)
		if err != nil {
			t.Fatalf("New(%v): %v", loaded, err)
		}
		want := sortedSet(loaded)

		fresh := resolveNames(t, load(t, w.file), w.names...)
		b, err := events.Encode(events.New("s", "c", "a", rec.Clone()))
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		env, err := events.Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		wire := env.Payload.(events.CheckpointRecorded).Clone()

		for _, c := range []struct {
			name string
			rec  Record
			res  *resolver.Resolution
		}{{"same", rec, w.res}, {"fresh registry", rec, fresh}, {"wire", wire, fresh}} {
			out := Resume(&c.rec, c.res)
			if !out.OK || out.Err() != nil || out.Changes != nil || !slices.Equal(out.Restored, want) {
				t.Fatalf("%s: Resume = %+v, want OK restoring %v", c.name, out, want)
			}
		}
	})
}

// A loaded name that is resident in, or absent from, the contract is
// refused, and the error names it.
func TestPropertyNewRefusesNonDeferred(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		var candidates []string
		for _, tool := range w.file.Tools {
			if !slices.Contains(deferredOf(w.res), tool.Name) {
				candidates = append(candidates, tool.Name) // resident, or not requested
			}
		}
		bad := rapid.SampledFrom(append(candidates, "zz_not_a_tool")).Draw(t, "bad")
		loaded := append(drawLoaded(t, w.res), bad)
		_, err := New(1, w.res, loaded)
		if !errors.Is(err, ErrNotInContract) || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Fatalf("New(%v) error = %v, want ErrNotInContract naming %q", loaded, err, bad)
		}
	})
}

// A contract differing from the recorded one in any single byte of
// one of its tools (description, permission, schema, or the deferral mark)
// names exactly that tool as changed, drops that tool if it was loaded
// (changed, or now resident), and restores every other loaded tool.
func TestPropertyChangedToolDropsOnlyThatTool(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		if len(w.res.Tools) == 0 {
			return // an empty contract has no tool byte to change
		}
		loaded := drawLoaded(t, w.res)
		rec, err := New(1, w.res, loaded)
		if err != nil {
			t.Fatalf("New(%v): %v", loaded, err)
		}

		target := rapid.SampledFrom(w.res.Names()).Draw(t, "changed tool")
		f := w.file
		f.Tools = slices.Clone(w.file.Tools)
		f.ResidentTools = slices.Clone(w.file.ResidentTools)
		i := toolIndex(t, f, target)
		fields := []string{"description", "permission", "schema"}
		if target != resolver.ToolSearch {
			fields = append(fields, "deferral mark")
		}
		switch field := rapid.SampledFrom(fields).Draw(t, "field"); field {
		case "description":
			f.Tools[i].Description = changeByte(t, f.Tools[i].Description, "abcdefghijklmnopqrstuvwxyz ")
		case "permission":
			f.Tools[i].Permission = changeByte(t, f.Tools[i].Permission, "abcdefghijklmnopqrstuvwxyz")
		case "schema":
			var p struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(f.Tools[i].Parameters, &p); err != nil || len(p.Properties) != 1 {
				t.Fatalf("test schema %s: %v", f.Tools[i].Parameters, err)
			}
			for prop := range p.Properties {
				f.Tools[i].Parameters = paramsFor(changeByte(t, prop, "abcdefghijklmnopqrstuvwxyz"))
			}
		case "deferral mark":
			if j := slices.Index(f.ResidentTools, target); j >= 0 {
				f.ResidentTools = slices.Delete(f.ResidentTools, j, j+1)
			} else {
				f.ResidentTools = append(f.ResidentTools, target)
			}
		}

		current := resolveNames(t, load(t, f), w.names...)
		out := ResumeFrom(&rec, current, Sources{Recorded: w.res})
		want := slices.DeleteFunc(sortedSet(loaded), func(n string) bool { return n == target })
		wasLoaded := slices.Contains(rec.Loaded, target)
		if !slices.Equal(out.Restored, want) || out.OK == wasLoaded || (out.Err() != nil) != wasLoaded {
			t.Fatalf("Resume = %+v, want %v restored (%s loaded: %v)", out, want, target, wasLoaded)
		}
		if wasLoaded && !errors.Is(out.Err(), ErrContractChanged) {
			t.Fatalf("Err = %v, want ErrContractChanged", out.Err())
		}
		if len(out.Tools) != len(rec.Loaded) {
			t.Fatalf("Tools = %v, want one decision per loaded tool %v", out.Tools, rec.Loaded)
		}
		for _, d := range out.Tools {
			restored := d.Kind == DecisionRestored
			if restored != (d.Tool != target) || (!restored && d.Kind != DecisionChanged && d.Kind != DecisionNowResident) {
				t.Fatalf("decision %+v for changed tool %s", d, target)
			}
		}
		wantChanges := []Change{{Tool: target, Kind: ChangeSchema}}
		// A deferral mark decides whether tool_search must come along
		// with a list that does not name it, so it may appear or go too.
		before, after := slices.Contains(w.res.Names(), resolver.ToolSearch), slices.Contains(current.Names(), resolver.ToolSearch)
		switch {
		case before && !after:
			wantChanges = append(wantChanges, Change{Tool: resolver.ToolSearch, Kind: ChangeRemoved})
		case !before && after:
			wantChanges = append(wantChanges, Change{Tool: resolver.ToolSearch, Kind: ChangeAdded})
		}
		if got := kinds(out.Changes); !slices.Equal(slices.SortedFunc(slices.Values(got), cmpChange), slices.SortedFunc(slices.Values(wantChanges), cmpChange)) {
			t.Fatalf("Changes = %v, want %v", out.Changes, wantChanges)
		}
		if !strings.Contains(out.Reason, `tool "`+target+`" changed`) {
			t.Fatalf("Reason %q does not name %s", out.Reason, target)
		}
		// Without the recorded contract the decisions are the same, and
		// Changes names the target only when it was loaded.
		bare := Resume(&rec, current)
		if !slices.Equal(bare.Restored, out.Restored) || !slices.Equal(decisionKinds(bare.Tools), decisionKinds(out.Tools)) {
			t.Fatalf("loaded-only resume %+v differs from %+v", bare, out)
		}
		wantBare := []Change{{Kind: ChangeUnlisted}}
		if wasLoaded {
			wantBare = []Change{{Tool: target, Kind: ChangeSchema}}
		}
		if got := kinds(bare.Changes); !slices.Equal(got, wantBare) {
			t.Fatalf("loaded-only Changes = %v, want %v", bare.Changes, wantBare)
		}
	})
}

// changeByte returns s with one byte replaced by another byte of alphabet,
// or, when s is empty, with one byte added.
func changeByte(t *rapid.T, s, alphabet string) string {
	if s == "" {
		return alphabet[:1]
	}
	p := rapid.IntRange(0, len(s)-1).Draw(t, "byte")
	others := strings.ReplaceAll(alphabet, s[p:p+1], "")
	if p == 0 {
		others = strings.ReplaceAll(others, " ", "") // keep names starting with a letter
	}
	c := others[rapid.IntRange(0, len(others)-1).Draw(t, "new byte")]
	return s[:p] + string(c) + s[p+1:]
}

// For random registries, intents and changes, each loaded tool is
// restored exactly when the current resolution has it, deferred, with the
// per-tool hash its checkpoint recorded; the restored set is a subset of
// the recorded one that a new checkpoint against the current resolution
// accepts, and every loaded tool has one decision.
func TestPropertyPerToolRestore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		loaded := drawLoaded(t, w.res)
		rec, err := New(1, w.res, loaded)
		if err != nil {
			t.Fatalf("New(%v): %v", loaded, err)
		}
		// Another world: some tools edited, others made resident, the
		// request narrowed or reordered, the version bumped.
		f := w.file
		f.Tools = slices.Clone(w.file.Tools)
		for i := range f.Tools {
			if rapid.IntRange(0, 3).Draw(t, "edit") == 0 {
				f.Tools[i].Description += " v2"
			}
		}
		if rapid.Bool().Draw(t, "bump") {
			f.Version += "b"
		}
		names := rapid.Permutation(w.names).Draw(t, "new order")
		names = names[:rapid.IntRange(0, len(names)).Draw(t, "new size")]
		current := resolveNames(t, load(t, f), names...)

		out := Resume(&rec, current)
		recorded := map[string]string{}
		for _, e := range rec.Contract {
			recorded[e.Name] = e.Hash
		}
		var want []string
		for _, n := range rec.Loaded {
			for _, tool := range current.Tools {
				if tool.Name == n && tool.Deferred && resolver.ToolHash(tool) == recorded[n] {
					want = append(want, n)
				}
			}
		}
		if !slices.Equal(out.Restored, sortedSet(want)) {
			t.Fatalf("Restored = %v, want %v (decisions %+v)", out.Restored, want, out.Tools)
		}
		if out.OK != (len(want) == len(rec.Loaded)) || len(out.Tools) != len(rec.Loaded) {
			t.Fatalf("OK %v with %d of %d restored, %d decisions", out.OK, len(want), len(rec.Loaded), len(out.Tools))
		}
		if _, err := New(2, current, out.Restored); err != nil {
			t.Fatalf("the restored set does not checkpoint against the current contract: %v", err)
		}
		if current.ContractHash == rec.ContractHash && !out.OK {
			t.Fatalf("equal contract, not everything restored: %+v", out)
		}
	})
}
func cmpChange(a, b Change) int { return strings.Compare(a.Tool+string(a.Kind), b.Tool+string(b.Kind)) }
