package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// #28, R24: ReadLeader reads an event as the direct-get reads do (same
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
	var direct []jetstream.Record
	if err := l.ScanRange(ctx, 1, 3, func(r jetstream.Record) error { direct = append(direct, r); return nil }); err != nil || len(direct) != 3 {
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

// #20 item 3, R23: a re-sent append on a replicated stream is answered
// "duplicate, stored at seq" by the leader, and the writer checks that seq
// holds its events with a direct get, which a follower that has not yet
// applied seq answers "not found". StoredAt asks the leader then, and says
// stored. The lagging replica here is a mirror that holds nothing and
// answers the stream's direct gets beside the stream itself (MirrorDirect):
// about half the reads go to it, so 40 reads without the leader's answer
// would fail with certainty but for 2^-40.
func TestStoredAtAsksLeaderWhenReplicaLags(t *testing.T) {
	ctx := context.Background()
	l, nc := openLog(t)
	// The mirror answers direct gets once it has mirrored a message: it
	// mirrors only session "other", whose event is at sequence 1 (a mirror
	// keeps the stream's sequences), and holds nothing after.
	if _, err := l.Append(ctx, "other", 0, toggled("other")); err != nil {
		t.Fatal(err)
	}
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := js.CreateStream(ctx, njs.StreamConfig{
		Name:         "LAGGING_REPLICA",
		Mirror:       &njs.StreamSource{Name: l.StreamName(), FilterSubject: l.Subject("other")},
		MirrorDirect: true,
		AllowDirect:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := mirror.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 1 {
			return fmt.Errorf("mirror holds %d messages, want 1", info.State.Msgs)
		}
		return nil
	})
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
