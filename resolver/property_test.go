package resolver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// regModel is a registry drawn by rapid, kept as plain data so that a
// reference expansion can be written directly from the contract text, and
// serialized to a registry file in several orders and formats.
type regModel struct {
	version  string
	tools    []mTool
	defaults []string
	deferred []string
	resident []string // nil: absent from the file
	presets  map[string][]string
	profiles map[string]mProfile
}

type mTool struct {
	name, desc, perm string
	avail            bool
	params           map[string]any
}

type mProfile struct {
	tools   []string // nil: absent
	preset  string
	allowed []string
}

func (m *regModel) tool(name string) (mTool, bool) {
	for _, t := range m.tools {
		if t.name == name {
			return t, true
		}
	}
	return mTool{}, false
}

// isDeferred is the contract's deferral mark: not in RESIDENT_TOOLS (as
// given, or derived as default_tools − deferred_default_tools), never
// tool_search.
func (m *regModel) isDeferred(name string) bool {
	if name == ToolSearch {
		return false
	}
	if m.resident != nil {
		return !slices.Contains(m.resident, name)
	}
	return !slices.Contains(m.defaults, name) || slices.Contains(m.deferred, name)
}

// refReach is the reachability rule written literally: a set with a deferred tool also
// holds tool_search, unless the intent disabled tool_search, which drops
// the deferred tools instead.
func refReach(m *regModel, names []string, in *Intent) []string {
	if slices.Contains(names, ToolSearch) || !slices.ContainsFunc(names, m.isDeferred) {
		return names
	}
	if in != nil && slices.Contains(in.Disabled, ToolSearch) {
		return slices.DeleteFunc(slices.Clone(names), m.isDeferred)
	}
	return append(names, ToolSearch)
}

func (m *regModel) names() []string {
	out := make([]string, len(m.tools))
	for i, t := range m.tools {
		out[i] = t.name
	}
	sort.Strings(out)
	return out
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// subseq draws an ordered selection of distinct elements of pool.
func subseq(t *rapid.T, pool []string, label string) []string {
	if len(pool) == 0 {
		return []string{}
	}
	perm := rapid.Permutation(pool).Draw(t, label+"-perm")
	n := rapid.IntRange(0, len(perm)).Draw(t, label+"-n")
	return append([]string{}, perm[:n]...)
}

func drawModel(t *rapid.T) *regModel {
	m := &regModel{version: rapid.SampledFrom([]string{"v1", "builtin-2026.12.1", "kv:42"}).Draw(t, "version")}
	n := rapid.IntRange(0, 20).Draw(t, "ntools")
	names := []string{ToolSearch}
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("t%d", i))
	}
	if rapid.Bool().Draw(t, "has-web-search") {
		names = append(names, WebSearch)
	}
	names = rapid.Permutation(names).Draw(t, "tool-order")
	for _, name := range names {
		params := map[string]any{"type": "object"}
		if k := rapid.IntRange(0, 3).Draw(t, "nprops"); k > 0 {
			props := map[string]any{}
			var req []any
			for j := 0; j < k; j++ {
				p := fmt.Sprintf("p%d", j)
				props[p] = map[string]any{"type": rapid.SampledFrom([]string{"string", "integer", "boolean"}).Draw(t, "ptype"), "description": "a <b> & \"c\"\n"}
				if rapid.Bool().Draw(t, "required") {
					req = append(req, p)
				}
			}
			params["properties"] = props
			if len(req) > 0 {
				params["required"] = req
			}
		}
		m.tools = append(m.tools, mTool{
			name:   name,
			desc:   "Tool " + name + " does things.",
			perm:   rapid.SampledFrom([]string{"", "read", "write", "exec"}).Draw(t, "perm"),
			avail:  name == ToolSearch || rapid.IntRange(0, 4).Draw(t, "avail") > 0,
			params: params,
		})
	}
	var pool []string
	for _, name := range names {
		if name != WebSearch {
			pool = append(pool, name)
		}
	}
	m.defaults = subseq(t, pool, "defaults")
	if !slices.Contains(m.defaults, ToolSearch) {
		m.defaults = append(m.defaults, ToolSearch)
	}
	for _, name := range m.defaults {
		if name != ToolSearch && rapid.IntRange(0, 3).Draw(t, "deferred") == 0 {
			m.deferred = append(m.deferred, name)
		}
	}
	if rapid.Bool().Draw(t, "explicit-resident") {
		m.resident = []string{}
		for _, name := range subseq(t, names, "resident") {
			if !slices.Contains(m.deferred, name) {
				m.resident = append(m.resident, name)
			}
		}
	}
	m.presets = map[string][]string{}
	for _, p := range subseq(t, []string{"full", "research", "coding", "empty"}, "presets") {
		m.presets[p] = subseq(t, names, "preset-"+p)
	}
	m.profiles = map[string]mProfile{}
	for _, p := range subseq(t, []string{"coder", "researcher", "assistant", "plain"}, "profiles") {
		switch rapid.IntRange(0, 3).Draw(t, "profile-kind") {
		case 0:
			m.profiles[p] = mProfile{tools: subseq(t, names, "profile-tools")}
		case 1:
			if len(m.presets) > 0 {
				m.profiles[p] = mProfile{preset: rapid.SampledFrom(sortedMapKeys(m.presets)).Draw(t, "profile-preset")}
			} else {
				m.profiles[p] = mProfile{}
			}
		case 2:
			allowed := subseq(t, m.defaults, "profile-allowed")
			if len(allowed) == 0 {
				allowed = []string{ToolSearch}
			}
			m.profiles[p] = mProfile{allowed: allowed}
		default:
			m.profiles[p] = mProfile{}
		}
	}
	return m
}

