package projection

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
)

// Registries answers, for every fold, which registry was in force when an
// event was stored, so that the rules that need the registry (a picked
// list that materialises a preset or the defaults, a loaded tool that is
// not a deferred tool of the registry) apply to every event whoever
// published it: the last version the registry history
// (jetstream.RegistryHistory, which every engine writes when it starts
// serving a registry) recorded at or before the event's stream timestamp.
// Both timestamps are the server's, never the publisher's, and the history
// only grows, so the answer depends on the log and the history alone: the
// same on every engine and every replay. An event stored before any
// version was recorded, or whose version's content the history no longer
// holds, gets no registry (those rules are then not checked).
//
// A Registries is safe for concurrent use; it caches the timeline and the
// registries it loaded.
type Registries struct {
	hist *jetstream.RegistryHistory
	log  *jetstream.Log

	mu      sync.Mutex
	marks   []jetstream.RegistryMark // oldest first
	lastSeq uint64                   // the history's last sequence when marks were read
	readAt  time.Time                // the history server's time when marks were last known complete
	byVer   map[string]*resolver.Registry
}

// NewRegistries answers from the registry history of log's stream, which
// it opens (creating it when missing) when a fold first needs it.
func NewRegistries(log *jetstream.Log) *Registries {
	return &Registries{log: log, byVer: map[string]*resolver.Registry{}}
}

// OpenRegistries is NewRegistries, opening the history now.
func OpenRegistries(ctx context.Context, log *jetstream.Log) (*Registries, error) {
	r := NewRegistries(log)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// open opens the history once.
func (r *Registries) open(ctx context.Context) error {
	if r.hist != nil {
		return nil
	}
	h, err := r.log.OpenRegistryHistory(ctx)
	if err != nil {
		return fmt.Errorf("open the registry history for the fold: %w", err)
	}
	r.hist = h
	return nil
}

// At returns the registry in force at t, a stream timestamp: nil when no
// version was recorded at or before t, or the history holds no readable
// content of it. An error means the history could not be read (the fold
// must not guess: the caller retries).
func (r *Registries) At(ctx context.Context, t time.Time) (*resolver.Registry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Every version recorded at or before readAt is in marks: an event
	// stored by then is answered from them (a catch-up asks nothing; a
	// live fold asks once per batch, whose events were all stored before
	// it asks).
	if r.readAt.IsZero() || t.After(r.readAt) {
		if err := r.refresh(ctx); err != nil {
			return nil, err
		}
	}
	i := sort.Search(len(r.marks), func(i int) bool { return r.marks[i].Time.After(t) })
	if i == 0 {
		return nil, nil
	}
	return r.version(ctx, r.marks[i-1].Version)
}

// refresh re-reads the timeline when the history grew. The timeline is
// complete up to the history server's clock when it answered, which also
// stamps what it records next; an event stamped later than that by
// another server's clock (a cluster's skew, milliseconds) is judged by the
// timeline as read, which can differ from a later replay only if a
// registry was recorded within that skew of the event.
func (r *Registries) refresh(ctx context.Context) error {
	if err := r.open(ctx); err != nil {
		return err
	}
	now := time.Now()
	stream, err := r.log.JetStream().Stream(ctx, r.hist.StreamName()) // one stream info request
	if err != nil {
		return fmt.Errorf("registry in force: %w", err)
	}
	info := stream.CachedInfo()
	if !info.TimeStamp.IsZero() {
		now = info.TimeStamp // the server's clock, which stamps the events too
	}
	if info.State.LastSeq != r.lastSeq || r.readAt.IsZero() {
		marks, err := r.hist.Timeline(ctx)
		if err != nil {
			return err
		}
		r.marks = marks
		// The stream's last sequence, not the last mark's: a pruned
		// version's tombstone is a message that adds no mark.
		r.lastSeq = info.State.LastSeq
	}
	r.readAt = now
	return nil
}

// version loads a recorded version (cached; nil when the history holds
// no readable content of it).
func (r *Registries) version(ctx context.Context, v string) (*resolver.Registry, error) {
	if reg, ok := r.byVer[v]; ok {
		return reg, nil
	}
	data, err := r.hist.Lookup(ctx, v)
	if errors.Is(err, jetstream.ErrRegistryVersionUnknown) {
		r.byVer[v] = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	reg, err := resolver.Load(data)
	if err != nil || reg.Version() != v {
		reg = nil // a content no engine could serve: no registry rules
	}
	r.byVer[v] = reg
	return reg, nil
}

// Stored returns rec as the fold takes it: with the registry in force when
// it was stored when its verdict needs one (aggregate.NeedsRegistry).
func (r *Registries) Stored(ctx context.Context, rec logport.Record) (aggregate.Stored, error) {
	s := aggregate.StoredRecord(rec)
	if r == nil || rec.Err != nil || !aggregate.NeedsRegistry(rec.Envelope) {
		return s, nil
	}
	reg, err := r.At(ctx, rec.Time)
	if err != nil {
		return s, fmt.Errorf("fold seq %d: %w", rec.Seq, err)
	}
	s.Registry = reg
	return s, nil
}
