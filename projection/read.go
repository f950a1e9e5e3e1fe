package projection

// Reading views: the cache, the KV bucket and the log behind Read, and the
// reconciliation of the views with the log.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// loadAll makes sure the states of the sessions of recs are cached. A
// session known to have no view starts from the zero state without a read:
// its first event was stored on the condition that its subject was empty
// (Record.First) and no feed folded it before, or the feed rebuilds from
// the first event and never evicted it. The views of the others are read
// concurrently, loadWorkers at a time; while rebuilding, only a view the
// rebuild wrote is a base (rebuiltView).
func (p *Projection) loadAll(ctx context.Context, recs []logport.Record) error {
	type miss struct {
		session string
		st      *aggregate.State
		rev     uint64
		known   bool // rev is the view's revision (0: it has none)
		read    bool // the view must be read
		rebuilt bool // read with rebuiltView
	}
	var misses []miss
	seen := make(map[string]bool)
	p.cacheMu.RLock()
	for _, rec := range recs {
		if seen[rec.Session] || misplaced(rec) {
			continue
		}
		seen[rec.Session] = true
		if _, ok := p.cache.Get(rec.Session); ok {
			continue
		}
		m := miss{session: rec.Session, st: &aggregate.State{Session: rec.Session}}
		switch {
		case rec.Session == "":
		case p.trustCache && !p.evicted.mayContain(rec.Session):
			// Rebuilding: written unconditionally over any older view.
		case p.trustCache:
			// Rebuilding, maybe evicted: read back what the rebuild
			// wrote. Record.First says nothing here: the views of an
			// earlier fold are still in the bucket.
			m.read, m.rebuilt = true, true
		case rec.First && rec.Seq > p.feedStart:
			m.known = true // no view: written on the condition there is none
		default:
			m.read = true
		}
		misses = append(misses, m)
	}
	p.cacheMu.RUnlock()
	if len(misses) == 0 {
		return nil
	}
	// A failed read or an ended ctx stops the batch's other reads: the
	// batch is not acknowledged, so it comes again.
	err := eachView(ctx, len(misses), func(i int) error {
		m := &misses[i]
		if !m.read {
			return nil
		}
		read := p.viewRev
		if m.rebuilt {
			read = p.rebuiltView
		}
		s, r, err := read(ctx, m.session)
		if err != nil {
			return err
		}
		m.st, m.rev, m.known = &s, r, true
		return nil
	})
	if err != nil {
		return err
	}
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	for _, m := range misses {
		if _, ok := p.cache.Get(m.session); ok {
			continue
		}
		p.cache.Put(m.session, m.st)
		if m.known {
			p.revs[m.session] = m.rev
		}
	}
	return nil
}

// loadWorkers bounds the concurrent view reads of one batch.
const loadWorkers = 32

// eachView calls fn(i) for each i in [0, n) on up to loadWorkers
// goroutines: view reads and leader requests are round trips, so they
// overlap. The first error stops the other workers; it returns the errors
// joined, or ctx's error when ctx ended first.
func eachView(ctx context.Context, n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make([]error, loadWorkers)
	)
	for w := range loadWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					errs[w] = err
					next.Store(int64(n)) // the others stop too
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// viewOf reads a session's view (see viewRev).
func (p *Projection) viewOf(ctx context.Context, session string) (aggregate.State, error) {
	st, _, err := p.viewRev(ctx, session)
	return st, err
}

// viewRev reads a session's view from KV and its revision: the fold of
// its log when it has none (a new session reads as the zero state) or the
// view cannot be decoded by this build.
func (p *Projection) viewRev(ctx context.Context, session string) (aggregate.State, uint64, error) {
	data, rev, err := p.views.GetRev(ctx, session)
	if err != nil {
		return aggregate.State{Session: session}, 0, err
	}
	return p.decodeView(ctx, session, data, rev)
}

// rebuiltView reads, while the feed rebuilds every view from the first
// event, the view of a session the evicted set may hold: the view this
// rebuild wrote (a revision above rebuildFrom), else the zero state with
// the revision read. A view stored before the rebuild is never a base to
// fold on: the rebuild folds every view again from the log, and a false
// positive of the evicted set must not keep a stale view, nor take a
// session with a view for one without (its write, conditional on that
// revision, would fail every time).
func (p *Projection) rebuiltView(ctx context.Context, session string) (aggregate.State, uint64, error) {
	data, rev, err := p.views.GetRev(ctx, session)
	if err != nil {
		return aggregate.State{Session: session}, 0, err
	}
	if rev <= p.rebuildFrom {
		return aggregate.State{Session: session}, rev, nil
	}
	return p.decodeView(ctx, session, data, rev)
}

