// Package viewstest is the conformance suite of session views: the
// contract service.Views states, which the JetStream projection and the
// in-memory views (memlog.Views) both pass. It needs no NATS server.
package viewstest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Log is the log the views are of: the suite writes through it and
// reads it back for the reference fold.
type Log interface {
	Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (logport.AppendResult, error)
	ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error
}

// Views is the views under test.
type Views interface {
	Read(ctx context.Context, session string, opts logport.ReadOptions) (aggregate.State, error)
	Stored(ctx context.Context, rec logport.Record) (aggregate.Stored, error)
	Sessions(ctx context.Context) ([]string, error)
}

// Run runs the suite; open returns an empty log and its views, folding
// (a projection running) for each case.
func Run(t *testing.T, open func(t *testing.T) (Log, Views)) {
	cases := []struct {
		name string
		run  func(t *testing.T, l Log, v Views)
	}{
		{"a session without events reads as the zero state", unknownSession},
		{"an invalid session id is refused", invalidSession},
		{"a read at a sequence has folded the session up to it", readYourWrites},
		{"a latest read has folded every event", latest},
		{"an event breaking a fold rule is counted, not applied", rejected},
		{"stored keeps the record's sequence, id and event", stored},
		{"the sessions with events are listed, sorted", sessions},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, v := open(t)
			c.run(t, l, v)
		})
	}
}

var ctx = context.Background()

// appendAll appends each payload to session, one event per append.
func appendAll(t *testing.T, l Log, session string, expected uint64, pls ...events.Payload) uint64 {
	t.Helper()
	for _, p := range pls {
		res, err := l.Append(ctx, session, expected, events.New(session, "web", "alice", p))
		if err != nil {
			t.Fatalf("append %T to %s: %v", p, session, err)
		}
		expected = res.Last
	}
	return expected
}

// fold is the reference: the session's events from the log, through the
// views' Stored, folded in order.
func fold(t *testing.T, l Log, v Views, session string) aggregate.State {
	t.Helper()
	st := aggregate.State{Session: session}
	err := l.ScanSession(ctx, session, 0, 0, func(r logport.Record) error {
		ev, err := v.Stored(ctx, r)
		if err != nil {
			return err
		}
		_ = st.ApplyStored(ev) // a refusal is counted in the state
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// same reports how got differs from want in what a view holds.
func same(got, want aggregate.State) error {
	switch {
	case got.LastSeq != want.LastSeq:
		return fmt.Errorf("at %d, want %d", got.LastSeq, want.LastSeq)
	case !got.Intent.Alike(&want.Intent):
		return fmt.Errorf("intent %+v, want %+v", got.Intent, want.Intent)
	case got.Turn != want.Turn || got.InTurn != want.InTurn:
		return fmt.Errorf("turn %d (open %v), want %d (open %v)", got.Turn, got.InTurn, want.Turn, want.InTurn)
	case !reflect.DeepEqual(got.Loaded, want.Loaded):
		return fmt.Errorf("loaded %v, want %v", got.Loaded, want.Loaded)
	case got.Events != want.Events || got.Rejected != want.Rejected || got.Skipped != want.Skipped:
		return fmt.Errorf("events %d rejected %d skipped %d, want %d %d %d", got.Events, got.Rejected, got.Skipped, want.Events, want.Rejected, want.Skipped)
	}
	return nil
}

func unknownSession(t *testing.T, _ Log, v Views) {
	st, err := v.Read(ctx, "nobody", logport.ReadOptions{})
	if err != nil || st.LastSeq != 0 || st.Intent.Enabled != nil || st.Events != 0 {
		t.Fatalf("read of a session without events: %+v, %v; want the zero state", st, err)
	}
}

func invalidSession(t *testing.T, _ Log, v Views) {
	if _, err := v.Read(ctx, "a b/c", logport.ReadOptions{}); err == nil {
		t.Fatal("read of an invalid session id: no error")
	}
}

func readYourWrites(t *testing.T, l Log, v Views) {
	off := false
	last := appendAll(t, l, "ryw", 0,
		events.ToolsToggled{Enabled: &off},
		events.ToolDisabled{Name: "bash"},
		events.PresetChosen{Preset: "research"},
		events.TurnStarted{Turn: 1},
		events.DeferredLoaded{Names: []string{"playwright_browser"}, Turn: 1},
	)
	st, err := v.Read(ctx, "ryw", logport.ReadOptions{MinSeq: last})
	if err != nil {
		t.Fatal(err)
	}
	if err := same(st, fold(t, l, v, "ryw")); err != nil {
		t.Fatalf("read at %d: %v", last, err)
	}
}

func latest(t *testing.T, l Log, v Views) {
	last := appendAll(t, l, "strong", 0, events.ToolDisabled{Name: "grep"})
	if _, err := v.Read(ctx, "strong", logport.ReadOptions{MinSeq: last}); err != nil {
		t.Fatal(err)
	}
	last = appendAll(t, l, "strong", last, events.ToolDisabled{Name: "glob"})
	st, err := v.Read(ctx, "strong", logport.ReadOptions{Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := same(st, fold(t, l, v, "strong")); err != nil || st.LastSeq != last {
		t.Fatalf("latest read: at %d (%v), want every event up to %d", st.LastSeq, err, last)
	}
}

func rejected(t *testing.T, l Log, v Views) {
	// A tool loaded outside any turn breaks a fold rule.
	last := appendAll(t, l, "rule", 0, events.ToolDisabled{Name: "bash"}, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 3})
	st, err := v.Read(ctx, "rule", logport.ReadOptions{MinSeq: last})
	if err != nil {
		t.Fatal(err)
	}
	if st.LastSeq != last || st.Rejected != 1 || len(st.Loaded) != 0 || st.Events != 1 {
		t.Fatalf("view after a refused load: at %d, %d rejected, loaded %v, %d applied; want at %d, 1 rejected, nothing loaded, 1 applied", st.LastSeq, st.Rejected, st.Loaded, st.Events, last)
	}
}

func stored(t *testing.T, l Log, v Views) {
	appendAll(t, l, "rec", 0, events.ToolDisabled{Name: "bash"})
	var recs []logport.Record
	if err := l.ScanSession(ctx, "rec", 0, 0, func(r logport.Record) error { recs = append(recs, r); return nil }); err != nil || len(recs) != 1 {
		t.Fatalf("the log holds %d events of rec (%v), want 1", len(recs), err)
	}
	ev, err := v.Stored(ctx, recs[0])
	if err != nil || ev.Seq != recs[0].Seq || ev.MsgID != recs[0].MsgID || ev.Envelope.ID != recs[0].Envelope.ID {
		t.Fatalf("stored: %+v, %v; want seq %d, id %s", ev, err, recs[0].Seq, recs[0].MsgID)
	}
}

func sessions(t *testing.T, l Log, v Views) {
	want := []string{"list-a", "list-b", "list-c"}
	for _, s := range []string{"list-c", "list-a", "list-b"} {
		appendAll(t, l, s, 0, events.ToolDisabled{Name: "bash"})
	}
	// Views written behind the log (a projection's) appear within a
	// flush: look for a while.
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if got, err = v.Sessions(ctx); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sessions: %v, want %v", got, want)
	}
}
