package resolver

import (
	"slices"
	"sync"

	"github.com/toolintent/engine/intent"
)

// Cache bounds: at most cacheSize entries holding at most maxCachedTools
// resolved tools in all (about 23 MB of Tool values; names, descriptions and
// schemas are shared with the registry). A request larger than
// maxCachedNames names or maxCachedBytes bytes of strings is resolved but
// not cached, so the cache cannot be made to hold large amounts of memory.
const (
	cacheSize      = 4096
	maxCachedTools = 1 << 18
	maxCachedNames = 256
	maxCachedBytes = 16 << 10
)

// resolveCache maps a request fingerprint to resolutions. Entries with the
// same fingerprint are chained and compared by value, so a collision can
// never return another request's resolution. Eviction is first-in,
// first-out.
type resolveCache struct {
	mu    sync.RWMutex
	m     map[uint64]*cacheEntry
	ring  []*cacheEntry // circular queue of entries, oldest at head
	head  int
	n     int
	tools int // resolved tools held by the entries
}

type cacheEntry struct {
	fp   uint64
	req  Request // deep copy, owned by the cache
	res  *Resolution
	err  error
	next *cacheEntry
}

func (c *resolveCache) init() {
	c.m = make(map[uint64]*cacheEntry)
	c.ring = make([]*cacheEntry, cacheSize)
}

// get returns the entry of an equal request, or nil. Entries are never
// modified once stored, so the caller may read it without the lock.
func (c *resolveCache) get(fp uint64, req *Request) *cacheEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for e := c.m[fp]; e != nil; e = e.next {
		if requestEqual(&e.req, req) {
			return e
		}
	}
	return nil
}

func (c *resolveCache) put(fp uint64, req *Request, res *Resolution, err error) {
	if !cacheable(req) {
		return
	}
	e := &cacheEntry{fp: fp, req: cloneRequest(req), res: res, err: err}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.init()
	}
	for x := c.m[fp]; x != nil; x = x.next {
		if requestEqual(&x.req, req) {
			return // another goroutine stored it first
		}
	}
	size := 0
	if res != nil {
		size = len(res.Tools)
	}
	for c.n > 0 && (c.n == cacheSize || c.tools+size > maxCachedTools) {
		old := c.ring[c.head]
		c.ring[c.head] = nil
		c.head = (c.head + 1) % cacheSize
		c.n--
		if old.res != nil {
			c.tools -= len(old.res.Tools)
		}
		c.remove(old)
	}
	if size > maxCachedTools {
		return
	}
	c.ring[(c.head+c.n)%cacheSize] = e
	c.n++
	c.tools += size
	e.next = c.m[fp]
	c.m[fp] = e
}

func (c *resolveCache) remove(old *cacheEntry) {
	head := c.m[old.fp]
	if head == old {
		if old.next == nil {
			delete(c.m, old.fp)
		} else {
			c.m[old.fp] = old.next
		}
		return
	}
	for x := head; x != nil && x.next != nil; x = x.next {
		if x.next == old {
			x.next = old.next
			return
		}
	}
}

// len returns the number of cached entries.
func (c *resolveCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n
}

func cacheable(req *Request) bool {
	names, size := 0, len(req.Profile)
	count := func(list []string) {
		names += len(list)
		for _, s := range list {
			size += len(s)
		}
	}
	for _, in := range [2]*Intent{&req.Session, &req.Override.Intent} {
		count(in.Disabled)
		count(in.Picked)
		size += len(in.Preset)
	}
	count(req.Override.Allowed)
	count(req.Override.Names)
	size += len(req.Channel)
	return names <= maxCachedNames && size <= maxCachedBytes
}

// fingerprint is an FNV-1a 64 hash over every field of a request, with
// lengths as separators. It does not allocate.
func fingerprint(req *Request) uint64 {
	h := req.Override.Fingerprint(intent.FingerprintSeed)
	h = req.Session.Fingerprint(h)
	h = intent.FingerprintString(h, req.Profile)
	return intent.FingerprintString(h, req.Channel)
}

// requestEqual compares requests by value: tri-states by value, nil and
// empty lists alike (Resolve treats them alike).
func requestEqual(a, b *Request) bool {
	return a.Override.Kind == b.Override.Kind && a.Profile == b.Profile && a.Channel == b.Channel &&
		a.Override.Intent.Alike(&b.Override.Intent) && a.Session.Alike(&b.Session) &&
		slices.Equal(a.Override.Allowed, b.Override.Allowed) && slices.Equal(a.Override.Names, b.Override.Names)
}

func cloneRequest(req *Request) Request {
	return Request{
		Override: req.Override.Clone(),
		Session:  req.Session.Clone(),
		Profile:  req.Profile,
		Channel:  req.Channel,
	}
}
