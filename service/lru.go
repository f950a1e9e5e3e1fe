package service

import lrucache "github.com/toolintent/engine/internal/lru"

// lru is internal/lru's Cache under the lower-case names frozen.go calls:
// the engine's turn, dispatch and registry caches are the one bounded LRU
// (#25 item 9). Once frozen.go holds *lrucache.Cache and calls its
// methods, this file goes.
type lru[K comparable, V any] struct{ c *lrucache.Cache[K, V] }

func newLRU[K comparable, V any](size int) *lru[K, V] {
	return &lru[K, V]{c: lrucache.New[K, V](size)}
}

func (c *lru[K, V]) get(k K) (V, bool) { return c.c.Get(k) }
func (c *lru[K, V]) put(k K, v V)      { c.c.Put(k, v) }
func (c *lru[K, V]) remove(k K)        { c.c.Remove(k) }
func (c *lru[K, V]) len() int          { return c.c.Len() }
func (c *lru[K, V]) swap(k K, f func(old V, found bool) V) (V, bool) {
	return c.c.Swap(k, f)
}