// jsonWriter serializes a model. With shuffle set, object keys come in a
// drawn order and whitespace varies; otherwise keys are sorted.
type jsonWriter struct {
	t       *rapid.T
	shuffle bool
	b       strings.Builder
}

func (w *jsonWriter) ws() {
	if w.shuffle && rapid.Bool().Draw(w.t, "ws") {
		w.b.WriteString(rapid.SampledFrom([]string{" ", "\n  ", "\t"}).Draw(w.t, "wschars"))
	}
}

func (w *jsonWriter) order(keys []string) []string {
	sort.Strings(keys)
	if w.shuffle {
		return rapid.Permutation(keys).Draw(w.t, "key-order")
	}
	return keys
}

func (w *jsonWriter) value(v any) {
	w.ws()
	switch x := v.(type) {
	case string:
		b, _ := json.Marshal(x)
		w.b.Write(b)
	case bool:
		w.b.WriteString(strconv.FormatBool(x))
	case []string:
		w.b.WriteByte('[')
		for i, s := range x {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(s)
		}
		w.b.WriteByte(']')
	case []any:
		w.b.WriteByte('[')
		for i, s := range x {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(s)
		}
		w.b.WriteByte(']')
	case map[string]any:
		w.b.WriteByte('{')
		for i, k := range w.order(sortedMapKeys(x)) {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(k)
			w.ws()
			w.b.WriteByte(':')
			w.value(x[k])
		}
		w.b.WriteByte('}')
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
	w.ws()
}

// encode writes the model as a registry file. With shuffle, the tools array
// is permuted too: the lists (defaults, presets, profiles) stay the same.
func (m *regModel) encode(t *rapid.T, shuffle bool) []byte {
	tools := make([]any, 0, len(m.tools))
	order := m.tools
	if shuffle {
		order = rapid.Permutation(m.tools).Draw(t, "file-tool-order")
	}
	for _, tl := range order {
		o := map[string]any{"name": tl.name, "description": tl.desc, "parameters": tl.params, "available": tl.avail}
		if tl.perm != "" {
			o["permission"] = tl.perm
		}
		tools = append(tools, o)
	}
	doc := map[string]any{"version": m.version, "tools": tools, "default_tools": m.defaults}
	if len(m.deferred) > 0 {
		doc["deferred_default_tools"] = m.deferred
	}
	if m.resident != nil {
		doc["resident_tools"] = m.resident
	}
	presets := map[string]any{}
	for k, v := range m.presets {
		presets[k] = v
	}
	doc["presets"] = presets
	profiles := map[string]any{}
	for k, p := range m.profiles {
		o := map[string]any{}
		if p.tools != nil {
			o["tools"] = p.tools
		}
		if p.preset != "" {
			o["preset"] = p.preset
		}
		if len(p.allowed) > 0 {
			o["allowed"] = p.allowed
		}
		profiles[k] = o
	}
	doc["profiles"] = profiles
	w := &jsonWriter{t: t, shuffle: shuffle}
	w.value(doc)
	return []byte(w.b.String())
}

func drawTri(t *rapid.T, label string) *bool {
	switch rapid.IntRange(0, 2).Draw(t, label) {
	case 0:
		return nil
	case 1:
		return bp(false)
	default:
		return bp(true)
	}
}

func drawNames(t *rapid.T, pool []string, max int, label string) []string {
	n := rapid.IntRange(0, max).Draw(t, label+"-n")
	out := make([]string, n)
	for i := range out {
		out[i] = rapid.SampledFrom(pool).Draw(t, label)
	}
	return out
}

func drawIntent(t *rapid.T, m *regModel, label string) Intent {
	pool := append(m.names(), "ghost", WebSearch)
	in := Intent{Enabled: drawTri(t, label+"-enabled"), WebSearch: drawTri(t, label+"-ws")}
	if rapid.Bool().Draw(t, label+"-has-preset") {
		in.Preset = rapid.SampledFrom(append(sortedMapKeys(m.presets), "nope")).Draw(t, label+"-preset")
	}
	in.Disabled = drawNames(t, pool, 3, label+"-disabled")
	if rapid.IntRange(0, 2).Draw(t, label+"-has-picked") == 0 {
		in.Picked = drawNames(t, pool, 5, label+"-picked")
	}
	return in
}

func drawRequest(t *rapid.T, m *regModel) Request {
	pool := append(m.names(), "ghost", WebSearch)
	req := Request{Session: drawIntent(t, m, "session")}
	req.Override.Kind = OverrideKind(rapid.SampledFrom([]int{0, 0, 0, 1, 2, 2, 3, 3, 4}).Draw(t, "kind"))
	if req.Override.Kind == OverrideIntent || rapid.IntRange(0, 3).Draw(t, "noise") == 0 {
		req.Override.Intent = drawIntent(t, m, "override")
		req.Override.Allowed = drawNames(t, pool, 3, "allowed")
	}
	if req.Override.Kind == OverrideNames {
		req.Override.Names = drawNames(t, pool, 4, "names")
	}
	req.Profile = rapid.SampledFrom(append(append([]string{"", ""}, sortedMapKeys(m.profiles)...), "nope")).Draw(t, "profile")
	return req
}

// refResolve is the contract's expansion written literally over strings:
// the reference that Resolve must match.
func refResolve(m *regModel, req Request) (names, unknown []string, source string, err error) {
	avail := func(name string) bool { t, ok := m.tool(name); return ok && t.avail }
	addUnknown := func(name string) {
		if !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	var list []string
	var in *Intent
	var allowed []string
	switch req.Override.Kind {
	case OverrideEmpty:
		return nil, nil, SourceOverrideEmpty, nil
	case OverrideNames:
		if len(req.Override.Names) == 0 {
			return nil, nil, SourceOverrideEmpty, nil
		}
		for _, n := range req.Override.Names {
			if !avail(n) {
				addUnknown(n)
			} else if !slices.Contains(list, n) {
				list = append(list, n)
			}
		}
		return refReach(m, list, nil), unknown, SourceOverrideNames, nil
	case OverrideIntent:
		in, allowed, source = &req.Override.Intent, req.Override.Allowed, SourceOverrideIntent
	case OverrideNone:
		in, source = &req.Session, SourceSessionIntent
		if in.Enabled == nil && in.WebSearch == nil && in.Preset == "" && len(in.Disabled) == 0 && len(in.Picked) == 0 {
			source = SourceDefaults
			if req.Profile != "" {
				source = SourceProfile
			}
		}
	default:
		return nil, nil, "", ErrInvalidRequest
	}
	wsOn := in.WebSearch != nil && *in.WebSearch
	if len(allowed) > 0 { // Allowed with a base other than the defaults is refused
		off := in.Enabled != nil && !*in.Enabled
		p, known := m.profiles[req.Profile]
		profileList := in.Enabled == nil && req.Profile != "" && known && (p.tools != nil || p.preset != "")
		if off || len(in.Picked) > 0 || in.Preset != "" || profileList {
			return nil, nil, "", ErrInvalidRequest
		}
	}
	if in.Enabled != nil && !*in.Enabled {
		if wsOn && avail(WebSearch) {
			return refReach(m, []string{WebSearch}, in), nil, source, nil
		}
		return nil, nil, source, nil
	}
	filterDefaults := func(allowLists ...[]string) []string {
		var out []string
		for _, d := range m.defaults {
			ok := true
			for _, a := range allowLists {
				if len(a) > 0 && !slices.Contains(a, d) {
					ok = false
				}
			}
			if ok {
				out = append(out, d)
			}
		}
		return out
	}
	switch {
	case len(in.Picked) > 0:
		for _, n := range in.Picked {
			if !avail(n) {
				addUnknown(n)
			} else {
				list = append(list, n)
			}
		}
	case in.Preset != "":
		p, ok := m.presets[in.Preset]
		if !ok {
			return nil, nil, "", ErrUnknownPreset
		}
		list = p
	case in.Enabled == nil && req.Profile != "":
		p, ok := m.profiles[req.Profile]
		if !ok {
			return nil, nil, "", ErrUnknownProfile
		}
		switch {
		case p.tools != nil:
			list = p.tools
		case p.preset != "":
			list = m.presets[p.preset]
		default:
			list = filterDefaults(p.allowed, allowed)
		}
	default:
		list = filterDefaults(allowed)
	}
	var out []string
	for _, n := range list {
		if slices.Contains(in.Disabled, n) {
			continue
		}
		out = append(out, n)
	}
	if wsOn && !slices.Contains(out, WebSearch) {
		out = append(out, WebSearch)
	}
	var final []string
	for _, n := range out {
		if avail(n) && !slices.Contains(final, n) {
			final = append(final, n)
		}
	}
	return refReach(m, final, in), unknown, source, nil
}

func loadModel(t *rapid.T, m *regModel, shuffle bool) *Registry {
	data := m.encode(t, shuffle)
	r, err := Load(data)
	if err != nil {
		t.Fatalf("load generated registry: %v\n%s", err, data)
	}
	return r
}

// Resolve matches the reference expansion on
// random registries and random requests.
func TestPropResolveMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawModel(t)
		r := loadModel(t, m, false)
		for i := 0; i < 5; i++ {
			req := drawRequest(t, m)
			wantNames, wantUnknown, wantSource, wantErr := refResolve(m, req)
			res, err := r.Resolve(req)
			if wantErr != nil {
				if !errors.Is(err, wantErr) {
					t.Fatalf("request %+v: error %v; want %v", req, err, wantErr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("request %+v: %v", req, err)
			}
			if got := toolNames(res.Tools); !eqNames(got, wantNames) || !eqNames(res.Unknown, wantUnknown) || res.Source != wantSource {
				t.Fatalf("request %+v:\ngot  %q unknown %q source %s\nwant %q unknown %q source %s", req, got, res.Unknown, res.Source, wantNames, wantUnknown, wantSource)
			}
		}
	})
}

// The same request against the same registry — loaded again, loaded
// from a file with tools, keys and whitespace in another order, cached or
// not — gives the same resolution and the same rendered bytes.
func TestPropDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawModel(t)
		r1 := loadModel(t, m, false)
		r2 := loadModel(t, m, true)
		r3 := loadModel(t, m, false)
		for i := 0; i < 5; i++ {
			req := drawRequest(t, m)
			a, errA := r1.ResolveUncached(req)
			b, errB := r1.Resolve(req)
			c, errC := r1.Resolve(req)
			d, errD := r2.Resolve(req)
			e, errE := r3.ResolveUncached(req)
			if fmt.Sprint(errA) != fmt.Sprint(errB) || fmt.Sprint(errA) != fmt.Sprint(errD) || fmt.Sprint(errA) != fmt.Sprint(errE) || errB != errC {
				t.Fatalf("errors differ: %v / %v / %v / %v", errA, errB, errD, errE)
			}
			if errA != nil {
				continue
			}
			if b != c {
				t.Fatalf("cached resolution is not the same pointer")
			}
			for _, x := range []*Resolution{b, d, e} {
				if !reflect.DeepEqual(a, x) {
					t.Fatalf("resolutions differ:\n%+v\n%+v", a, x)
				}
			}
			if !bytes.Equal(RenderAnthropic(a.Tools), RenderAnthropic(d.Tools)) || !bytes.Equal(RenderOpenAI(a.Tools), RenderOpenAI(d.Tools)) {
				t.Fatalf("rendered bytes differ")
			}
			for _, name := range append(m.names(), "ghost") {
				if x, y := r1.Explain(req, name), r2.Explain(req, name); x != y {
					t.Fatalf("explanations differ: %+v vs %+v", x, y)
				}
			}
		}
	})
}

