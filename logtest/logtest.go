// Package logtest is the conformance suite of the event log (the
// contract logport.Log states), in the pattern of testing/slogtest: every
// implementation (the JetStream log, memlog) runs the same cases, so the
// engine can rely on one contract. It needs no NATS.
//
//	func TestConformance(t *testing.T) {
//		logtest.Run(t, func(t *testing.T) logtest.Log { return memlog.New() })
//	}
package logtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Log is the log under test (logport.Log).
type Log = logport.Log

// Run runs every case as a subtest, each on a fresh, empty log from
// newLog (which registers its own cleanup with t).
func Run(t *testing.T, newLog func(t *testing.T) Log) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newLog(t)) })
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, l Log)
}{
	{"AppendThenRead", appendThenRead},
	{"SequencesStreamWide", sequencesStreamWide},
	{"BatchAllOrNothing", batchAllOrNothing},
	{"ConflictOnStaleExpected", conflictOnStale},
	{"ConflictOnExpectedAhead", conflictAhead},
	{"OneWinnerPerExpected", oneWinner},
	{"DedupeByID", dedupeByID},
	{"DedupeAfterSessionMoved", dedupeAfterMoved},
	{"IDOfAnotherSession", idOfAnotherSession},
	{"ReadRanges", readRanges},
	{"ScanStopsAtError", scanStops},
	{"StoredAt", storedAt},
	{"InvalidSessionIDs", invalidSessions},
	{"BadEnvelopes", badEnvelopes},
	{"CancelledContext", cancelled},
}

var ctx = context.Background()

func on(b bool) *bool { return &b }

func ev(session string) events.Envelope {
	return events.New(session, "web", "alice", events.ToolsToggled{Enabled: on(true)})
}

func mustAppend(t *testing.T, l Log, session string, expected uint64, evs ...events.Envelope) logport.AppendResult {
	t.Helper()
	r, err := l.Append(ctx, session, expected, evs...)
	if err != nil {
		t.Fatalf("append %d events to %q at %d: %v", len(evs), session, expected, err)
	}
	return r
}

func ids(recs []logport.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Envelope.ID
	}
	return out
}

