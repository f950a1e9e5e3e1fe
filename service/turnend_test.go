package service_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// turnEndSession begins a turn on session s, loads send_message and
// returns the session's records so far.
func turnEndSession(ctx context.Context, t *testing.T, e *service.Engine, log *jetstream.Log, s string) []logport.Record {
	t.Helper()
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discover(ctx, s, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}}); err != nil {
		t.Fatal(err)
	}
	recs, err := log.ReadSession(ctx, s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// newRecords reads s's records after the first n.
func newRecords(ctx context.Context, t *testing.T, log *jetstream.Log, s string, n int) []logport.Record {
	t.Helper()
	recs, err := log.ReadSession(ctx, s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs[n:]
}

// EndTurn writes the turn's end as ONE event, a TurnEnded carrying
// the checkpoint (one CAS append, no atomic batch); the session's last
// checkpoint is that event's, the history shows it with cause
// "checkpoint", and Resume reads it back.
func TestEndTurnWritesOneEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	before := turnEndSession(ctx, t, e, log, "s")
	cp, err := e.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	recs := newRecords(ctx, t, log, "s", len(before))
	if len(recs) != 1 {
		t.Fatalf("EndTurn stored %d events, want one TurnEnded", len(recs))
	}
	te, ok := recs[0].Envelope.Payload.(events.TurnEnded)
	if !ok || te.Turn != 1 || te.Checkpoint == nil || recs[0].Seq != cp.Seq {
		t.Fatalf("EndTurn stored %+v at seq %d, want TurnEnded{turn 1} carrying the checkpoint at seq %d", recs[0].Envelope.Payload, recs[0].Seq, cp.Seq)
	}
	if !reflect.DeepEqual(*te.Checkpoint, cp.Record) || !slices.Equal(te.Checkpoint.Loaded, []string{"send_message"}) || len(te.Checkpoint.Contract) == 0 {
		t.Fatalf("stored checkpoint %+v, EndTurn answered %+v", *te.Checkpoint, cp.Record)
	}
	st, err := e.Session(ctx, "s", cp.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if st.InTurn || st.Checkpoint == nil || st.Checkpoint.Seq != cp.Seq || !reflect.DeepEqual(st.Checkpoint.Record, cp.Record) || !slices.Equal(st.Loaded, []string{"send_message"}) {
		t.Fatalf("session after EndTurn: in turn %v, checkpoint %+v, loaded %v", st.InTurn, st.Checkpoint, st.Loaded)
	}
	hist, _, err := e.History(ctx, "s", service.Until{}, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	last := hist[len(hist)-1]
	if last.Seq != cp.Seq || last.Type != string(events.TypeTurnEnded) || last.Error != "" || !slices.Equal(last.Loaded, []string{"send_message"}) {
		t.Fatalf("last history entry %+v, want the TurnEnded at %d, applied, loaded [send_message]", last.EventRef, cp.Seq)
	}
	if p, ok := last.Payload.(events.TurnEnded); !ok || p.Checkpoint == nil {
		t.Fatalf("history payload %+v, want the TurnEnded with its checkpoint", last.Payload)
	}
	// Resume reads the checkpoint from the TurnEnded: same contract, so it
	// restores exactly and writes nothing.
	r, err := e.Resume(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Outcome.OK || !slices.Equal(r.Outcome.Restored, []string{"send_message"}) || r.Checkpoint == nil || r.Checkpoint.ContractHash != cp.ContractHash || r.Seq != 0 {
		t.Fatalf("resume = %+v (checkpoint %+v, seq %d), want send_message restored from the turn end, nothing written", r.Outcome, r.Checkpoint, r.Seq)
	}
}

// A Resume that closes a turn left open writes ONE TurnEnded carrying
// the restored checkpoint.
func TestResumeClosesTurnInOneEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	before := turnEndSession(ctx, t, e, log, "s")
	r, err := e.Resume(ctx, "s", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil {
		t.Fatal(err)
	}
	recs := newRecords(ctx, t, log, "s", len(before))
	if len(recs) != 1 || r.Seq != recs[0].Seq {
		t.Fatalf("Resume stored %d events (seq %d), want one TurnEnded", len(recs), r.Seq)
	}
	te, ok := recs[0].Envelope.Payload.(events.TurnEnded)
	if !ok || te.Turn != 1 || te.Checkpoint == nil || te.Checkpoint.Turn != 1 || !slices.Equal(te.Checkpoint.Loaded, r.Outcome.Restored) {
		t.Fatalf("Resume stored %+v, want TurnEnded{turn 1} carrying the restored %v", recs[0].Envelope.Payload, r.Outcome.Restored)
	}
	st, err := e.Session(ctx, "s", r.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if st.InTurn || st.Checkpoint == nil || st.Checkpoint.Seq != r.Seq {
		t.Fatalf("session after resume: in turn %v, checkpoint %+v", st.InTurn, st.Checkpoint)
	}
}

// A log written before, whose turn end is the atomic pair TurnEnded +
// CheckpointRecorded, gives the same session and the same resume as the
// one-event form.
func TestOlderTurnEndPairReadsTheSame(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	turnEndSession(ctx, t, e, log, "new")
	cp, err := e.EndTurn(ctx, "new", web)
	if err != nil {
		t.Fatal(err)
	}
	turnEndSession(ctx, t, e, log, "old")
	old, err := e.Session(ctx, "old", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := cp.Record.Clone()
	expected := old.LastSeq
	res, err := e.Apply(ctx, "old", web, &expected, events.TurnEnded{Turn: 1}, rec) // the older writer's atomic pair
	if err != nil {
		t.Fatal(err)
	}
	if res.Last != res.First+1 {
		t.Fatalf("the pair stored seqs %d..%d, want two events", res.First, res.Last)
	}
	a, err := e.Session(ctx, "old", res.Last)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Session(ctx, "new", cp.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if a.InTurn || b.InTurn || a.Turn != b.Turn || !slices.Equal(a.Loaded, b.Loaded) || !slices.Equal(a.InLoadOrder(), b.InLoadOrder()) ||
		a.Checkpoint == nil || b.Checkpoint == nil || !reflect.DeepEqual(a.Checkpoint.Record, b.Checkpoint.Record) || a.Checkpoint.Seq != res.Last {
		t.Fatalf("pair form: turn %d in %v loaded %v checkpoint %+v\none event: turn %d in %v loaded %v checkpoint %+v",
			a.Turn, a.InTurn, a.Loaded, a.Checkpoint, b.Turn, b.InTurn, b.Loaded, b.Checkpoint)
	}
	for _, s := range []string{"old", "new"} {
		r, err := e.Resume(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Outcome.OK || !slices.Equal(r.Outcome.Restored, []string{"send_message"}) || r.Seq != 0 {
			t.Fatalf("%s: resume = %+v seq %d, want send_message restored, nothing written", s, r.Outcome, r.Seq)
		}
	}
}

// EndTurn starts from this engine's state of the session, not a read
// of the log; a state behind the log must still give the log's checkpoint.
// Engine b begins the turn, engine a loads send_message into it, and b's
// EndTurn (whose state misses the load) records send_message; a turn
// another engine began, which b's state does not show, ends too.
func TestEndTurnBehindAnotherEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	b, _ := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	req := service.ResolveRequest{Provider: service.ProviderAnthropicEngine}
	if _, err := b.BeginTurn(ctx, "s", web, req); err != nil {
		t.Fatal(err)
	}
	d, err := a.Discover(ctx, "s", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.View.Provider, "send_message") {
		t.Fatalf("engine a did not load send_message: %+v", d.View.Provider)
	}
	cp, err := b.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cp.Loaded, []string{"send_message"}) {
		t.Fatalf("b's turn end recorded %v, want the send_message engine a loaded", cp.Loaded)
	}
	// Engine a begins turn 2; b's state of the session shows turn 1 ended.
	if _, err := a.BeginTurn(ctx, "s", web, req); err != nil {
		t.Fatal(err)
	}
	cp2, err := b.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatalf("b could not end the turn a began: %v", err)
	}
	recs, err := log.ReadSession(ctx, "s", cp2.Seq, cp2.Seq)
	if err != nil || len(recs) != 1 {
		t.Fatalf("read %d records, %v", len(recs), err)
	}
	if te, ok := recs[0].Envelope.Payload.(events.TurnEnded); !ok || te.Turn != 2 || te.Checkpoint == nil || !slices.Equal(te.Checkpoint.Loaded, []string{"send_message"}) {
		t.Fatalf("b's second turn end stored %+v, want TurnEnded{turn 2} with send_message", recs[0].Envelope.Payload)
	}
}

// A safe point inside a turn (Checkpoint) stays one CheckpointRecorded
// and keeps the turn open; the turn's end then carries the next one.
func TestMidTurnCheckpointStaysCheckpointRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	before := turnEndSession(ctx, t, e, log, "s")
	cp, err := e.Checkpoint(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	recs := newRecords(ctx, t, log, "s", len(before))
	if len(recs) != 1 || recs[0].Seq != cp.Seq {
		t.Fatalf("Checkpoint stored %d events, want one CheckpointRecorded", len(recs))
	}
	if c, ok := recs[0].Envelope.Payload.(events.CheckpointRecorded); !ok || !slices.Equal(c.Loaded, []string{"send_message"}) {
		t.Fatalf("Checkpoint stored %+v", recs[0].Envelope.Payload)
	}
	end, err := e.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Session(ctx, "s", end.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if st.InTurn || st.Checkpoint == nil || st.Checkpoint.Seq != end.Seq || st.Checkpoint.Seq == cp.Seq {
		t.Fatalf("after the end: in turn %v, checkpoint %+v, want the turn end's at %d", st.InTurn, st.Checkpoint, end.Seq)
	}
}