// Invariants of every resolution.
func TestPropResolutionInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawModel(t)
		r := loadModel(t, m, false)
		req := drawRequest(t, m)
		res, err := r.Resolve(req)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, tool := range res.Tools {
			reg, ok := r.Tool(tool.Name)
			if !ok || !tool.Available || seen[tool.Name] || ToolHash(tool) != ToolHash(reg) {
				t.Fatalf("bad tool %+v in %q", tool, toolNames(res.Tools))
			}
			seen[tool.Name] = true
		}
		for _, u := range res.Unknown {
			if tool, ok := r.Tool(u); ok && tool.Available {
				t.Fatalf("available tool %q reported unknown", u)
			}
		}
		if res.ContractHash != ContractHash(r.Version(), res.Tools) || res.RegistryVersion != r.Version() {
			t.Fatalf("contract hash or version mismatch")
		}
	})
}

// Tool_search is never deferred, under any registry (guard 1: the load
// marks it resident whatever the lists; guard 2: IsResident).
func TestPropToolSearchNeverDeferred(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawModel(t)
		r := loadModel(t, m, rapid.Bool().Draw(t, "shuffle"))
		tool, ok := r.Tool(ToolSearch)
		if !ok || tool.Deferred || !r.IsResident(ToolSearch) {
			t.Fatalf("tool_search deferred: %+v", tool)
		}
		for _, tl := range r.Tools() {
			if tl.Deferred == r.IsResident(tl.Name) {
				t.Fatalf("%s: deferred=%v but resident=%v", tl.Name, tl.Deferred, r.IsResident(tl.Name))
			}
		}
		res, err := r.Resolve(drawRequest(t, m))
		if err == nil {
			for _, tl := range res.Tools {
				if tl.Name == ToolSearch && tl.Deferred {
					t.Fatalf("resolved tool_search deferred")
				}
			}
		}
	})
}