// decodeView is the state of a session's view read at rev: the fold of
// its log when it has none or this build cannot decode it.
func (p *Projection) decodeView(ctx context.Context, session string, data []byte, rev uint64) (aggregate.State, uint64, error) {
	if data == nil {
		// No view: a new session, or a view lost with a damaged views
		// file. Never serve the defaults for a session with events: fold
		// its log.
		st, err := p.foldLog(ctx, session, aggregate.State{Session: session}, 0)
		if err == nil && st.LastSeq > 0 {
			p.cfg.Logger.Warn().Str("session", session).Uint64("seq", st.LastSeq).Msg("view missing: refolded from the log")
		}
		return st, 0, err
	}
	st, err := aggregate.UnmarshalState(data)
	if err != nil {
		p.cfg.Logger.Warn().Str("session", session).Err(err).Msg("view unreadable: rebuilding from the log")
		st, err = p.foldLog(ctx, session, aggregate.State{Session: session}, 0)
		return st, rev, err
	}
	return st, rev, nil
}

// evict drops the least recently used cached views beyond CacheSize
// (down to nine tenths of it), but not those being written (inflight):
// read back before their write lands, they would be stale.
func (p *Projection) evict(inflight []jetstream.Put) {
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	if p.cache.Len() <= p.cfg.CacheSize {
		return
	}
	keep := make(map[string]bool, len(inflight))
	for _, put := range inflight {
		keep[put.Key] = true
	}
	for _, k := range p.cache.Trim(p.cfg.CacheSize-p.cfg.CacheSize/10, func(k string) bool { return keep[k] }) {
		delete(p.revs, k)
		p.hand.forget(k) // the feed decodes them when they come
		if p.trustCache {
			p.evicted.add(k) // read back from the views if it comes again
		}
	}
}

// newCache is an empty cache of views: bounded by evict, not by Put (a
// batch's sessions stay cached until their views are written).
func newCache() *lru.Cache[string, *aggregate.State] {
	return lru.New[string, *aggregate.State](math.MaxInt)
}

// foldLog folds the session's events after st.LastSeq, up to upTo (0: the
// end), into st.
func (p *Projection) foldLog(ctx context.Context, session string, st aggregate.State, upTo uint64) (aggregate.State, error) {
	err := p.log.ScanSession(ctx, session, st.LastSeq+1, upTo, func(r logport.Record) error {
		return p.foldRecord(ctx, &st, r)
	})
	return st, err
}

// foldRecord folds one stored event into st, with the registry in force
// when it was stored.
func (p *Projection) foldRecord(ctx context.Context, st *aggregate.State, r logport.Record) error {
	ev, err := p.regs.Stored(ctx, r)
	if err != nil {
		return err
	}
	st.ApplyStored(ev) //nolint:errcheck // recorded in st; the projection reports
	return nil
}

// ReadOptions say how fresh a Read must be (logport.ReadOptions).
type ReadOptions = logport.ReadOptions

// Read returns a session's view: from the memory of the projection when
// this process runs it and holds the session (fresher than the KV view,
// which it writes at most FlushInterval later), else one KV get; plus a
// tail fold from the log only when opts ask for something fresher. A
// session with no events reads as the zero state (intent: follow the
// profile), not an error.
func (p *Projection) Read(ctx context.Context, session string, opts ReadOptions) (aggregate.State, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.State{}, fmt.Errorf("read session %q: %w", session, err)
	}
	st, ok := p.cached(session)
	if !ok {
		var err error
		if st, err = p.viewOf(ctx, session); err != nil {
			return aggregate.State{}, err
		}
	}
	var err error
	if !opts.Latest && st.LastSeq >= opts.MinSeq {
		return st, nil
	}
	st, err = p.foldLog(ctx, session, st, 0)
	// On a replicated stream any replica may answer a direct get, and a
	// follower can lag the leader for a moment: the write at MinSeq was
	// acknowledged, so wait (bounded) for the replicas to have it.
	deadline := time.Now().Add(readYourWritesWait)
	for wait := 5 * time.Millisecond; err == nil && opts.MinSeq > 0 && st.LastSeq < opts.MinSeq; wait = min(wait*2, 200*time.Millisecond) {
		if time.Now().After(deadline) {
			return st, fmt.Errorf("read session %q: no replica has sequence %d after %s (the session is at %d; is that sequence this session's?): %w",
				session, opts.MinSeq, readYourWritesWait, st.LastSeq, ErrNotCaughtUp)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("read session %q at sequence %d (have %d): %w: %w", session, opts.MinSeq, st.LastSeq, ErrNotCaughtUp, ctx.Err())
		case <-time.After(wait):
		}
		st, err = p.foldLog(ctx, session, st, 0)
	}
	return st, err
}

// readYourWritesWait bounds how long a read waits for a replica to have
// the sequence it asks for.
const readYourWritesWait = 5 * time.Second

// cached returns a copy of the session's state in the projection's memory.
func (p *Projection) cached(session string) (aggregate.State, bool) {
	p.cacheMu.RLock()
	defer p.cacheMu.RUnlock()
	st, ok := p.cache.Get(session)
	if !ok {
		return aggregate.State{}, false
	}
	return st.Clone(), true
}

// ErrNotCaughtUp is returned by WaitApplied when ctx ends first.
var ErrNotCaughtUp = errors.New("projection has not reached the sequence")

