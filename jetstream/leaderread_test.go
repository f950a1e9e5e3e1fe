package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// ReadLeader reads an event as the direct-get reads do (same
// session, id, time, first-of-subject mark and envelope) and answers
// ErrNotStored past the stream's end: the fallback a feed's gap fill takes
// when a lagging replica's direct gets come up short.
func TestReadLeaderMatchesDirectReads(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	if _, err := l.Append(ctx, "lr1", 0, toggled("lr1")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "lr2", 0, toggled("lr2"), toggled("lr2")); err != nil {
		t.Fatal(err)
	}
	var direct []logport.Record
	if err := l.ScanRange(ctx, 1, 3, func(r logport.Record) error { direct = append(direct, r); return nil }); err != nil || len(direct) != 3 {
		t.Fatalf("direct reads: %d records, %v", len(direct), err)
	}
	for _, d := range direct {
		r, err := l.ReadLeader(ctx, d.Seq)
		if err != nil {
			t.Fatalf("ReadLeader(%d): %v", d.Seq, err)
		}
		if r.Seq != d.Seq || r.Session != d.Session || r.MsgID != d.MsgID || !r.Time.Equal(d.Time) || r.First != d.First ||
			r.Err != nil || r.Envelope.ID != d.Envelope.ID || string(r.Data) != string(d.Data) {
			t.Errorf("seq %d: leader read %+v, direct read %+v", d.Seq, r, d)
		}
	}
	if !direct[0].First || !direct[1].First || direct[2].First {
		t.Errorf("first-of-subject marks %v %v %v, want true true false", direct[0].First, direct[1].First, direct[2].First)
	}
	if _, err := l.ReadLeader(ctx, 99); !errors.Is(err, jetstream.ErrNotStored) {
		t.Errorf("ReadLeader past the end: %v, want ErrNotStored", err)
	}
}

// A re-sent append on a replicated stream is answered
// "duplicate, stored at seq" by the leader, and the writer checks that seq
// holds its events with a direct get, which a follower that has not yet
// applied seq answers "not found". StoredAt asks the leader then, and says
// stored. The lagging replica here is a mirror that holds nothing and
// answers the stream's direct gets beside the stream itself (MirrorDirect):
// about half the reads go to it, so 40 reads without the leader's answer
// would fail with certainty but for 2^-40.
func TestStoredAtAsksLeaderWhenReplicaLags(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	natstest.LaggingReplica(t, l)
	evs := []events.Envelope{toggled("lag1"), toggled("lag1")}
	res, err := l.Append(ctx, "lag1", 0, evs...)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{evs[0].ID, evs[1].ID}
	for i := 0; i < 40; i++ {
		ok, err := l.StoredAt(ctx, "lag1", res.First, ids)
		if err != nil || !ok {
			t.Fatalf("read %d: StoredAt = %v, %v; want true (the leader holds both)", i, ok, err)
		}
	}
	// A sequence nobody holds stays an error, not "stored elsewhere".
	if ok, err := l.StoredAt(ctx, "lag1", res.Last+5, ids[:1]); err == nil {
		t.Errorf("StoredAt past the end = %v, nil; want an error", ok)
	}
}

// A re-sent atomic batch whose first copy was stored is
// answered 10201 (ids already stored: the server checks them before the
// expected sequence), which names no sequence; the append looks for its
// events on the session up to where the stream's leader says the session
// is, not up to where a lagging replica's direct gets end. Before, one
// short read answered "key in use by another session" for a stored batch.
func TestResentBatchFoundPastLaggingReplica(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	natstest.LaggingReplica(t, l)
	for i := 0; i < 20; i++ {
		s := fmt.Sprintf("resent-%d", i)
		evs := []events.Envelope{toggled(s), toggled(s), toggled(s)}
		first, err := l.Append(ctx, s, 0, evs...)
		if err != nil {
			t.Fatal(err)
		}
		again, err := l.Append(ctx, s, 0, evs...)
		if err != nil {
			t.Fatalf("%s: re-sent batch: %v, want it found stored at %d..%d", s, err, first.First, first.Last)
		}
		if !again.Duplicate || again.First != first.First || again.Last != first.Last {
			t.Fatalf("%s: re-sent batch = %+v, want duplicate at %d..%d", s, again, first.First, first.Last)
		}
	}
}

// LeaderLastSeq and ReadSessionThrough answer from the leader what a
// lagging replica's direct gets miss.
func TestLeaderReadsPastLaggingReplica(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	natstest.LaggingReplica(t, l)
	var want []uint64
	for i := 0; i < 5; i++ {
		r, err := l.Append(ctx, "through", uint64(0), toggled("through"))
		if i > 0 {
			r, err = l.Append(ctx, "through", want[len(want)-1], toggled("through"))
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Last)
		if _, err := l.Append(ctx, fmt.Sprintf("between-%d", i), 0, toggled(fmt.Sprintf("between-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		n, err := l.LeaderLastSeq(ctx, "through")
		if err != nil || n != want[4] {
			t.Fatalf("LeaderLastSeq = %d, %v; want %d", n, err, want[4])
		}
		recs, err := l.ReadSessionThrough(ctx, "through", want[1], want[3])
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[1:4]) {
			t.Fatalf("read %d: ReadSessionThrough = %v, want %v", i, got, want[1:4])
		}
	}
	if n, err := l.LeaderLastSeq(ctx, "never-written"); err != nil || n != 0 {
		t.Errorf("LeaderLastSeq of an empty session = %d, %v; want 0", n, err)
	}
}
