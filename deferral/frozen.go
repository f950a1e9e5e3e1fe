package deferral

import (
	"slices"
	"sync"
	"weak"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

// frozen is the immutable part of a frozen turn: deep copies of the
// resolved tools, made once per resolution and shared, read-only, by
// every turn frozen from that resolution (the resolver's cache hands the
// same *Resolution to equal requests), so that an engine holding many
// open turns holds each distinct tool set once (memory per open
// turn).
type frozen struct {
	registryVersion string
	contractHash    string
	tools           []resolver.Tool      // frozen copies, resolution order
	byName          map[string]int       // name → position in tools; lookups only
	namespaces      []resolver.Namespace // of the frozen resolution, for the catalog
	catalogMax      int                  // the registry's catalog budget

	// The deferred tools' filter in a registry's search index, built by
	// the first search of any turn of this set and shared by the others.
	searchMu sync.Mutex
	searchIx *toolsearch.Index
	searchF  *toolsearch.Filter // nil: searchIx lacks one of the tools
}

// deferredFilter returns the filter admitting the frozen deferred tools
// in ix, and false when ix lacks one of them. It is built once per
// frozen set and index: a turn's first search of a 10,000-tool registry
// then costs no pass over its tools.
func (f *frozen) deferredFilter(ix *toolsearch.Index) (*toolsearch.Filter, bool) {
	f.searchMu.Lock()
	defer f.searchMu.Unlock()
	if f.searchIx != ix {
		f.searchIx = ix
		f.searchF, _ = ix.FilterAll(func(yield func(string) bool) {
			for i := range f.tools {
				if f.tools[i].Deferred && !yield(f.tools[i].Name) {
					return
				}
			}
		})
	}
	return f.searchF, f.searchF != nil
}

// frozenCache maps a resolution to its frozen copy; both weakly held, so
// it keeps nothing alive that no turn or resolver cache holds.
var frozenCache struct {
	sync.Mutex
	m     map[weak.Pointer[resolver.Resolution]]weak.Pointer[frozen]
	sweep int // size at which dead entries are swept next
}

// freezeShared returns the frozen copy of res, shared with every turn
// frozen from the same *Resolution.
func freezeShared(res *resolver.Resolution) *frozen {
	key := weak.Make(res)
	frozenCache.Lock()
	if f := frozenCache.m[key].Value(); f != nil {
		frozenCache.Unlock()
		return f
	}
	frozenCache.Unlock()
	f := freeze(res)
	frozenCache.Lock()
	defer frozenCache.Unlock()
	if have := frozenCache.m[key].Value(); have != nil {
		return have // frozen meanwhile by another turn
	}
	if frozenCache.m == nil {
		frozenCache.m = map[weak.Pointer[resolver.Resolution]]weak.Pointer[frozen]{}
	}
	if len(frozenCache.m) >= max(frozenCache.sweep, 1024) {
		for k, v := range frozenCache.m {
			if k.Value() == nil || v.Value() == nil {
				delete(frozenCache.m, k)
			}
		}
		frozenCache.sweep = 2 * len(frozenCache.m)
	}
	frozenCache.m[key] = weak.Make(f)
	return f
}

// freeze deep-copies res's tools: nothing done to the registry or the
// resolution afterwards changes a turn.
func freeze(res *resolver.Resolution) *frozen {
	f := &frozen{
		registryVersion: res.RegistryVersion,
		contractHash:    res.ContractHash,
		namespaces:      slices.Clone(res.Namespaces),
		catalogMax:      res.CatalogMaxTokens,
		tools:           make([]resolver.Tool, len(res.Tools)),
		byName:          make(map[string]int, len(res.Tools)),
	}
	size := 0
	for i := range res.Tools {
		size += len(res.Tools[i].Parameters)
	}
	buf := make([]byte, 0, size) // one backing array for every schema
	for i, tool := range res.Tools {
		if tool.Name == resolver.ToolSearch {
			tool.Deferred = false // guard 2
		}
		if tool.Parameters != nil {
			start := len(buf)
			buf = append(buf, tool.Parameters...)
			tool.Parameters = buf[start:len(buf):len(buf)]
		}
		f.tools[i] = tool
		if _, dup := f.byName[tool.Name]; !dup {
			f.byName[tool.Name] = i
		}
	}
	return f
}
