package service

// Where history pages start: a page that ended lately on this engine
// continues from where it stopped (historyPages); otherwise from the
// nearest history anchor the projection wrote, or the first event; and at
// most half the processors fold pages at once (readSlots).

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// historyPages remembers where recent history pages ended:
// the state, open turn and previous tool set after a page's last entry,
// so that the page after it continues from there instead of folding the
// session again from its first event. An entry is taken by the one page
// that continues it (a replayed turn is not shared), lives
// historyResumeTTL, and at most historyResumeMax are kept (the engine's
// one LRU); a page whose entry is gone replays from the start,
// with the same result. The zero value is ready to use; it is safe for
// concurrent use.
type historyPages struct {
	once sync.Once
	mu   sync.Mutex // makes take's get and remove one step
	c    *lru.Cache[historyKey, *historyResume]
}

const (
	historyResumeMax = 64
	historyResumeTTL = time.Minute
)

type historyKey struct {
	session string
	after   uint64
}

// historyResume is a replay stopped after an entry.
type historyResume struct {
	until    Until
	req      ResolveRequest
	stored   time.Time
	primed   bool // prev* hold the last entry's tools
	st       aggregate.State
	turn     *replayedTurn
	lastTime time.Time

	provider string // the provider mode the last turn replayed was begun for

	prevTools               []string
	prevPrefix, prevVersion string
	prevRefs                map[string]string // the previous point's referenced definitions
	prevPruned              bool              // the last entry's registry version was pruned
}

// request is req in the provider mode of the last turn replayed: a point
// outside a turn is what that backend's next request would send.
func (rp *historyResume) request(req ResolveRequest) ResolveRequest {
	req.Provider = rp.provider
	return req
}

func (p *historyPages) cache() *lru.Cache[historyKey, *historyResume] {
	p.once.Do(func() { p.c = lru.New[historyKey, *historyResume](historyResumeMax) })
	return p.c
}

// take removes and returns the replay stopped after sequence after of
// session, when it was made for the same until and request and has not
// expired.
func (p *historyPages) take(session string, after uint64, until Until, req ResolveRequest, now time.Time) *historyResume {
	if after == 0 {
		return nil
	}
	c, k := p.cache(), historyKey{session, after}
	p.mu.Lock()
	rp, ok := c.Get(k)
	if ok {
		c.Remove(k)
	}
	p.mu.Unlock()
	if !ok || now.Sub(rp.stored) > historyResumeTTL || rp.until.Seq != until.Seq || !rp.until.Time.Equal(until.Time) || !reflect.DeepEqual(rp.req, req) {
		return nil
	}
	return rp
}

// put keeps rp as the replay stopped after sequence after of session; a
// full cache drops the least recently used entry.
func (p *historyPages) put(session string, after uint64, rp *historyResume, now time.Time) {
	rp.stored = now
	p.cache().Put(historyKey{session, after}, rp)
}

// historyAnchors is what a Views implementation offers that keeps history
// anchors (*projection.Projection): a long session's state every so many
// events, so that a page deep in its history folds from there.
type historyAnchors interface {
	HistoryAnchor(ctx context.Context, session string, atMost uint64) (projection.Anchor, bool, error)
	ForgetAnchors(ctx context.Context, session string, events uint64) error
}

// errStaleAnchor: the event after a history anchor is a compaction that
// purged what the anchor leads to.
var errStaleAnchor = errors.New("history anchor before a compaction")

// historyStart is where a history page after after begins folding when no
// page ended there lately: at the nearest history anchor at or before
// after (anchored true), else at the session's first event.
func (e *Engine) historyStart(ctx context.Context, session string, after uint64, until Until, req ResolveRequest, useAnchors bool) (*historyResume, uint64, bool) {
	rp := &historyResume{until: until, req: req, st: aggregate.State{Session: session}}
	ha, ok := e.proj.(historyAnchors)
	if !ok || after == 0 || !useAnchors {
		return rp, 1, false
	}
	a, found, err := ha.HistoryAnchor(ctx, session, after)
	if err != nil || !found || (until.Seq != 0 && a.Seq > until.Seq) || (!until.Time.IsZero() && a.Time.After(until.Time)) {
		return rp, 1, false
	}
	rp.st, rp.lastTime = a.State, a.Time
	rp.st.Session = session
	return rp, a.Seq + 1, true
}

// forgetAnchors drops session's history anchors (best effort: a lost
// anchor only lengthens a history read).
func (e *Engine) forgetAnchors(ctx context.Context, session string) {
	ha, ok := e.proj.(historyAnchors)
	if !ok {
		return
	}
	st, err := e.proj.Read(ctx, session, projection.ReadOptions{})
	if err != nil {
		return
	}
	if err := ha.ForgetAnchors(ctx, session, st.Events); err != nil {
		e.cfg.Logger.Warn().Err(err).Str("session", session).Msg("history anchors not forgotten")
	}
}

// compacted reports whether r is a SessionCompacted.
func compacted(r logport.Record) bool {
	if r.Err != nil {
		return false
	}
	_, ok := r.Envelope.Payload.(events.SessionCompacted)
	return ok
}

// maxSlotHold is the longest a read slot stays taken after its page.
const maxSlotHold = 2 * time.Second

// readSlots bounds the history pages that fold at once to half the
// processors (at least one), and each slot to a share of its time: a page
// folds and resolves up to hundreds of events, and readers back to back
// would take the CPU the writers need. A slot stays taken, after its page,
// for as long as the page took (history readers together use at most a
// quarter of the processors), and for seven times as long when the
// engine appended within the last second (at most a sixteenth): a page
// running beside an append delays it, so while the engine writes, pages
// yield the processors to the writers. The hold never exceeds
// maxSlotHold: a page's duration includes its waits (a lagging replica,
// a timeout), and a slow page must not lock history out for a minute.
// Pages beyond wait for a slot (their context bounds the wait). The zero
// value is ready to use; writing, when set, reports whether the engine is
// appending.
type readSlots struct {
	once    sync.Once
	slots   chan struct{}
	writing func() bool
}

func (r *readSlots) take(ctx context.Context) (release func(), err error) {
	r.once.Do(func() { r.slots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)) })
	select {
	case r.slots <- struct{}{}:
		start := time.Now()
		return func() {
			rest := time.Since(start)
			if r.writing != nil && r.writing() {
				rest *= 7
			}
			time.AfterFunc(min(rest, maxSlotHold), func() { <-r.slots })
		}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
