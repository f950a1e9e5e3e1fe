package api

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// Within one engine a client reads its own acknowledged write without
// passing min_seq, and never reads a state older than one it read before
// (monotonic reads). 1,000 write-then-read rounds per transport, from
// several goroutines at once over HTTP and NATS against the same engine;
// every read right after the write must show it: the session view (intent
// and sequence), the resolution and, every 25th round, the history. Every
// 10th round also opens a turn and dispatches it: the frozen turn's reply must carry the
// intent at (or after) the sequence of its tools, never a stale one.
func TestReadYourWritesWithinOneEngine(t *testing.T) {
	e := newEnv(t, Config{})
	const rounds, workers = 1000, 4 // per transport
	var reads, stale atomic.Int64
	var wg sync.WaitGroup
	for _, tr := range []struct {
		name string
		c    *Client
	}{{"http", e.httpClient()}, {"nats", e.natsClient()}} {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Bounded, and generous: under -race on 2 busy cores the
				// 1,000 rounds take about a minute.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				s := fmt.Sprintf("ryw-%s-%d", tr.name, w)
				var seen uint64 // highest sequence read so far: reads never go below it
				check := func(what string, seq, wrote uint64) bool {
					reads.Add(1)
					if seq < wrote || seq < seen {
						stale.Add(1)
						t.Errorf("%s %s: read at seq %d after writing %d (and reading %d before): stale read", s, what, seq, wrote, seen)
						return false
					}
					seen = seq
					return true
				}
				for i := range rounds / workers {
					tool := []string{"bash", "grep", "glob", "web_fetch"}[i%4]
					var cmd events.Payload = events.ToolDisabled{Name: tool}
					if i%2 == 1 {
						cmd = events.ToolEnabled{Name: tool}
					}
					wr, err := tr.c.Append(ctx, s, nil, cmd)
					if err != nil {
						t.Errorf("%s append: %v", s, err)
						return
					}
					disabled := wr.State.Intent.Disabled
					v, err := tr.c.Intent(ctx, s, 0)
					if err != nil {
						t.Errorf("%s intent: %v", s, err)
						return
					}
					if !check("intent", v.Seq, wr.LastSeq) || !slices.Equal(v.Intent.Disabled, disabled) {
						t.Errorf("%s intent after write at %d: disabled %v, want %v", s, wr.LastSeq, v.Intent.Disabled, disabled)
						return
					}
					r, err := tr.c.Resolve(ctx, wire.ResolveRequest{Session: s})
					if err != nil {
						t.Errorf("%s resolve: %v", s, err)
						return
					}
					if !check("resolve", r.Seq, wr.LastSeq) || slices.Contains(r.Tools, tool) != (i%2 == 1) {
						t.Errorf("%s resolve after write at %d (%T %s): tools %v", s, wr.LastSeq, cmd, tool, r.Tools)
						return
					}
					if i%25 == 24 { // a history replays the whole session: not every round
						h, err := tr.c.History(ctx, wire.HistoryRequest{Session: s})
						if err != nil {
							t.Errorf("%s history: %v", s, err)
							return
						}
						if !check("history", h.State.Seq, wr.LastSeq) {
							return
						}
					}
					if i%10 != 9 {
						continue
					}
					bt, err := tr.c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s})
					if err != nil {
						t.Errorf("%s begin turn: %v", s, err)
						return
					}
					d, err := tr.c.Dispatch(ctx, s, "")
					if err != nil {
						t.Errorf("%s dispatch: %v", s, err)
						return
					}
					if !check("dispatch", d.Seq, bt.Seq) || !slices.Equal(d.Intent.Disabled, bt.Intent.Disabled) || !slices.Equal(d.Tools, bt.Tools) {
						t.Errorf("%s dispatch of the turn begun at %d: seq %d intent %+v tools %v, want intent %+v tools %v",
							s, bt.Seq, d.Seq, d.Intent, d.Tools, bt.Intent, bt.Tools)
						return
					}
					if _, err := tr.c.EndTurn(ctx, s); err != nil {
						t.Errorf("%s end turn: %v", s, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d reads right after a write, %d stale", reads.Load(), stale.Load())
}