func envIDs(evs ...events.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func read(t *testing.T, l Log, session string, from, upTo uint64) []logport.Record {
	t.Helper()
	recs, err := l.ReadSession(ctx, session, from, upTo)
	if err != nil {
		t.Fatalf("read %q [%d, %d]: %v", session, from, upTo, err)
	}
	// ReadSessionThrough reads the same events (on one node or a
	// current replica; a lagging one is the jetstream package's test).
	through, err := l.ReadSessionThrough(ctx, session, from, upTo)
	if err != nil {
		t.Fatalf("read %q [%d, %d] through: %v", session, from, upTo, err)
	}
	if fmt.Sprint(seqsOf(through)) != fmt.Sprint(seqsOf(recs)) {
		t.Fatalf("read %q [%d, %d]: ReadSessionThrough read %v, ReadSession %v", session, from, upTo, seqsOf(through), seqsOf(recs))
	}
	return recs
}

func seqsOf(recs []logport.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func lastSeq(t *testing.T, l Log, session string) uint64 {
	t.Helper()
	n, err := l.LastSeq(ctx, session)
	if err != nil {
		t.Fatalf("last sequence of %q: %v", session, err)
	}
	// On one node (or current replicas) the leader's answer is the same.
	if ln, err := l.LeaderLastSeq(ctx, session); err != nil || ln != n {
		t.Fatalf("last sequence of %q: LeaderLastSeq = %d, %v; LastSeq %d", session, ln, err, n)
	}
	return n
}

// An appended event reads back whole, at the sequence the append
// returned; a session without events is at 0.
func appendThenRead(t *testing.T, l Log) {
	if n := lastSeq(t, l, "s1"); n != 0 {
		t.Fatalf("empty session at %d, want 0", n)
	}
	if recs := read(t, l, "s1", 0, 0); len(recs) != 0 {
		t.Fatalf("empty session read %d events", len(recs))
	}
	e := ev("s1")
	r := mustAppend(t, l, "s1", 0, e)
	if r.First == 0 || r.Last != r.First || r.Duplicate {
		t.Fatalf("append result %+v, want one new event", r)
	}
	if n := lastSeq(t, l, "s1"); n != r.Last {
		t.Fatalf("last sequence %d, want %d", n, r.Last)
	}
	recs := read(t, l, "s1", 0, 0)
	if len(recs) != 1 {
		t.Fatalf("read %d events, want 1", len(recs))
	}
	got := recs[0]
	if got.Err != nil || got.Seq != r.First || got.Session != "s1" || got.MsgID != e.ID ||
		got.Envelope.ID != e.ID || got.Envelope.Type != e.Type || got.Envelope.Channel != "web" || got.Envelope.Actor != "alice" {
		t.Fatalf("read back %+v, want event %s at %d", got, e.ID, r.First)
	}
}

// Sequences are stream-wide and grow; each session reads back only
// its own events, in append order.
func sequencesStreamWide(t *testing.T, l Log) {
	var last = map[string]uint64{}
	var want = map[string][]string{}
	var prev uint64
	for i := range 6 {
		s := []string{"a", "b", "c"}[i%3]
		e := ev(s)
		r := mustAppend(t, l, s, last[s], e)
		if r.First <= prev {
			t.Fatalf("append %d got sequence %d after %d: sequences must grow", i, r.First, prev)
		}
		prev, last[s] = r.Last, r.Last
		want[s] = append(want[s], e.ID)
	}
	for s, w := range want {
		recs := read(t, l, s, 0, 0)
		if got := ids(recs); !slices.Equal(got, w) {
			t.Fatalf("session %s read %v, want %v", s, got, w)
		}
		if !slices.IsSortedFunc(recs, func(a, b logport.Record) int { return int(a.Seq) - int(b.Seq) }) {
			t.Fatalf("session %s read out of order", s)
		}
	}
}

// A multi-event append stores every event at consecutive sequences.
func batchAllOrNothing(t *testing.T, l Log) {
	evs := []events.Envelope{ev("s1"), ev("s1"), ev("s1")}
	r := mustAppend(t, l, "s1", 0, evs...)
	if r.Last-r.First != 2 {
		t.Fatalf("batch stored at %d..%d, want 3 consecutive sequences", r.First, r.Last)
	}
	if got := ids(read(t, l, "s1", 0, 0)); !slices.Equal(got, envIDs(evs...)) {
		t.Fatalf("read %v, want %v", got, envIDs(evs...))
	}
	// A stale batch stores none of its events.
	_, err := l.Append(ctx, "s1", 0, ev("s1"), ev("s1"))
	if !errors.Is(err, logport.ErrConflict) {
		t.Fatalf("stale batch: %v, want ErrConflict", err)
	}
	if n := len(read(t, l, "s1", 0, 0)); n != 3 {
		t.Fatalf("after a refused batch the session has %d events, want 3", n)
	}
}

func wantConflict(t *testing.T, err error, session string, expected, actual uint64) {
	t.Helper()
	var ce *logport.ConflictError
	if !errors.Is(err, logport.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("error %v, want a *ConflictError", err)
	}
	if ce.Session != session || ce.Expected != expected || ce.Actual != actual {
		t.Fatalf("conflict %+v, want session %q expected %d actual %d", ce, session, expected, actual)
	}
}

// An append whose expected sequence is stale is a conflict naming the
// session's sequence, and stores nothing.
func conflictOnStale(t *testing.T, l Log) {
	r := mustAppend(t, l, "s1", 0, ev("s1"))
	mustAppend(t, l, "s2", 0, ev("s2")) // another session does not move s1
	_, err := l.Append(ctx, "s1", 0, ev("s1"))
	wantConflict(t, err, "s1", 0, r.Last)
	if n := len(read(t, l, "s1", 0, 0)); n != 1 {
		t.Fatalf("after a conflict the session has %d events, want 1", n)
	}
	mustAppend(t, l, "s1", r.Last, ev("s1")) // the sequence it named works
}

// An expected sequence beyond the session's is a conflict too.
func conflictAhead(t *testing.T, l Log) {
	r := mustAppend(t, l, "s1", 0, ev("s1"))
	_, err := l.Append(ctx, "s1", r.Last+5, ev("s1"))
	wantConflict(t, err, "s1", r.Last+5, r.Last)
}

// Of concurrent appends with the same expected sequence exactly one
// is stored; the others are conflicts.
func oneWinner(t *testing.T, l Log) {
	r := mustAppend(t, l, "s1", 0, ev("s1"))
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = l.Append(ctx, "s1", r.Last, ev("s1")) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, logport.ErrConflict):
			t.Fatalf("concurrent append: %v, want success or ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent appends at %d were stored, want 1", won, n, r.Last)
	}
	if got := len(read(t, l, "s1", 0, 0)); got != 2 {
		t.Fatalf("session has %d events, want 2", got)
	}
}

