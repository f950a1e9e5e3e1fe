package projection

import (
	"context"

	"github.com/toolintent/engine/jetstream"
)

// ViewStore is the port of the projection's views: one value
// per session with its revision, written over the revision the projection
// read or wrote so that two runners cannot overwrite each other's views.
// *jetstream.Views implements it.
type ViewStore interface {
	// GetRev returns a session's view and its revision (nil, 0: none).
	GetRev(ctx context.Context, key string) ([]byte, uint64, error)
	// PutAll writes views; a put with Cond whose key moved past Rev fails
	// with an error matching jetstream.ErrViewChanged.
	PutAll(ctx context.Context, puts []jetstream.Put) error
	// PutAllSeq is PutAll returning each put's new revision, in order.
	PutAllSeq(ctx context.Context, puts []jetstream.Put) ([]uint64, error)
	// Keys lists the sessions that have a view, sorted.
	Keys(ctx context.Context) ([]string, error)
	// LastSeq is the store's last revision over all keys: below what the
	// projection recorded writing, the store lost values.
	LastSeq(ctx context.Context) (uint64, error)
}

var _ ViewStore = (*jetstream.Views)(nil)
