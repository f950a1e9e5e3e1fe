package projection_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// A rebuild folds every view again from the log (views are derived
// data): a view stored before the rebuild is never the base of a
// session's fold, even when the rebuild's set of evicted sessions answers
// "maybe" for a session it never held (a Bloom filter's false positive,
// here forced for every session). Stale views (a fold rule that changed,
// a view written wrongly) come out as the fold of the log, through the
// ordered catch-up and through the durable feed alike.
func TestRebuildNeverFoldsOnAnOlderView(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			minBacklog := uint64(math.MaxUint64)
			if ordered {
				minBacklog = 1
			}
			defer projection.SetOrderedCatchUpMin(projection.SetOrderedCatchUpMin(minBacklog))
			defer projection.SetEvictedAlwaysMaybe(projection.SetEvictedAlwaysMaybe(true))
			srv := natstest.Server(t)
			nc := natstest.Connect(t, srv.ClientURL())
			ctx := context.Background()
			log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 40
			seqs := make(map[string]uint64, n)
			var last uint64
			for i := range n {
				s := fmt.Sprintf("s%d", i)
				r, err := log.Append(ctx, s, 0, toggled(s, true))
				if err != nil {
					t.Fatal(err)
				}
				seqs[s], last = r.Last, r.Last
			}
			p, err := projection.Open(ctx, log, projection.Config{CacheSize: 10, BatchSize: 8})
			if err != nil {
				t.Fatal(err)
			}
			stop := runFor(t, p)
			if err := p.WaitApplied(ctx, last); err != nil {
				t.Fatal(err)
			}
			stop()
			// Every view now says what no event says: tools off, at the
			// session's own last sequence.
			var puts []jetstream.Put
			for s, seq := range seqs {
				off := false
				st := aggregate.State{Session: s, LastSeq: seq, Events: 1}
				st.Intent.Enabled = &off
				data, err := aggregate.MarshalState(st)
				if err != nil {
					t.Fatal(err)
				}
				puts = append(puts, jetstream.Put{Key: s, Value: data})
			}
			if err := p.Views().PutAll(ctx, puts); err != nil {
				t.Fatal(err)
			}
			// engine rebuild: the feed deleted, a projection from the
			// first event, a small cache.
			if err := log.ResetFeed(ctx, projection.DefaultDurable); err != nil {
				t.Fatal(err)
			}
			p, err = projection.Open(ctx, log, projection.Config{CacheSize: 10, BatchSize: 8})
			if err != nil {
				t.Fatal(err)
			}
			stop = runFor(t, p)
			if err := p.WaitApplied(ctx, last); err != nil {
				t.Fatal(err)
			}
			stop()
			for s, seq := range seqs {
				data, err := p.Views().Get(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				st, err := aggregate.UnmarshalState(data)
				if err != nil {
					t.Fatal(err)
				}
				if st.LastSeq != seq || st.Intent.Enabled == nil || !*st.Intent.Enabled {
					t.Fatalf("%s after the rebuild: seq %d (want %d), intent %+v (want tools on): the view stored before the rebuild was folded on, not the log", s, st.LastSeq, seq, st.Intent)
				}
			}
		})
	}
}
