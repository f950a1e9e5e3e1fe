package service

import (
	"container/list"
	"sync"
)

// lru is a bounded map that evicts its least recently used entry when
// full: every per-session map of the engine is one, so its memory is
// bounded whatever the number of sessions (issue 13). It is safe for
// concurrent use.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used; elements hold *lruEntry
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

// newLRU returns an lru of at most size entries (at least 1).
func newLRU[K comparable, V any](size int) *lru[K, V] {
	return &lru[K, V]{max: max(size, 1), order: list.New(), items: make(map[K]*list.Element)}
}

// get returns the value of k and marks it used.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry[K, V]).val, true
}

// put sets k to v, evicting the least recently used entry when full.
func (c *lru[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, v)
}

func (c *lru[K, V]) putLocked(k K, v V) {
	if el, ok := c.items[k]; ok {
		el.Value.(*lruEntry[K, V]).val = v
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*lruEntry[K, V]).key)
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v})
}

// swap sets k to f(old, found) atomically and returns the old value.
func (c *lru[K, V]) swap(k K, f func(old V, found bool) V) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old V
	el, found := c.items[k]
	if found {
		old = el.Value.(*lruEntry[K, V]).val
	}
	c.putLocked(k, f(old, found))
	return old, found
}

// remove deletes k.
func (c *lru[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.order.Remove(el)
		delete(c.items, k)
	}
}

// len returns the number of entries.
func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
