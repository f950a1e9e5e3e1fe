package bench

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/toolintent/engine/projection"
)

// ackAt is when an append's acknowledgement reached its writer.
type ackAt struct {
	seq uint64
	at  time.Time
}

// viewWatch records when the projection's applied sequence (views written
// to KV and acknowledged) moves, so that each append's lag from its ack to
// its view can be computed afterwards.
type viewWatch struct {
	mu     sync.Mutex
	marks  []ackAt // applied sequence reached at time, increasing
	cancel context.CancelFunc
	done   chan struct{}
}

func watchViews(ctx context.Context, p *projection.Projection) *viewWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &viewWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		cur := p.Applied()
		for {
			if err := p.WaitApplied(ctx, cur+1); err != nil {
				return
			}
			now := time.Now()
			cur = p.Applied()
			w.mu.Lock()
			w.marks = append(w.marks, ackAt{seq: cur, at: now})
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *viewWatch) stop() {
	w.cancel()
	<-w.done
}

// lags returns, for each ack, the time from the ack to the first moment
// the projection had applied its sequence (0 when the view was written
// before the ack reached the writer), sorted.
func (w *viewWatch) lags(acks [][]ackAt) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, as := range acks {
		for _, a := range as {
			i := sort.Search(len(w.marks), func(i int) bool { return w.marks[i].seq >= a.seq })
			if i == len(w.marks) {
				continue // never seen (the watch stopped first)
			}
			out = append(out, max(0, w.marks[i].at.Sub(a.at)))
		}
	}
	slices.Sort(out)
	return out
}

// quantile of sorted durations, in milliseconds.
func quantileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return float64(sorted[i].Microseconds()) / 1e3
}
