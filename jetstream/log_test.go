package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

func openLog(t testing.TB) (*jetstream.Log, *nats.Conn) {
	t.Helper()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	l, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	return l, nc
}

func on(b bool) *bool { return &b }

func toggled(session string) events.Envelope {
	return events.New(session, "web", "alice", events.ToolsToggled{Enabled: on(true)})
}

// Append with the expected subject sequence; a stale expectation is a
// conflict carrying the session's real sequence.
func TestAppendConflict(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	r1, err := l.Append(ctx, "s1", 0, toggled("s1"))
	if err != nil {
		t.Fatalf("first append: %v", err)
	}
	if r1.First != 1 || r1.Last != 1 || r1.Duplicate {
		t.Fatalf("first append result = %+v, want seq 1", r1)
	}
	// Another session's append does not move s1's sequence.
	if _, err := l.Append(ctx, "s2", 0, toggled("s2")); err != nil {
		t.Fatalf("append s2: %v", err)
	}
	_, err = l.Append(ctx, "s1", 0, toggled("s1"))
	var ce *logport.ConflictError
	if !errors.Is(err, logport.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("stale append error = %v, want ErrConflict", err)
	}
	if ce.Expected != 0 || ce.Actual != 1 || ce.Session != "s1" {
		t.Fatalf("conflict = %+v, want expected 0 actual 1", ce)
	}
	r3, err := l.Append(ctx, "s1", ce.Actual, toggled("s1"))
	if err != nil {
		t.Fatalf("append at actual: %v", err)
	}
	if r3.Last != 3 {
		t.Fatalf("third event seq = %d, want 3", r3.Last)
	}
	last, err := l.LastSeq(ctx, "s1")
	if err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v; want 3", last, err)
	}
	last, err = l.LastSeq(ctx, "nobody")
	if err != nil || last != 0 {
		t.Fatalf("LastSeq of empty session = %d, %v; want 0", last, err)
	}
}

// A retried publish with the same ULID is stored once.
func TestAppendDedupe(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	e := toggled("s1")
	r1, err := l.Append(ctx, "s1", 0, e)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Append(ctx, "s1", 0, e)
	if err != nil {
		t.Fatalf("retry with same id: %v", err)
	}
	if !r2.Duplicate || r2.Last != r1.Last {
		t.Fatalf("retry result = %+v, want duplicate of seq %d", r2, r1.Last)
	}
	recs, err := l.ReadSession(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("stored %d events, want 1", len(recs))
	}
}

// A multi-event append is all or nothing.
func TestAppendBatchAtomic(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	if !l.Atomic() {
		t.Fatal("embedded server should allow atomic batches")
	}
	batch := []events.Envelope{
		toggled("s1"),
		events.New("s1", "web", "alice", events.PresetChosen{Preset: "research"}),
		events.New("s1", "web", "alice", events.ToolDisabled{Name: "bash"}),
	}
	r, err := l.Append(ctx, "s1", 0, batch...)
	if err != nil {
		t.Fatalf("batch append: %v", err)
	}
	if r.First != 1 || r.Last != 3 {
		t.Fatalf("batch result = %+v, want 1..3", r)
	}
	// A stale batch writes nothing at all.
	stale := []events.Envelope{toggled("s1"), toggled("s1")}
	if _, err := l.Append(ctx, "s1", 1, stale...); !errors.Is(err, logport.ErrConflict) {
		t.Fatalf("stale batch error = %v, want conflict", err)
	}
	recs, err := l.ReadSession(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("after stale batch: %d events, want 3", len(recs))
	}
	for i, rec := range recs {
		if rec.Err != nil || rec.Envelope.ID != batch[i].ID || rec.Seq != uint64(i+1) {
			t.Fatalf("record %d = %+v, want %s at %d", i, rec, batch[i].ID, i+1)
		}
	}
	// A retried batch (same ids) is stored once.
	r2, err := l.Append(ctx, "s1", 0, batch...)
	if err != nil {
		t.Fatalf("retried batch: %v", err)
	}
	if !r2.Duplicate {
		t.Fatalf("retried batch result = %+v, want duplicate", r2)
	}
	if last, _ := l.LastSeq(ctx, "s1"); last != 3 {
		t.Fatalf("after retried batch last seq = %d, want 3", last)
	}
}

// A bad session id never reaches a subject.
func TestAppendRejectsBadSession(t *testing.T) {
	l, _ := openLog(t)
	for _, s := range []string{"", "a.b", "a*", ">", "a b"} {
		if _, err := l.Append(context.Background(), s, 0, toggled(s)); !errors.Is(err, jetstream.ErrInvalidSession) {
			t.Errorf("Append(%q) error = %v, want ErrInvalidSession", s, err)
		}
	}
}

// Many goroutines racing on one session with read-then-CAS never lose
// an acknowledged event.
func TestAppendRace(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	const writers, each = 4, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]uint64{}
	conflicts := 0
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e := toggled("hot")
				for {
					last, err := l.LastSeq(ctx, "hot")
					if err != nil {
						t.Error(err)
						return
					}
					r, err := l.Append(ctx, "hot", last, e)
					if errors.Is(err, logport.ErrConflict) {
						mu.Lock()
						conflicts++
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked[e.ID] = r.Last
					mu.Unlock()
					break
				}
			}
		}()
	}
	wg.Wait()
	recs, err := l.ReadSession(ctx, "hot", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*each || len(acked) != writers*each {
		t.Fatalf("stored %d, acked %d, want %d", len(recs), len(acked), writers*each)
	}
	for _, r := range recs {
		if acked[r.Envelope.ID] != r.Seq {
			t.Fatalf("event %s stored at %d, acked at %d", r.Envelope.ID, r.Seq, acked[r.Envelope.ID])
		}
	}
	t.Logf("%d appends, %d conflicts retried", len(recs), conflicts)
}

