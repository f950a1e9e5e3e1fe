package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// next reads one event from w, failing the test after a generous bound
// (a hang guard, not a timed assertion).
func next(t *testing.T, w *jetstream.Watcher) logport.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("watch next: %v", err)
	}
	if r.Err != nil {
		t.Fatalf("watch next: event %d undecodable: %v", r.Seq, r.Err)
	}
	return r
}

// A session's watch starts after afterSeq, sees only that session's
// events, stored then live; the all-sessions watch sees every event in
// stream order.
func TestWatchResumeFilterAndOrder(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	var seqs []uint64 // every event's sequence, stream order
	var s1 []uint64
	for i := range 6 {
		s := []string{"s1", "s2"}[i%2]
		last, err := l.LastSeq(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Append(ctx, s, last, toggled(s))
		if err != nil {
			t.Fatalf("append %s: %v", s, err)
		}
		seqs = append(seqs, r.First)
		if s == "s1" {
			s1 = append(s1, r.First)
		}
	}
	// Resume after s1's first event: exactly the later s1 events.
	w, err := l.Watch(ctx, "s1", s1[0])
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range s1[1:] {
		if r := next(t, w); r.Seq != want || r.Session != "s1" || r.Envelope.Session != "s1" {
			t.Fatalf("s1 watch got seq %d session %q, want %d on s1", r.Seq, r.Session, want)
		}
	}
	all, err := l.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	for _, want := range seqs {
		if r := next(t, all); r.Seq != want {
			t.Fatalf("all watch got seq %d, want %d (stream order)", r.Seq, want)
		}
	}
	// Live: an append after the watch started reaches both, s2's only the
	// all-sessions one.
	last2, _ := l.LastSeq(ctx, "s2")
	r2, err := l.Append(ctx, "s2", last2, toggled("s2"))
	if err != nil {
		t.Fatal(err)
	}
	last1, _ := l.LastSeq(ctx, "s1")
	r1, err := l.Append(ctx, "s1", last1, toggled("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if r := next(t, w); r.Seq != r1.First {
		t.Fatalf("s1 watch live got %d, want %d (s2's %d must not reach it)", r.Seq, r1.First, r2.First)
	}
	if a, b := next(t, all), next(t, all); a.Seq != r2.First || b.Seq != r1.First {
		t.Fatalf("all watch live got %d, %d, want %d, %d", a.Seq, b.Seq, r2.First, r1.First)
	}
	// A watch after the end waits; Stop ends it with ErrWatchStopped.
	tail, err := l.Watch(ctx, "s1", r1.First)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = tail.Next(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("next with nothing new = %v, want the context's deadline", err)
	}
	tail.Stop()
	if _, err := tail.Next(ctx); !errors.Is(err, jetstream.ErrWatchStopped) {
		t.Fatalf("next after stop = %v, want ErrWatchStopped", err)
	}
	if _, err := l.Watch(ctx, "a.b", 0); err == nil {
		t.Fatal("watch of a session id with a dot: want an error")
	}
}
