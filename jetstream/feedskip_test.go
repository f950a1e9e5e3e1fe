package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// #28: a paced feed with Skip hands on the runs Skip gives up without the
// consumer delivering them (each sequence reaches the consumer exactly
// once: skipped ones held and without data, the others delivered and
// decoded), pulls only the sequences between the runs, and moves the
// consumer past the runs: its acknowledged position reaches the last
// skipped sequence although no delivery of it was acknowledged, and it
// does not count as a feed that acknowledged nothing.
func TestFeedSkipsHandedRuns(t *testing.T) {
	l, _ := openLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 10
	sessions := map[uint64]string{}
	last := map[string]uint64{}
	for i := range n {
		s := fmt.Sprintf("s%d", i%3)
		res, err := l.Append(ctx, s, last[s], toggled(s))
		if err != nil {
			t.Fatal(err)
		}
		last[s] = res.Last
		sessions[res.Last] = s
	}
	// Sequences 3-6 and 8-10 were "handed over"; 1, 2 and 7 were not.
	var mu sync.Mutex
	handed := map[uint64]bool{3: true, 4: true, 5: true, 6: true, 8: true, 9: true, 10: true}
	skip := func(from uint64, limit int) ([]jetstream.Record, uint64) {
		mu.Lock()
		defer mu.Unlock()
		var run []jetstream.Record
		for seq := from; handed[seq] && len(run) < limit; seq++ {
			run = append(run, jetstream.Record{Seq: seq, Session: sessions[seq], Held: true})
			delete(handed, seq)
		}
		if len(run) > 0 {
			return run, 0
		}
		var next uint64
		for seq := range handed {
			if seq > from && (next == 0 || seq < next) {
				next = seq
			}
		}
		return nil, next
	}
	f, err := l.Feed(ctx, jetstream.FeedConfig{Durable: "skipper", Pace: 2 * time.Millisecond, Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	seen := map[uint64]int{}
	var got []jetstream.Record
	for len(got) < n {
		b, err := f.Next(ctx, 100)
		if err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		for _, r := range b.Records {
			seen[r.Seq]++
			got = append(got, r)
		}
		if err := f.Ack(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range got {
		if r.Seq != uint64(i+1) || seen[r.Seq] != 1 {
			t.Fatalf("record %d is seq %d (seen %d times): want each of 1..%d once, in order", i, r.Seq, seen[r.Seq], n)
		}
		skipped := r.Seq >= 3 && r.Seq != 7
		if r.Held != skipped || (r.Data == nil) != skipped || r.Session != sessions[r.Seq] {
			t.Fatalf("seq %d: held %v, data %d B, session %q: want skipped=%v, session %q", r.Seq, r.Held, len(r.Data), r.Session, skipped, sessions[r.Seq])
		}
		if !skipped && (r.Err != nil || r.Envelope.Session != sessions[r.Seq]) {
			t.Fatalf("delivered seq %d not decoded: %+v", r.Seq, r)
		}
	}
	if f.Skipped() != 7 {
		t.Fatalf("skipped %d, want 7", f.Skipped())
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		pos, err := f.Position(ctx)
		if err != nil {
			return err
		}
		if pos.AckFloor != n || pos.AckedNone || pos.Undelivered != 0 {
			return fmt.Errorf("position %+v: want ack floor %d, acknowledged, nothing undelivered", pos, n)
		}
		return nil
	})
	// Nothing more comes: the skipped sequences are not delivered later.
	b, err := f.NextWithin(ctx, 100, 100*time.Millisecond)
	if err != nil || len(b.Records) != 0 {
		t.Fatalf("after the last sequence: %d records (%v), want none", len(b.Records), err)
	}
}
