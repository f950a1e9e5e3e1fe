package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// The stream's dedupe window is stream-wide, so an event id
// already stored on session A, appended to session B, makes the server
// answer "duplicate" with A's sequence. The log checks that answer: it is
// refused (ErrKeyInUse, naming the id, not A) and nothing is stored on B,
// for one event and for an atomic batch; a retry of A's own append is
// still a duplicate at A's sequences.
func TestAppendDuplicateOfAnotherSession(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	one := toggled("a")
	two := []events.Envelope{toggled("a"), events.New("a", "web", "alice", events.ToolDisabled{Name: "bash"})}
	ra1, err := l.Append(ctx, "a", 0, one)
	if err != nil {
		t.Fatal(err)
	}
	ra2, err := l.Append(ctx, "a", ra1.Last, two...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "b", 0, toggled("b")); err != nil {
		t.Fatal(err)
	}
	onB := func(evs ...events.Envelope) []events.Envelope {
		out := make([]events.Envelope, len(evs))
		for i, e := range evs {
			e.Session = "b"
			out[i] = e
		}
		return out
	}
	for name, evs := range map[string][]events.Envelope{"one event": onB(one), "batch": onB(two...)} {
		res, err := l.Append(ctx, "b", 4, evs...)
		if !errors.Is(err, logport.ErrKeyInUse) {
			t.Fatalf("%s: A's ids on B: %+v %v, want ErrKeyInUse", name, res, err)
		}
		if !strings.Contains(err.Error(), evs[0].ID) || strings.Contains(err.Error(), `"a"`) {
			t.Fatalf("%s: %q must name the id %s, not session a", name, err, evs[0].ID)
		}
	}
	if last, err := l.LastSeq(ctx, "b"); err != nil || last != 4 {
		t.Fatalf("b's last sequence %d %v, want 4 (its one event)", last, err)
	}
	recs, err := l.ReadSession(ctx, "b", 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("b holds %d events (%v), want 1", len(recs), err)
	}
	// A's own retries: duplicates at A's sequences.
	if got, err := l.Append(ctx, "a", 0, one); err != nil || !got.Duplicate || got.First != ra1.First {
		t.Fatalf("retry on a: %+v %v, want duplicate at %d", got, err, ra1.First)
	}
	if got, err := l.Append(ctx, "a", ra1.Last, two...); err != nil || !got.Duplicate || got.First != ra2.First || got.Last != ra2.Last {
		t.Fatalf("batch retry on a: %+v %v, want duplicate at %d..%d", got, err, ra2.First, ra2.Last)
	}
}

// The idempotency-key index opens on an engine whose bucket reads go
// half to a replica behind the leader that does not hold the record of
// when the index began (another engine wrote it): each open finds that
// record, and keeps its value, rather than failing with "key not found".
func TestKeyIndexOpensPastALaggingReplica(t *testing.T) {
	ctx := context.Background()
	first, nc := openLog(t)
	const bucket = "TOOLS_KEYS"
	kv, err := first.JetStream().CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: bucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "other", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingMirror(t, first.JetStream(), "KV_"+bucket, "$KV."+bucket+".other")
	if _, err := first.Keys(ctx); err != nil {
		t.Fatalf("first open of the index: %v", err)
	}
	// Stream info: the leader's count.
	st, err := first.JetStream().Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	began := st.CachedInfo().State.LastSeq
	for i := 0; i < 20; i++ {
		l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Keys(ctx); err != nil {
			t.Fatalf("open %d of the index: %v", i, err)
		}
	}
	if st, err = first.JetStream().Stream(ctx, "KV_"+bucket); err != nil {
		t.Fatal(err)
	}
	if last := st.CachedInfo().State.LastSeq; last != began {
		t.Fatalf("the bucket's last sequence went from %d to %d: an open rewrote the record of when the index began", began, last)
	}
}