// WaitApplied blocks until the projection has folded and acknowledged the
// stream up to seq, or ctx ends.
func (p *Projection) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		p.mu.Lock()
		if p.applied.Load() >= seq {
			p.mu.Unlock()
			return nil
		}
		ch := p.advance
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for sequence %d (at %d): %w: %w", seq, p.applied.Load(), ErrNotCaughtUp, ctx.Err())
		}
	}
}

// FoldedUpTo is the stream sequence up to which the projection runner
// (of any engine on the stream) has written the views: the watermark it
// records after each flush. An erase waits for it to pass the session's
// SessionDeleted before it purges, so that no view is left behind
// the delete.
func (p *Projection) FoldedUpTo(ctx context.Context) (uint64, error) {
	folded, _, err := p.meta.Watermark(ctx)
	return folded, err
}

// LogEnds is the last sequence of the projection's stream, as one
// element: where a registry prune waits for the views to reach.
func (p *Projection) LogEnds(ctx context.Context) ([]uint64, error) {
	last, err := p.log.LastStreamSeq(ctx)
	if err != nil {
		return nil, err
	}
	return []uint64{last}, nil
}

// FoldedEach is FoldedUpTo as one element, beside LogEnds.
func (p *Projection) FoldedEach(ctx context.Context) ([]uint64, error) {
	folded, err := p.FoldedUpTo(ctx)
	if err != nil {
		return nil, err
	}
	return []uint64{folded}, nil
}

// FoldedFor is FoldedUpTo, asked for a session's view: the projection's
// stream holds every session it serves.
func (p *Projection) FoldedFor(ctx context.Context, _ string) (uint64, error) {
	return p.FoldedUpTo(ctx)
}

// Sessions lists the sessions that have a view, sorted; a deleted session
// is not listed.
func (p *Projection) Sessions(ctx context.Context) ([]string, error) {
	keys, err := p.views.Keys(ctx)
	if err != nil {
		return nil, err
	}
	deleted := make(map[string]bool)
	for _, k := range keys {
		if s, ok := strings.CutPrefix(k, DeletedKeyPrefix); ok {
			deleted[s] = true
		}
	}
	out := keys[:0]
	for _, k := range keys {
		if !deleted[k] && !strings.HasPrefix(k, DeletedKeyPrefix) {
			out = append(out, k)
		}
	}
	return out, nil
}

// DeletedKeyPrefix prefixes the views bucket's marker of a deleted
// session: the key DeletedKeyPrefix+session, written with the view
// that folded its SessionDeleted, keeps it out of Sessions without reading
// every view. A session id has no dot, so no session's view has such a
// key.
const DeletedKeyPrefix = "deleted."

// Reconcile checks every stored view against the log, after a rebuild
// of a damaged store: a view that claims a later sequence than its
// session has in the log (its events were lost with the store) is
// refolded from what the log holds (the zero view when it holds nothing), so
// that the session does not refuse every append as a conflict. It
// returns how many views it corrected. Run it with the projection
// stopped.
func (p *Projection) Reconcile(ctx context.Context) (int, error) {
	keys, err := p.views.Keys(ctx)
	if err != nil {
		return 0, err
	}
	// Each view costs a view read and a request to the stream leader:
	// loadWorkers at a time, as a fold's view reads.
	var fixed atomic.Int64
	err = eachView(ctx, len(keys), func(i int) error {
		ok, err := p.reconcileView(ctx, keys[i])
		if ok {
			fixed.Add(1)
		}
		return err
	})
	return int(fixed.Load()), err
}

// reconcileView corrects session's view when it claims a sequence beyond
// the session's last in the log (see Reconcile), and reports whether it
// did.
func (p *Projection) reconcileView(ctx context.Context, s string) (bool, error) {
	if events.ValidateSessionID(s) != nil {
		return false, nil
	}
	v, err := p.viewOf(ctx, s)
	if err != nil {
		return false, err
	}
	last, err := p.log.LeaderLastSeq(ctx, s)
	if err != nil {
		return false, err
	}
	if v.LastSeq <= last || (v.Deleted() && last == 0) {
		return false, nil // in step; or erased: its view is the deleted state, its events purged on purpose
	}
	// Through last, read from the stream's leader where a replica
	// behind it ends the direct gets early: the view written here is
	// final (the feed acknowledged these events long ago).
	st := aggregate.State{Session: s}
	if last > 0 {
		recs, err := p.log.ReadSessionThrough(ctx, s, 1, last)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			if err := p.foldRecord(ctx, &st, r); err != nil {
				return false, err
			}
		}
	}
	p.cfg.Logger.Warn().Str("session", s).Uint64("view_seq", v.LastSeq).Uint64("log_seq", last).Msg("view ahead of the damaged log: refolded from what the log holds")
	// A session the log holds nothing of gets the zero view (no KV
	// delete: a tombstone would hide the key's revision from the
	// conditional writes).
	data, err := aggregate.MarshalState(st)
	if err == nil {
		err = p.views.PutAll(ctx, []jetstream.Put{{Key: s, Value: data}})
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// Cached is the number of sessions whose state the projection holds in
// memory (at most Config.CacheSize after each flush).
func (p *Projection) Cached() int {
	p.cacheMu.RLock()
	defer p.cacheMu.RUnlock()
	return p.cache.Len()
}