// A re-send of stored events (same ids, same expectation) stores
// nothing and returns their sequences as a duplicate.
func dedupeByID(t *testing.T, l Log) {
	evs := []events.Envelope{ev("s1"), ev("s1")}
	r := mustAppend(t, l, "s1", 0, evs...)
	again := mustAppend(t, l, "s1", 0, evs...)
	if !again.Duplicate || again.First != r.First || again.Last != r.Last {
		t.Fatalf("re-send %+v, want duplicate of %+v", again, r)
	}
	one := mustAppend(t, l, "s1", 0, evs[0])
	if !one.Duplicate || one.First != r.First {
		t.Fatalf("re-send of one event %+v, want duplicate at %d", one, r.First)
	}
	if n := len(read(t, l, "s1", 0, 0)); n != 2 {
		t.Fatalf("session has %d events after re-sends, want 2", n)
	}
}

// A re-send after the session moved on (another write after ours)
// is still recognised as stored, not returned as a conflict.
func dedupeAfterMoved(t *testing.T, l Log) {
	e := ev("s1")
	r := mustAppend(t, l, "s1", 0, e)
	mustAppend(t, l, "s1", r.Last, ev("s1"))
	again, err := l.Append(ctx, "s1", 0, e)
	if err != nil || !again.Duplicate || again.First != r.First {
		t.Fatalf("re-send after the session moved: %+v, %v; want duplicate at %d", again, err, r.First)
	}
}

// Event ids stored on another session are refused, not handed
// back as this session's sequences.
func idOfAnotherSession(t *testing.T, l Log) {
	e := ev("s1")
	mustAppend(t, l, "s1", 0, e)
	e.Session = "s2"
	_, err := l.Append(ctx, "s2", 0, e)
	if !errors.Is(err, logport.ErrKeyInUse) {
		t.Fatalf("append of s1's event id to s2: %v, want ErrKeyInUse", err)
	}
	if n := lastSeq(t, l, "s2"); n != 0 {
		t.Fatalf("s2 at %d after the refusal, want 0", n)
	}
}

// Reads take [from, upTo], from 0 as 1, upTo 0 as the end; a range
// past the end is empty.
func readRanges(t *testing.T, l Log) {
	var seqs []uint64
	var last uint64
	for range 5 {
		r := mustAppend(t, l, "s1", last, ev("s1"))
		mustAppend(t, l, "other", lastSeq(t, l, "other"), ev("other")) // gaps in s1's sequences
		seqs, last = append(seqs, r.Last), r.Last
	}
	seqOf := func(recs []logport.Record) []uint64 {
		out := make([]uint64, len(recs))
		for i, r := range recs {
			out[i] = r.Seq
		}
		return out
	}
	for _, c := range []struct {
		from, upTo uint64
		want       []uint64
	}{
		{0, 0, seqs},
		{1, 0, seqs},
		{seqs[1], 0, seqs[1:]},
		{seqs[1], seqs[3], seqs[1:4]},
		{seqs[1] + 1, seqs[3] - 1, seqs[2:3]},
		{seqs[2], seqs[2], seqs[2:3]},
		{0, seqs[0], seqs[:1]},
		{last + 1, 0, nil},
	} {
		got := seqOf(read(t, l, "s1", c.from, c.upTo))
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("read [%d, %d] = %v, want %v", c.from, c.upTo, got, c.want)
		}
	}
}

