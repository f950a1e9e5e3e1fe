package service

import (
	"strconv"
	"strings"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
)

// cachedPoint is what cacheOf returned for one set of inputs.
type cachedPoint struct {
	prefix, refsHash string
	refs             map[string]string
}

// pointKey is cacheOf's inputs as a memo key: the registry whose tools
// it looks up, and the rest as a string.
type pointKey struct {
	reg  *resolver.Registry
	rest string
}

// maxCachedPoints bounds the memo of one replay: a page's entries rarely
// hold more than a few distinct tool sets.
const maxCachedPoints = 256

// cacheOf is cacheOf memoised for one replay. Rendering the tools array
// of a native mode (every tool, with its schema) is most of the CPU a
// history entry costs, and consecutive entries mostly resolve to the same
// tools: the key is everything the result depends on — the registry the
// referenced and withheld tools are looked up in (a registry file pushed
// again under the same version is another registry), the provider row,
// the resolution's contract hash (registry version and every tool's
// contract, in order), its namespaces with their descriptions, and for a
// native row the referenced and withheld names, for a catalog row the
// split's provider names and frozen count.
// A resolution without a contract hash is not memoised.
func (r *registriesAt) cacheOf(provider string, res *resolver.Resolution, reg *resolver.Registry, split deferral.Split, referenced []string) (string, string, map[string]string) {
	if res == nil || res.ContractHash == "" {
		return cacheOf(provider, res, reg, split, referenced)
	}
	row, ok := deferral.LookupProvider(provider)
	if !ok {
		row, _ = deferral.LookupProvider("")
	}
	var b strings.Builder
	b.WriteString(row.Name)
	b.WriteByte(0)
	b.WriteString(res.ContractHash)
	for _, ns := range res.Namespaces {
		b.WriteByte(0)
		b.WriteString(ns.Name)
		b.WriteByte(0)
		b.WriteString(ns.Description)
	}
	b.WriteByte(1)
	if row.Native {
		writeNames(&b, referenced)
		writeNames(&b, res.Withheld)
	} else {
		for _, t := range split.Provider {
			b.WriteByte(0)
			b.WriteString(t.Name)
		}
		b.WriteByte(1)
		b.WriteString(strconv.Itoa(split.Frozen))
	}
	key := pointKey{reg: reg, rest: b.String()}
	if c, ok := r.points[key]; ok {
		return c.prefix, c.refsHash, c.refs
	}
	prefix, refsHash, refs := cacheOf(provider, res, reg, split, referenced)
	if r.points == nil || len(r.points) >= maxCachedPoints {
		r.points = map[pointKey]cachedPoint{}
	}
	r.points[key] = cachedPoint{prefix, refsHash, refs}
	return prefix, refsHash, refs
}

// writeNames appends names to b, each after a separator no name holds,
// the list closed by another.
func writeNames(b *strings.Builder, names []string) {
	for _, n := range names {
		b.WriteByte(0)
		b.WriteString(n)
	}
	b.WriteByte(1)
}
