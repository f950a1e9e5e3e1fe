package resolver

import (
	"crypto/sha256"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/toolintent/engine/internal/toolname"
)

// MCPPrefix starts the name of a tool that belongs to a namespace (an MCP
// server): mcp__<namespace>__<tool>, the form MCP clients give the tools
// of a server.
const MCPPrefix = "mcp__"

// NamespaceOf splits a namespaced tool name mcp__<namespace>__<tool> into
// its namespace and the tool's name within it. ok is false for a name
// outside every namespace (read_file).
func NamespaceOf(name string) (ns, short string, ok bool) {
	rest, found := strings.CutPrefix(name, MCPPrefix)
	if !found {
		return "", "", false
	}
	ns, short, found = strings.Cut(rest, "__")
	if !found || ns == "" || short == "" {
		return "", "", false
	}
	return ns, short, true
}

// Namespace is a group of tools, the tools of one MCP server: their names
// start with mcp__<name>__. OpenAI renderings group them in a namespace,
// and a catalog too large to list every name lists namespaces instead.
type Namespace struct {
	// Name is the namespace (server) name.
	Name string `json:"name"`
	// Description says in one line what the server's tools do; it is shown
	// for the namespace and searched with its tools.
	Description string `json:"description,omitempty"`
	// Defer, when set, is the deferral flag of every tool of the
	// namespace that has no flag of its own: true defers them, false keeps
	// them resident. Nil leaves them to the lists (RESIDENT_TOOLS) and to
	// auto_defer.
	Defer *bool `json:"defer,omitempty"`
}

// AutoDefer is deferral by token budget: when the resident tools of a
// resolution would take more than MaxShare of a ContextWindow of tokens,
// the largest tools that carry no explicit decision (no defer flag of
// their own or of their namespace, not named in an explicit
// resident_tools list) are deferred, largest first, until they fit.
type AutoDefer struct {
	// ContextWindow is the model's context window, in tokens.
	ContextWindow int `json:"context_window"`
	// MaxShare is the share of the context window the resident tools may
	// take, above 0 and at most 1.
	MaxShare float64 `json:"max_share"`
}

// Budget returns the token budget of the resident tools, 0 for none.
func (a AutoDefer) Budget() int {
	if a.ContextWindow <= 0 || a.MaxShare <= 0 {
		return 0
	}
	return int(float64(a.ContextWindow) * a.MaxShare)
}

// DefaultCatalogMaxTokens is the catalog budget when the registry sets
// none: above it the catalog lists namespaces with counts instead of
// every name.
const DefaultCatalogMaxTokens = 2000

var namespaceKeys = []string{"description", "defer"}
var autoDeferKeys = []string{"context_window", "max_share"}

// namespaces reads the "namespaces" section.
func (l *loader) namespaces(r *Registry, n *jnode) {
	r.namespaces = map[string]*Namespace{}
	r.namespaceNames = []string{}
	if n == nil || n.kind == jNull {
		return
	}
	if n.kind != jObject {
		l.addf(`namespaces: is %s; want an object of namespace name to {"description":..., "defer":...}`, n.kind)
		return
	}
	present := map[string]bool{}
	for i := range r.tools {
		if ns, _, ok := NamespaceOf(r.tools[i].Name); ok {
			present[ns] = true
		}
	}
	for _, k := range sortedKeys(n) {
		name, v := n.keys[k], n.vals[k]
		path := "namespaces." + name
		if !toolname.Valid(name) || strings.Contains(name, "__") {
			l.addf("namespaces: name %q must match %s without \"__\"; rename it", name, toolname.Pattern)
			continue
		}
		if v.kind != jObject {
			l.addf(`%s: is %s; want an object such as {"description":"GitHub issues and pull requests","defer":true}`, path, v.kind)
			continue
		}
		l.unknownKeys(path, v, namespaceKeys)
		ns := &Namespace{Name: name}
		if d := v.get("description"); d != nil {
			if s, ok := l.str(path+".description", d); ok {
				ns.Description = s
			}
		}
		if d := v.get("defer"); d != nil {
			if d.kind != jBool {
				l.addf("%s.defer: is %s; want true or false", path, d.kind)
			} else {
				b := d.b
				ns.Defer = &b
			}
		}
		if !present[name] {
			l.addf("%s: no tool is named %s%s__...; fix the name or remove it", path, MCPPrefix, name)
			continue
		}
		r.namespaces[name] = ns
		r.namespaceNames = append(r.namespaceNames, name)
	}
}