// ScanSession stops at fn's first error and returns it (errors.Is).
func scanStops(t *testing.T, l Log) {
	var last uint64
	for range 3 {
		last = mustAppend(t, l, "s1", last, ev("s1")).Last
	}
	stop := errors.New("stop here")
	n := 0
	err := l.ScanSession(ctx, "s1", 0, 0, func(logport.Record) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("scan returned %v after %d calls, want fn's error after 2", err, n)
	}
}

// StoredAt says whether given ids are the session's events at a sequence.
func storedAt(t *testing.T, l Log) {
	evs := []events.Envelope{ev("s1"), ev("s1")}
	r := mustAppend(t, l, "s1", 0, evs...)
	other := mustAppend(t, l, "s2", 0, ev("s2"))
	for _, c := range []struct {
		session string
		first   uint64
		ids     []string
		want    bool
	}{
		{"s1", r.First, envIDs(evs...), true},
		{"s1", r.First, envIDs(evs[0]), true},
		{"s1", r.Last, envIDs(evs[1]), true},
		{"s1", r.First, envIDs(evs[1], evs[0]), false},
		{"s2", r.First, envIDs(evs...), false},
		{"s1", other.First, envIDs(evs[0]), false},
	} {
		got, err := l.StoredAt(ctx, c.session, c.first, c.ids)
		if err != nil || got != c.want {
			t.Errorf("StoredAt(%s, %d, %v) = %v, %v; want %v", c.session, c.first, c.ids, got, err, c.want)
		}
	}
}

// A session id that is not one subject token fails every method with
// events.ErrInvalidSession.
func invalidSessions(t *testing.T, l Log) {
	for _, s := range []string{"", "a.b", "a b", "a*", "a>", "é"} {
		e := ev("x")
		e.Session = s
		_, aerr := l.Append(ctx, s, 0, e)
		_, lerr := l.LastSeq(ctx, s)
		_, rerr := l.ReadSession(ctx, s, 0, 0)
		serr := l.ScanSession(ctx, s, 0, 0, func(logport.Record) error { return nil })
		for what, err := range map[string]error{"Append": aerr, "LastSeq": lerr, "ReadSession": rerr, "ScanSession": serr} {
			if !errors.Is(err, events.ErrInvalidSession) {
				t.Errorf("%s(%q): %v, want ErrInvalidSession", what, s, err)
			}
		}
	}
}

// An append of no events, or of an event of another session, is refused
// and stores nothing.
func badEnvelopes(t *testing.T, l Log) {
	if _, err := l.Append(ctx, "s1", 0); err == nil {
		t.Fatal("append of no events succeeded")
	}
	if _, err := l.Append(ctx, "s1", 0, ev("s1"), ev("s2")); err == nil {
		t.Fatal("append of another session's event succeeded")
	}
	if n := lastSeq(t, l, "s1"); n != 0 {
		t.Fatalf("s1 at %d after refused appends, want 0", n)
	}
}

// Context first on I/O: a cancelled context fails each call with an error
// matching context.Canceled.
func cancelled(t *testing.T, l Log) {
	r := mustAppend(t, l, "s1", 0, ev("s1"))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, aerr := l.Append(cctx, "s1", r.Last, ev("s1"))
	_, lerr := l.LastSeq(cctx, "s1")
	_, rerr := l.ReadSession(cctx, "s1", 0, 0)
	for what, err := range map[string]error{"Append": aerr, "LastSeq": lerr, "ReadSession": rerr} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", what, err)
		}
	}
	// The log still serves a live context.
	if got := len(read(t, l, "s1", 0, 0)); got < 1 {
		t.Fatalf("after cancelled calls the session reads %d events", got)
	}
}