// Reading a session in pages and replaying the whole stream return
// every event in order.
func TestReadSessionAndReplay(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	const n = 600 // more than one direct-get batch
	var seqA, seqB uint64
	for i := 0; i < n; i++ {
		r, err := l.Append(ctx, "a", seqA, toggled("a"))
		if err != nil {
			t.Fatal(err)
		}
		seqA = r.Last
		if i%3 == 0 {
			r, err := l.Append(ctx, "b", seqB, toggled("b"))
			if err != nil {
				t.Fatal(err)
			}
			seqB = r.Last
		}
	}
	recs, err := l.ReadSession(ctx, "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("read %d events of a, want %d", len(recs), n)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq <= recs[i-1].Seq || recs[i].Session != "a" {
			t.Fatalf("record %d out of order or wrong session: %+v", i, recs[i])
		}
	}
	part, err := l.ReadSession(ctx, "a", recs[100].Seq, recs[109].Seq)
	if err != nil || len(part) != 10 || part[0].Seq != recs[100].Seq {
		t.Fatalf("ranged read = %d records, %v; want 10 from %d", len(part), err, recs[100].Seq)
	}
	var total int
	var prev uint64
	err = l.Replay(ctx, 0, func(r logport.Record) error {
		if r.Seq != prev+1 {
			return fmt.Errorf("replay jumped from %d to %d", prev, r.Seq)
		}
		prev = r.Seq
		total++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != n+n/3 {
		t.Fatalf("replayed %d, want %d", total, n+n/3)
	}
}

// An undecodable message on a session subject is returned with Err set,
// not dropped, and does not stop the read.
func TestReadReportsUndecodable(t *testing.T) {
	l, nc := openLog(t)
	ctx := context.Background()
	if _, err := l.Append(ctx, "s", 0, toggled("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request(l.Subject("s"), []byte("\xc1 not msgpack"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "s", 2, toggled("s")); err != nil {
		t.Fatal(err)
	}
	recs, err := l.ReadSession(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Err != nil || recs[1].Err == nil || recs[2].Err != nil {
		t.Fatalf("records = %+v, want the middle one undecodable", recs)
	}
}

// The stream denies message deletes; purge is left to the
// erase path, which only a privileged user may take (the users'
// permissions deny it to everyone else: tests/permissions_test.go).
func TestStreamDeniesPurge(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	if _, err := l.Append(ctx, "s", 0, toggled("s")); err != nil {
		t.Fatal(err)
	}
	st, err := l.JetStream().Stream(ctx, l.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 1); err == nil {
		t.Fatal("delete succeeded, want it denied")
	}
	if cfg := st.CachedInfo().Config; !cfg.DenyDelete || cfg.DenyPurge {
		t.Fatalf("deny_delete %v deny_purge %v, want deny_delete only", cfg.DenyDelete, cfg.DenyPurge)
	}
}

// Every read path (batched direct gets, the ordered-consumer replay,
// the durable feed) hands the fold the Nats-Msg-Id header each message was
// stored with: the id for the engine's appends (one at a time and atomic
// batches), "" for a message without one, and whatever a direct publisher
// set.
func TestReadCarriesMsgID(t *testing.T) {
	l, nc := openLog(t)
	ctx := context.Background()
	one := toggled("s")
	if _, err := l.Append(ctx, "s", 0, one); err != nil {
		t.Fatal(err)
	}
	b1, b2 := toggled("s"), toggled("s")
	if _, err := l.Append(ctx, "s", 1, b1, b2); err != nil {
		t.Fatal(err)
	}
	raw, err := events.Encode(toggled("s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request(l.Subject("s"), raw, 5*time.Second); err != nil { // no header
		t.Fatal(err)
	}
	m := nats.NewMsg(l.Subject("s"))
	m.Data = raw
	m.Header.Set("Nats-Msg-Id", "someone-else")
	if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want := []string{one.ID, b1.ID, b2.ID, "", "someone-else"}
	check := func(path string, recs []logport.Record) {
		t.Helper()
		var got []string
		for _, r := range recs {
			got = append(got, r.MsgID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: Nats-Msg-Id %q, want %q", path, got, want)
		}
	}
	recs, err := l.ReadSession(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("direct get", recs)
	recs = nil
	if err := l.Replay(ctx, 0, func(r logport.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	check("replay", recs)
	feed, err := l.Feed(ctx, jetstream.FeedConfig{Durable: "msgid"})
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Stop()
	recs = nil
	for len(recs) < len(want) {
		b, err := feed.NextWithin(ctx, 10, 10*time.Second)
		if err != nil || len(b.Records) == 0 {
			t.Fatalf("feed after %d records: %v", len(recs), err)
		}
		recs = append(recs, b.Records...)
	}
	check("feed", recs)
}
