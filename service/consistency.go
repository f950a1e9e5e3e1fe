package service

import (
	"context"
	"fmt"
	"time"

	lrucache "github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// Consistency within one engine: a read through an engine sees every
// write that engine acknowledged for the session (read-your-writes), and
// never a state older than one it already served for the session
// (monotonic reads), without the caller passing a sequence. The engine
// keeps, per session, the highest sequence it acknowledged or served (its
// mark); every read asks the projection for at least max(min_seq, mark).
// The projection serves its view when that view has reached the sequence,
// and otherwise folds the log's tail after the view (waiting, bounded, for
// a replica that lags): a read is never served from a stale view. When the
// sequence cannot be read within the bound, the read fails with
// projection.ErrNotCaughtUp (503 over the API) rather than answer stale.
//
// Marks are bounded (Config.CacheSize sessions): a session not touched for
// that many others loses its mark, and its next read is the projection's
// view as it is (as if it were read through another engine). Across
// engines, pass min_seq.

// marks holds the per-session sequence floors of reads: the one bounded
// LRU, so it keeps the size most recently used sessions.
type marks struct {
	c *lrucache.Cache[string, uint64]
}

func newMarks(size int) *marks { return &marks{c: lrucache.New[string, uint64](size)} }

// get returns the session's mark (0: none).
func (m *marks) get(session string) uint64 {
	v, _ := m.c.Get(session)
	return v
}

// raise moves the session's mark up to seq (never down).
func (m *marks) raise(session string, seq uint64) {
	if seq == 0 {
		return
	}
	m.c.Swap(session, func(old uint64, _ bool) uint64 { return max(old, seq) })
}

// len is the number of sessions with a mark (for tests of the bound).
func (m *marks) len() int { return m.c.Len() }

// forget drops the session's mark (an erased session: its sequences are
// gone from the log).
func (m *marks) forget(session string) { m.c.Remove(session) }

// floor is the sequence a read of session must include: the caller's
// minSeq or the engine's mark, whichever is higher.
func (e *Engine) floor(session string, minSeq uint64) uint64 {
	return max(minSeq, e.marks.get(session))
}

// raiseToLeader raises session's read mark to the session's last
// sequence as the stream's leader holds it, and returns that sequence:
// reads and scans through this engine then include every event the
// leader holds, however far the replica answering their direct gets lags
// behind it. One JetStream API request: for refusal and recovery paths
// (delete, erase, compaction, a pending idempotency key), never a
// per-request read.
func (e *Engine) raiseToLeader(ctx context.Context, session string) (uint64, error) {
	n, err := e.log.LeaderLastSeq(ctx, session)
	if err != nil {
		return 0, err
	}
	e.marks.raise(session, n)
	return n, nil
}

// readWait bounds how long a log scan waits for a replica to have the
// sequence this engine acknowledged (as projection.Read does for views).
const readWait = 5 * time.Second

// scanSession calls fn for the session's events from the first up to upTo
// (0: the end), in order. A scan that ends below the session's mark (a
// replica answering direct gets lags the leader) goes on after the last
// event it saw until it reaches the mark, bounded by readWait; then it
// fails with projection.ErrNotCaughtUp rather than return a short history.
// An error of fn ends the scan and is returned wrapped.
func (e *Engine) scanSession(ctx context.Context, session string, upTo uint64, fn func(logport.Record) error) error {
	return e.scanSessionFrom(ctx, session, 1, upTo, fn)
}

// scanSessionFrom is scanSession from stream sequence start on.
func (e *Engine) scanSessionFrom(ctx context.Context, session string, start, upTo uint64, fn func(logport.Record) error) error {
	return e.scanFrom(ctx, e.log, session, start, upTo, fn)
}

// scanFrom is scanSessionFrom through r.
func (e *Engine) scanFrom(ctx context.Context, r SessionScanner, session string, start, upTo uint64, fn func(logport.Record) error) error {
	last := start - 1
	scan := func(from uint64) error {
		return r.ScanSession(ctx, session, from, upTo, func(rec logport.Record) error {
			last = rec.Seq
			return fn(rec)
		})
	}
	if err := scan(start); err != nil {
		return err
	}
	want := e.marks.get(session)
	if upTo != 0 && upTo < want {
		// The session's events up to upTo need not end at upTo: a scan
		// that ends below it is not evidence of a lagging replica.
		return nil
	}
	deadline := time.Now().Add(readWait)
	wait := logport.Backoff{First: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	for last < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("read session %q: the log answered up to sequence %d, not %d, after %s: %w", session, last, want, readWait, projection.ErrNotCaughtUp)
		}
		if err := logport.Sleep(ctx, wait.Next()); err != nil {
			return fmt.Errorf("read session %q up to %d (have %d): %w: %w", session, want, last, projection.ErrNotCaughtUp, err)
		}
		if err := scan(last + 1); err != nil {
			return err
		}
	}
	return nil
}

// foldProgress is what views offer that can say, for each stream they
// fold, where its log ends and how far they have written it
// (*projection.Projection: one stream; partitioned views: one per
// partition, in the same order).
type foldProgress interface {
	LogEnds(ctx context.Context) ([]uint64, error)
	FoldedEach(ctx context.Context) ([]uint64, error)
}

// viewsCaughtUp waits, at most bound, until the views have folded each
// stream of the log up to the last event it held when the call began: a
// pass over every view (Sessions, then each view) then sees every event
// acknowledged before it, including the first event of a session whose
// view the projection has not written yet. Views that cannot say how far
// they are (not foldProgress) are taken as they are. When the views stay
// behind, the error wraps projection.ErrNotCaughtUp and names both
// positions.
func (e *Engine) viewsCaughtUp(ctx context.Context, bound time.Duration) error {
	pv, ok := e.proj.(foldProgress)
	if !ok {
		return nil
	}
	last, err := pv.LogEnds(ctx)
	if err != nil {
		return fmt.Errorf("the log's last event: %w", err)
	}
	deadline := time.Now().Add(bound)
	for {
		folded, err := pv.FoldedEach(ctx)
		if err == nil && reached(folded, last) {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the views have not said how far they have folded the log after %s (is a projection running?): %w: %w", bound, projection.ErrNotCaughtUp, err)
			}
			return fmt.Errorf("the views have folded the log up to %v, not %v (its last event), after %s (is a projection running?): %w", folded, last, bound, projection.ErrNotCaughtUp)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the views to fold the log up to %v (its last event): %w: %w", last, projection.ErrNotCaughtUp, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reached reports whether each stream's folded position is at least its
// last event.
func reached(folded, last []uint64) bool {
	if len(folded) != len(last) {
		return false
	}
	for i := range last {
		if folded[i] < last[i] {
			return false
		}
	}
	return true
}
