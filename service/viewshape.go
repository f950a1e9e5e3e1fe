package service

// What a turn view reply holds besides its rendering is bounded whatever
// the registry holds: its name lists are a page of at most ViewListMax
// names each (Lists says where the page sits and how long the full lists
// are; resolve pages on with list_offset), and a backend that already
// holds the rendering names its hash in if_none_match and is not sent it
// again (rendering_unchanged). Over HTTP a view reply also carries an
// ETag of the whole reply: a GET whose If-None-Match names it is a 304.

import (
	"fmt"

	"github.com/toolintent/engine/wire"
)

// ViewListMax is the most names a turn view reply holds in each of its
// lists (tools, provider, catalog, classification, unknown, withheld,
// droppable_references)
// when the request names no list_limit; ViewListLimitMax is the largest
// list_limit a request may name.
const (
	ViewListMax      = 128
	ViewListLimitMax = 1000
)

// ViewShape is how a reply shapes a view: the page of its lists and the
// rendering hash the caller already holds. The zero value is the first
// page of ViewListMax names, rendering included.
type ViewShape struct {
	// ListOffset and ListLimit select the page of the lists (0: the
	// first page; 0: ViewListMax names).
	ListOffset, ListLimit int
	// IfNoneMatch is the rendering_hash of a rendering the caller holds:
	// when it is the view's, the reply leaves the rendering out; "*"
	// leaves any rendering out (a caller that does not send it, such as
	// the inspector).
	IfNoneMatch string
}

// Validate reports a page out of range.
func (s ViewShape) Validate() error {
	if s.ListOffset < 0 || s.ListLimit < 0 || s.ListLimit > ViewListLimitMax {
		return fmt.Errorf("%w: list_offset %d and list_limit %d: want list_offset >= 0 and list_limit 0 (the default, %d) to %d", ErrInvalid, s.ListOffset, s.ListLimit, ViewListMax, ViewListLimitMax)
	}
	return nil
}

// apply returns v as a reply of shape s holds it: each list cut to the
// page, Lists set, and the rendering left out when s.IfNoneMatch is its
// hash. v's slices are not modified.
func (s ViewShape) apply(v wire.TurnView) wire.TurnView {
	limit := s.ListLimit
	if limit <= 0 {
		limit = ViewListMax
	}
	v.Lists = wire.ViewLists{Offset: s.ListOffset, Limit: limit, Tools: len(v.Tools), Provider: len(v.Provider), Catalog: len(v.Catalog),
		Classification: len(v.Classification), Unknown: len(v.Unknown), Withheld: len(v.Withheld), Droppable: len(v.DroppableReferences)}
	v.Lists.Complete = s.ListOffset == 0 && max(len(v.Tools), len(v.Provider), len(v.Catalog), len(v.Classification), len(v.Unknown), len(v.Withheld), len(v.DroppableReferences)) <= limit
	v.Tools = page(v.Tools, s.ListOffset, limit)
	v.Provider = page(v.Provider, s.ListOffset, limit)
	v.Catalog = page(v.Catalog, s.ListOffset, limit)
	v.Classification = page(v.Classification, s.ListOffset, limit)
	if v.Unknown != nil {
		v.Unknown = page(v.Unknown, s.ListOffset, limit)
	}
	if v.Withheld != nil {
		v.Withheld = page(v.Withheld, s.ListOffset, limit)
	}
	if v.DroppableReferences != nil {
		v.DroppableReferences = page(v.DroppableReferences, s.ListOffset, limit)
	}
	if s.IfNoneMatch == "*" || s.IfNoneMatch != "" && s.IfNoneMatch == v.RenderingHash {
		v.Rendering, v.RenderingUnchanged = nil, true
	}
	return v
}

// page returns xs[offset:offset+limit], clipped to xs; never nil.
func page[T any](xs []T, offset, limit int) []T {
	if offset >= len(xs) {
		return []T{}
	}
	end := min(len(xs), offset+limit)
	return xs[offset:end:end]
}
