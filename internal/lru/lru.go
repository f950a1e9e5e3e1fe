// Package lru is the engine's one bounded cache: a map that
// evicts its least recently used entry when full, so a per-session map's
// memory is bounded whatever the number of sessions.
package lru

import (
	"container/list"
	"sync"
)

// Cache is a bounded map from K to V that evicts its least recently used
// entry when a new key would exceed its size. It is safe for concurrent
// use; the zero value is not usable (use New).
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used; elements hold *entry
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key K
	val V
}

// New returns a cache of at most size entries (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{max: max(size, 1), order: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the value of k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Put sets k to v and marks it used, evicting the least recently used
// entry when k is new and the cache full.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k, v)
}

func (c *Cache[K, V]) put(k K, v V) {
	if el, ok := c.items[k]; ok {
		el.Value.(*entry[K, V]).val = v
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*entry[K, V]).key)
	}
	c.items[k] = c.order.PushFront(&entry[K, V]{key: k, val: v})
}

// Swap sets k to f(old, found) atomically (f runs under the cache's lock:
// it must not call the cache) and returns the old value.
func (c *Cache[K, V]) Swap(k K, f func(old V, found bool) V) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old V
	el, found := c.items[k]
	if found {
		old = el.Value.(*entry[K, V]).val
	}
	c.put(k, f(old, found))
	return old, found
}

// Remove deletes k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.order.Remove(el)
		delete(c.items, k)
	}
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Trim evicts least recently used entries until at most n remain,
// skipping those keep reports (nil: none is kept), and returns the evicted
// keys. With a size it never reaches (New(math.MaxInt)), a cache evicts
// only here: for a cache whose entries must stay while in use, trimmed
// once the use is over (the projection's views between batches).
func (c *Cache[K, V]) Trim(n int, keep func(K) bool) []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []K
	for el := c.order.Back(); el != nil && c.order.Len() > n; {
		prev := el.Prev()
		k := el.Value.(*entry[K, V]).key
		if keep == nil || !keep(k) {
			c.order.Remove(el)
			delete(c.items, k)
			out = append(out, k)
		}
		el = prev
	}
	return out
}
