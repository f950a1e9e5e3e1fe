package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// A paced feed with Skip hands on the runs Skip gives up without the
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
	skip := func(from uint64, limit int) ([]logport.Record, uint64) {
		mu.Lock()
		defer mu.Unlock()
		var run []logport.Record
		for seq := from; handed[seq] && len(run) < limit; seq++ {
			run = append(run, logport.Record{Seq: seq, Session: sessions[seq], Held: true})
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
	// A tick may ask again while a pull is still arriving (a loaded
	// machine), so a handed sequence the consumer had already been asked
	// for is delivered rather than skipped, and a repeat may follow a skip:
	// the reader (the projection) drops sequences below its next. What
	// holds whatever the timing: every sequence arrives, the others
	// delivered and decoded, the handed ones skipped (held, no data) or
	// delivered and decoded, and the runs are skipped at all.
	first := map[uint64]logport.Record{}
	var next uint64 = 1
	for next <= n {
		b, err := f.Next(ctx, 100)
		if err != nil {
			t.Fatalf("at sequence %d: %v", next, err)
		}
		for _, r := range b.Records {
			if r.Seq < next {
				continue // a repeat, dropped as the projection drops it
			}
			if r.Seq != next {
				t.Fatalf("sequence %d arrived when %d was next: a gap", r.Seq, next)
			}
			first[r.Seq] = r
			next++
		}
		if err := f.Ack(b); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	for seq := uint64(1); seq <= n; seq++ {
		r := first[seq]
		handedSeq := seq >= 3 && seq != 7
		skipped := r.Held && r.Data == nil
		if r.Session != sessions[seq] || (skipped && !handedSeq) {
			t.Fatalf("seq %d: held %v, data %d B, session %q: want session %q, skipped only if handed over (%v)", seq, r.Held, len(r.Data), r.Session, sessions[seq], handedSeq)
		}
		if !skipped && (r.Err != nil || r.Envelope.Session != sessions[seq]) {
			t.Fatalf("delivered seq %d not decoded: %+v", seq, r)
		}
		if skipped {
			held++
		}
	}
	if held == 0 || f.Skipped() < uint64(held) {
		t.Fatalf("%d sequences arrived skipped, the feed counts %d: want the handed runs skipped", held, f.Skipped())
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

// A feed whose consumer resets are never answered (here a user not
// allowed to reset: the server drops the request) loses nothing: the
// consumer, still behind, delivers the skipped events again (the feed's
// consumer drops them as folded) and everything after them; after
// resetTimeout the feed stops skipping and handed events are delivered.
func TestFeedWithoutResetLosesNothing(t *testing.T) {
	perms := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.CONSUMER.RESET.>"}}}
	srv := natstest.ServerWith(t, server.Options{Users: []*server.User{{Username: "eng", Password: "pw", Permissions: perms}}})
	nc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("eng", "pw"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	add := func(n int) {
		for range n {
			res, err := l.Append(ctx, "s", last, toggled("s"))
			if err != nil {
				t.Fatal(err)
			}
			last = res.Last
		}
	}
	add(6)
	var mu sync.Mutex
	handed := map[uint64]bool{1: true, 2: true, 3: true}
	skip := func(from uint64, limit int) ([]logport.Record, uint64) {
		mu.Lock()
		defer mu.Unlock()
		var run []logport.Record
		for seq := from; handed[seq] && len(run) < limit; seq++ {
			run = append(run, logport.Record{Seq: seq, Session: "s", Held: true})
			delete(handed, seq)
		}
		return run, 0
	}
	f, err := l.Feed(ctx, jetstream.FeedConfig{Durable: "noreset", Pace: 2 * time.Millisecond, Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	delivered := map[uint64]bool{}
	held := map[uint64]bool{}
	collect := func(upTo uint64) {
		t.Helper()
		for !delivered[upTo] {
			b, err := f.Next(ctx, 100)
			if err != nil {
				t.Fatalf("waiting for %d: %v", upTo, err)
			}
			for _, r := range b.Records {
				if r.Held {
					held[r.Seq] = true
				} else {
					delivered[r.Seq] = true
				}
			}
		}
	}
	collect(6)
	for seq := uint64(1); seq <= 6; seq++ {
		if !delivered[seq] {
			t.Fatalf("seq %d not delivered (held: %v): the consumer, never reset, must deliver everything", seq, held[seq])
		}
	}
	if len(held) != 3 || f.Skipped() != 3 {
		t.Fatalf("held %v, skipped %d: want 1-3 skipped once", held, f.Skipped())
	}
	// Once the unanswered reset times out, handed events are delivered.
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		b, err := f.NextWithin(ctx, 100, 0)
		if err != nil {
			return err
		}
		if len(b.Records) > 0 {
			return fmt.Errorf("unexpected records %d..", b.Records[0].Seq)
		}
		before := f.Skipped()
		mu.Lock()
		handed[last+1] = true
		mu.Unlock()
		add(1)
		collect(last)
		if f.Skipped() != before {
			return fmt.Errorf("handed seq %d skipped: the feed still skips", last)
		}
		return nil
	})
}
