package jetstream_test

import (
	"context"
	"errors"
	"testing"

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
