package service

import (
	"strings"
	"sync"
)

// nativeCacheSize bounds the native renderings kept across turns; past it
// the cache starts over.
const nativeCacheSize = 256

// nativeCache keeps native renderings across turns and sessions: a
// native array depends only on the provider, the resolution's contract
// (its hash covers the registry version, every tool and its deferral
// mark), the tools the channel policy withholds and the session's
// referenced tools, as looked up in one registry version; sessions with
// the same intent share it, and a session's next turn over the same
// contract reuses it instead of rendering and hashing tens of kilobytes
// again. Its views are never modified.
type nativeCache struct {
	mu sync.Mutex
	m  map[string]*nativeView
}

// nativeKey is the cache key of a rendering.
func nativeKey(provider, contract, lookupVersion string, withheld, referenced []string) string {
	var b strings.Builder
	b.Grow(len(provider) + len(contract) + len(lookupVersion) + 8*(len(withheld)+len(referenced)) + 4)
	b.WriteString(provider)
	b.WriteByte(0)
	b.WriteString(contract)
	b.WriteByte(0)
	b.WriteString(lookupVersion)
	for _, list := range [][]string{withheld, referenced} {
		b.WriteByte(0)
		for _, n := range list {
			b.WriteString(n)
			b.WriteByte(1)
		}
	}
	return b.String()
}

func (c *nativeCache) get(key string) *nativeView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *nativeCache) put(key string, nv *nativeView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= nativeCacheSize {
		c.m = make(map[string]*nativeView, nativeCacheSize)
	}
	c.m[key] = nv
}