// Explain's Included agrees with Resolve for every tool.
func TestPropExplainAgreesWithResolve(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawModel(t)
		r := loadModel(t, m, false)
		req := drawRequest(t, m)
		res, err := r.Resolve(req)
		for _, name := range append(m.names(), "ghost") {
			ex := r.Explain(req, name)
			if ex.Tool != name || ex.Rule == "" || ex.Detail == "" {
				t.Fatalf("incomplete explanation %+v", ex)
			}
			in := err == nil && slices.Contains(toolNames(res.Tools), name)
			if ex.Included != in {
				t.Fatalf("request %+v tool %s: explain %+v; resolve has it: %v (%q)", req, name, ex, in, toolNames(res.Tools))
			}
		}
	})
}

// Resolve and Explain never panic, whatever
// the strings and kinds of the request.
func TestPropNeverPanics(t *testing.T) {
	regs := []*Registry{Default(), mustLoadFile(t, "small_registry.json"), {}}
	str := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"", ToolSearch, WebSearch, "read_file", "full", "coder", "assistant"}))
	list := rapid.OneOf(rapid.Just[[]string](nil), rapid.SliceOf(str))
	tri := rapid.SampledFrom([]*bool{nil, bp(false), bp(true)})
	intent := rapid.Custom(func(t *rapid.T) Intent {
		return Intent{Enabled: tri.Draw(t, "e"), WebSearch: tri.Draw(t, "w"), Preset: str.Draw(t, "p"), Disabled: list.Draw(t, "d"), Picked: list.Draw(t, "k")}
	})
	rapid.Check(t, func(t *rapid.T) {
		req := Request{
			Override: Override{Kind: OverrideKind(rapid.Uint8().Draw(t, "kind")), Intent: intent.Draw(t, "oi"), Allowed: list.Draw(t, "a"), Names: list.Draw(t, "n")},
			Session:  intent.Draw(t, "si"),
			Profile:  str.Draw(t, "profile"),
		}
		for _, r := range regs {
			res, err := r.Resolve(req)
			if (res == nil) == (err == nil) {
				t.Fatalf("got %v, %v", res, err)
			}
			_ = r.Explain(req, str.Draw(t, "tool"))
		}
	})
}

// Strings are escaped exactly as encoding/json does with HTML escaping
// off, so rendered bytes are valid JSON that decodes to the input.
func TestPropJSONStringEscaping(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '\n', '\b', '\f', 0, 0x1f, 0x7f, '<', '&', '\u2028', '\u2029', 'é', '\uFFFD'})),
			rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) })).Draw(t, "s")
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(buf.String(), "\n")
		if got := string(appendJSONString(nil, s)); got != want {
			t.Fatalf("appendJSONString(%q) = %s; want %s", s, got, want)
		}
	})
}