// autoDeferConfig reads "auto_defer" and "catalog_max_tokens".
func (l *loader) autoDeferConfig(r *Registry, root *jnode) {
	r.catalogMaxTokens = DefaultCatalogMaxTokens
	if n := root.get("catalog_max_tokens"); n != nil {
		if v, ok := n.intValue(); !ok || v < 100 || v > 1_000_000 {
			l.addf("catalog_max_tokens: is %s; want an integer from 100 to 1000000", describe(n))
		} else {
			r.catalogMaxTokens = int(v)
		}
	}
	n := root.get("auto_defer")
	if n == nil || n.kind == jNull {
		return
	}
	if n.kind != jObject {
		l.addf(`auto_defer: is %s; want {"context_window":200000,"max_share":0.1}`, n.kind)
		return
	}
	l.unknownKeys("auto_defer", n, autoDeferKeys)
	var a AutoDefer
	if v := n.get("context_window"); v == nil {
		l.addf("auto_defer.context_window: missing; set the model's context window in tokens, such as 200000")
	} else if w, ok := v.intValue(); !ok || w < 1000 || w > 100_000_000 {
		l.addf("auto_defer.context_window: is %s; want an integer from 1000 to 100000000 (tokens)", describe(v))
	} else {
		a.ContextWindow = int(w)
	}
	if v := n.get("max_share"); v == nil {
		l.addf("auto_defer.max_share: missing; set the share of the context window resident tools may take, such as 0.1")
	} else if f, ok := v.floatValue(); !ok || f <= 0 || f > 1 {
		l.addf("auto_defer.max_share: is %s; want a number above 0 and at most 1", describe(v))
	} else {
		a.MaxShare = f
	}
	r.autoDefer = a
}

// markDeferral sets every tool's deferral mark and what auto_defer
// may change: tool_search is never deferred (guard 1); a tool's own
// defer flag wins, then its namespace's flag, then RESIDENT_TOOLS. Tools
// with no explicit decision (no flag, not in an explicit resident_tools
// list) are the ones auto_defer may defer when they are resident.
func (r *Registry) markDeferral(explicitResident bool) {
	r.resident = make([]bool, len(r.tools))
	for _, name := range r.residentList {
		r.resident[r.index[name]] = true
	}
	r.eligible = make(bitset, (len(r.tools)+63)/64)
	r.cost = make([]int32, len(r.tools))
	for i := range r.tools {
		t := &r.tools[i]
		if _, _, ok := NamespaceOf(t.Name); ok {
			r.hasNamespaced = true
		}
		r.cost[i] = int32(EstimateToolTokens(t))
		decided := false
		switch {
		case t.Name == ToolSearch:
			t.Deferred, decided = false, true
		case r.toolFlag[i] != 0:
			t.Deferred, decided = r.toolFlag[i] > 0, true
		default:
			t.Deferred = !r.resident[i]
			if ns, _, ok := NamespaceOf(t.Name); ok {
				if e := r.namespaces[ns]; e != nil && e.Defer != nil {
					t.Deferred, decided = *e.Defer, true
				}
			}
			if explicitResident && r.resident[i] {
				decided = true
			}
		}
		if !decided && !t.Deferred {
			r.eligible.set(int32(i))
		}
	}
}

// Namespaces returns the registry's namespaces, sorted by name (copies).
func (r *Registry) Namespaces() []Namespace {
	out := make([]Namespace, 0, len(r.namespaceNames))
	for _, n := range r.namespaceNames {
		out = append(out, *r.namespaces[n])
	}
	return out
}

// Namespace returns the named namespace (a copy).
func (r *Registry) Namespace(name string) (Namespace, bool) {
	ns, ok := r.namespaces[name]
	if !ok {
		return Namespace{}, false
	}
	return *ns, true
}

