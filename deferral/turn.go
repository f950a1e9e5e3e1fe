package deferral

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toolintent/engine/resolver"
)

// ErrNotInTurn reports tool_search names that this turn cannot load: names
// not in the turn's frozen tool set (unknown, disabled, or added to the
// registry after the turn started). Match it with errors.Is.
var ErrNotInTurn = errors.New("tool not in this turn's tool set")

// Turn is one turn's frozen tool set and its loaded deferred set (R16).
//
// Freeze copies the resolved tools, so nothing done to the registry or the
// resolution afterwards changes the turn. The loaded set is owned by the
// Turn and changes only through Search (tool_search), which may only load
// deferred tools of the frozen set; the next Request then carries their
// real schemas in Split.Provider.
//
// A Turn is safe for concurrent use: a tool goroutine may call Search while
// the provider goroutine calls Request, Lookup, Loaded or Discovered. A
// mutex guards the loaded set; the frozen tools never change, so Lookup
// takes no lock. Returned tools share the Turn's Parameters bytes; treat
// them as read-only.
type Turn struct {
	number          uint64
	registryVersion string
	contractHash    string
	tools           []resolver.Tool // frozen copies, resolution order
	index           map[string]int  // name → position in tools; lookups only

	mu         sync.Mutex
	loaded     map[string]struct{} // deferred tools of this turn that are loaded
	discovered []string            // loaded by Search in this turn, in load order
}

// Freeze starts turn number turn from a resolution and the session's loaded
// deferred tools (R16). The tools are deep-copied. Of loaded, only names of
// deferred tools in the frozen set are kept; other names (a tool disabled
// this turn, gone from the registry, or resident) have no effect on this
// turn and are not reported by Loaded. A nil res freezes an empty turn.
func Freeze(turn uint64, res *resolver.Resolution, loaded []string) *Turn {
	t := &Turn{number: turn, loaded: make(map[string]struct{}, len(loaded))}
	if res == nil {
		return t
	}
	t.registryVersion = res.RegistryVersion
	t.contractHash = res.ContractHash
	t.tools = make([]resolver.Tool, len(res.Tools))
	t.index = make(map[string]int, len(res.Tools))
	size := 0
	for i := range res.Tools {
		size += len(res.Tools[i].Parameters)
	}
	buf := make([]byte, 0, size) // one backing array for every schema
	for i, tool := range res.Tools {
		if tool.Name == resolver.ToolSearch {
			tool.Deferred = false // guard 2 of R14
		}
		if tool.Parameters != nil {
			start := len(buf)
			buf = append(buf, tool.Parameters...)
			tool.Parameters = buf[start:len(buf):len(buf)]
		}
		t.tools[i] = tool
		if _, dup := t.index[tool.Name]; !dup {
			t.index[tool.Name] = i
		}
	}
	for _, name := range loaded {
		if i, ok := t.index[name]; ok && t.tools[i].Deferred {
			t.loaded[name] = struct{}{}
		}
	}
	return t
}

// Number returns the turn number given to Freeze.
func (t *Turn) Number() uint64 { return t.number }

// RegistryVersion returns the registry version of the frozen resolution.
func (t *Turn) RegistryVersion() string { return t.registryVersion }

// ContractHash returns the contract hash of the frozen resolution; a
// checkpoint recorded from this turn carries it (R19).
func (t *Turn) ContractHash() string { return t.contractHash }

// Tools returns the frozen tools in resolution order, as a fresh slice.
func (t *Turn) Tools() []resolver.Tool { return slices.Clone(t.tools) }

// Lookup returns the turn's frozen tool named name, with its Permission.
// Execution always goes through this tool, never through a later registry
// (R16). A deferred tool that is not loaded is still found: whether the
// model may call it is the provider array's business, not the executor's.
func (t *Turn) Lookup(name string) (resolver.Tool, bool) {
	i, ok := t.index[name]
	if !ok {
		return resolver.Tool{}, false
	}
	return t.tools[i], true
}

// Request returns the split for the next provider request of this turn:
// the frozen tools with the current loaded set (R15, R16). Its
// Classification is the record R21 asks for. Without a Search in between,
// two Requests give equal Splits, so the provider array stays stable.
func (t *Turn) Request() Split {
	t.mu.Lock()
	defer t.mu.Unlock()
	return SplitTools(t.tools, t.isLoaded)
}

// isLoaded is the SplitTools callback; t.mu must be held.
func (t *Turn) isLoaded(name string) bool {
	_, ok := t.loaded[name]
	return ok
}

// Loaded returns the loaded deferred tools of this turn, sorted, as a fresh
// slice: those kept from Freeze plus those Search loaded.
func (t *Turn) Loaded() []string {
	t.mu.Lock()
	out := make([]string, 0, len(t.loaded))
	for name := range t.loaded {
		out = append(out, name)
	}
	t.mu.Unlock()
	slices.Sort(out) // the map order never reaches the output
	return out
}

// Discovered returns the names Search loaded during this turn, in load
// order, as a fresh slice: the names of the turn's DeferredLoaded event.
func (t *Turn) Discovered() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.discovered)
}

// SearchResult is what tool_search returns to the model.
type SearchResult struct {
	// Tools holds the full tools (description and parameter schema) of
	// every requested name that is in this turn's set, in request order,
	// de-duplicated: newly loaded, already loaded, or resident.
	Tools []resolver.Tool
	// Loaded lists the names this call loaded, in request order; names
	// already loaded or resident are not repeated here.
	Loaded []string
	// NotInTurn lists the requested names this turn cannot load, in
	// request order; the error names them too.
	NotInTurn []string
}

// Search is tool_search (R16): it loads the named deferred tools of this
// turn's frozen set and returns their full parameter schemas. The next
// Request includes them in Provider and drops them from Catalog. Loading a
// loaded or resident tool is a no-op that still returns its schema.
//
// Names not in the frozen set are not loaded and are reported in
// NotInTurn and by an error wrapping ErrNotInTurn that names them; the
// valid names of the same call are loaded anyway. An empty call returns an
// empty result.
func (t *Turn) Search(names ...string) (SearchResult, error) {
	var res SearchResult
	seen := make(map[string]struct{}, len(names))
	t.mu.Lock()
	for _, name := range names {
		if _, dup := seen[name]; dup {
			continue
		}
		seen[name] = struct{}{}
		i, ok := t.index[name]
		if !ok {
			res.NotInTurn = append(res.NotInTurn, name)
			continue
		}
		tool := t.tools[i]
		res.Tools = append(res.Tools, tool)
		if !tool.Deferred {
			continue
		}
		if _, was := t.loaded[name]; !was {
			t.loaded[name] = struct{}{}
			t.discovered = append(t.discovered, name)
			res.Loaded = append(res.Loaded, name)
		}
	}
	t.mu.Unlock()
	if len(res.NotInTurn) > 0 {
		return res, fmt.Errorf("search tools %s: %w; load only names from the deferred-tool catalog: %s",
			quoteList(res.NotInTurn), ErrNotInTurn, t.catalogHint())
	}
	return res, nil
}

// catalogHint lists the deferred tools of this turn for an error message.
func (t *Turn) catalogHint() string {
	var names []string
	for i := range t.tools {
		if t.tools[i].Deferred {
			names = append(names, t.tools[i].Name)
		}
	}
	if len(names) == 0 {
		return "(none: this turn defers no tools)"
	}
	return strings.Join(names, ", ")
}

// quoteList renders names as "a", "b".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