// AutoDefer returns the registry's deferral-by-budget setting (zero: off).
func (r *Registry) AutoDefer() AutoDefer { return r.autoDefer }

// CatalogMaxTokens returns the catalog budget: above it a catalog
// lists namespaces with counts instead of every name.
func (r *Registry) CatalogMaxTokens() int {
	if r.catalogMaxTokens == 0 {
		return DefaultCatalogMaxTokens
	}
	return r.catalogMaxTokens
}

// ToolDeferFlag returns a tool's own deferral flag as the file set it: nil
// when it has none.
func (r *Registry) ToolDeferFlag(name string) *bool {
	i, ok := r.index[name]
	if !ok || r.toolFlag[i] == 0 {
		return nil
	}
	b := r.toolFlag[i] > 0
	return &b
}

// budgetDefer decides deferral by budget for one expansion (auto_defer):
// when the resident tools of out cost more than the budget, it defers
// eligible tools, largest first (ties: registry order), until they fit or
// none is left. It returns the deferred registry indices as a set, or nil
// when nothing is deferred. tool_search's cost counts as soon as anything
// is deferred, then brings it in.
func (r *Registry) budgetDefer(out []int32) bitset {
	budget := r.autoDefer.Budget()
	if budget <= 0 {
		return nil
	}
	total := 0
	hasSearch := false
	var cand []int32
	for _, i := range out {
		if r.tools[i].Deferred {
			continue
		}
		total += int(r.cost[i])
		if i == r.toolSearch-1 {
			hasSearch = true
		}
		if r.eligible.has(i) {
			cand = append(cand, i)
		}
	}
	if total <= budget || len(cand) == 0 {
		return nil
	}
	if !hasSearch && r.toolSearch > 0 {
		total += int(r.cost[r.toolSearch-1])
	}
	slices.SortStableFunc(cand, func(a, b int32) int { return int(r.cost[b] - r.cost[a]) })
	set := make(bitset, (len(r.tools)+63)/64)
	for _, i := range cand {
		if total <= budget {
			break
		}
		set.set(i)
		total -= int(r.cost[i])
	}
	return set
}

// copyBudgeted copies the tools of out into dst with the deferral marks
// budgetDefer set, and writes their contract digests to h: a tool deferred
// by budget hashes with its mark, so the contract says how it was sent.
func (r *Registry) copyBudgeted(dst []Tool, out []int32, auto bitset, h io.Writer) {
	for k, i := range out {
		dst[k] = r.tools[i]
		if auto.has(i) {
			dst[k].Deferred = true
			d := toolDigest(&dst[k])
			h.Write(d[:])
			continue
		}
		h.Write(r.digests[int(i)*sha256.Size : (int(i)+1)*sha256.Size])
	}
}

// namespacesOf returns the namespaces the tools belong to, sorted by name.
func (r *Registry) namespacesOf(tools []Tool) []Namespace {
	if len(r.namespaceNames) == 0 && !r.hasNamespaced {
		return nil
	}
	return namespacesIn(tools, func(name string) *Namespace { return r.namespaces[name] })
}

// namespacesIn returns the namespaces of the namespaced tools, sorted by
// name, each as lookup gives it (or with its name alone).
func namespacesIn(tools []Tool, lookup func(string) *Namespace) []Namespace {
	var names []string
	seen := map[string]bool{}
	last := ""
	for i := range tools {
		ns, _, ok := NamespaceOf(tools[i].Name)
		if !ok || ns == last || seen[ns] { // tools of a server are usually adjacent
			continue
		}
		seen[ns], last = true, ns
		names = append(names, ns)
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	out := make([]Namespace, len(names))
	for k, n := range names {
		if e := lookup(n); e != nil {
			out[k] = *e
		} else {
			out[k] = Namespace{Name: n}
		}
	}
	return out
}

// intValue reads a number node with no fractional part.
func (n *jnode) intValue() (int64, bool) {
	f, ok := n.floatValue()
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// floatValue reads a number node.
func (n *jnode) floatValue() (float64, bool) {
	if n.kind != jNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(n.s, 64)
	return f, err == nil
}
