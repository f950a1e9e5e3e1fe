package aggregate

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/toolintent/engine/events"
	"pgregory.net/rapid"
)

// genAnyKindPayload draws a payload of any kind the fold knows, the
// generic ones of genPayload plus evictions, permission answers and, once
// in a while, a delete.
func genAnyKindPayload(t *rapid.T) events.Payload {
	turn := rapid.SampledFrom([]uint64{0, 1, 2, 3, 4, 5, math.MaxUint64}).Draw(t, "xturn")
	switch rapid.IntRange(0, 9).Draw(t, "xkind") {
	case 0:
		return events.DeferredEvicted{Names: rapid.SliceOfN(genName, 1, 3).Draw(t, "evicted"), Turn: turn, Reason: "bound"}
	case 1, 2:
		return events.PermissionGranted{By: "alice", Scope: rapid.SampledFrom([]string{events.ScopeSession, events.ScopeOnce}).Draw(t, "scope"),
			Tool: genName.Draw(t, "granted"), Turn: turn}
	case 3:
		if rapid.IntRange(0, 9).Draw(t, "delete") == 0 {
			return events.SessionDeleted{Reason: "r"}
		}
	}
	return genPayload(t)
}

// genHistory draws a session's log, every kind of event, with gaps,
// redeliveries, undecodable and refused events, and sometimes an earlier
// compaction in the middle (built from the fold so far, as the engine
// builds one). It returns the log and its last sequence.
func genHistory(t *rapid.T) []Stored {
	n := rapid.IntRange(1, 40).Draw(t, "n")
	var out []Stored
	var seq uint64
	var ms int64
	for i := range n {
		seq += rapid.Uint64Range(0, 3).Draw(t, "gap") // 0: a redelivery
		if seq == 0 {
			seq = 1
		}
		ms += rapid.Int64Range(0, 5).Draw(t, "ms")
		id := fmt.Sprintf("01KDVDNA%018d", i)
		st := Stored{Seq: seq, MsgID: id}
		switch rapid.IntRange(0, 19).Draw(t, "hkind") {
		case 0:
			st.Err = errors.New("undecodable")
		case 1:
			st.Envelope = events.Envelope{ID: id, Session: "other", Payload: events.ToolDisabled{Name: "grep"}}
		case 2: // an earlier compaction
			s, g := FoldGrants(testSession, out)
			if s.InTurn {
				out = append(out, Stored{Seq: seq, MsgID: id, Envelope: events.Envelope{ID: id, Session: testSession, TimeMs: ms, Payload: events.TurnEnded{Turn: s.Turn}}})
				seq++
				id += "x"
				s, g = FoldGrants(testSession, out)
			}
			st = Stored{Seq: seq, MsgID: id, Envelope: events.Envelope{ID: id, Session: testSession, TimeMs: ms, Payload: events.ToolsToggled{}}}
			if c, err := Compaction(s, g, Compacted{FirstSeq: 1, LastSeq: s.LastSeq, Count: uint64(len(out)), LastMs: ms}); err == nil {
				st.Envelope.Payload = c
			}
		default:
			st.Envelope = events.Envelope{ID: id, Session: testSession, TimeMs: ms, Payload: genAnyKindPayload(t)}
		}
		if rapid.IntRange(0, 29).Draw(t, "badid") == 0 {
			st.MsgID = ""
		}
		out = append(out, st)
	}
	return out
}

// throughWire encodes and decodes p in an envelope of testSession.
func throughWire(t *rapid.T, p events.Payload, id string) events.Envelope {
	e := events.Envelope{ID: id, Session: testSession, Channel: "engine", Actor: "engine:compact", TimeMs: 1, Version: events.SchemaVersion, Payload: p}
	b, err := events.Encode(e)
	if err != nil {
		t.Fatalf("encode %T: %v", p, err)
	}
	d, err := events.Decode(b)
	if err != nil {
		t.Fatalf("decode %T: %v", p, err)
	}
	return d
}

// Compaction folds to the same state. For random histories of every
// event kind, the SessionCompacted built from their fold, stored after
// them and sent through the wire, followed by a random tail, folds to the
// same state and grants whether the fold saw the whole history (the
// writer), none of it (a cold load after the purge) or a prefix (a view
// persisted before the compaction, whose remaining events were purged):
// fold(snapshot + tail) = fold(original + snapshot + tail), and the
// snapshot changes nothing of fold(original) but LastSeq and Events.
func TestPropertyCompactionFoldsToSameState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genHistory(t)
		s, g := FoldGrants(testSession, log)
		last := log[len(log)-1]
		if s.InTurn && !s.Deleted() && rapid.Bool().Draw(t, "end_turn") {
			id := fmt.Sprintf("01KDVDNB%018d", 0)
			log = append(log, Stored{Seq: s.LastSeq + 1, MsgID: id, Envelope: events.Envelope{ID: id, Session: testSession, TimeMs: last.Envelope.TimeMs, Payload: events.TurnEnded{Turn: s.Turn}}})
			s, g = FoldGrants(testSession, log)
		}
		count := uint64(0)
		var seen uint64
		for _, ev := range log {
			if ev.Seq > seen {
				count++
				seen = ev.Seq
			}
		}
		c, err := Compaction(s, g, Compacted{FirstSeq: log[0].Seq, LastSeq: s.LastSeq, Count: count, FirstMs: 0, LastMs: 1 << 40, Reason: "test"})
		switch {
		case s.Deleted():
			if !errors.Is(err, ErrDeleted) {
				t.Fatalf("compaction of a deleted session: %v, want ErrDeleted", err)
			}
			return
		case s.InTurn:
			if !errors.Is(err, ErrTurnOpen) {
				t.Fatalf("compaction in an open turn: %v, want ErrTurnOpen", err)
			}
			return
		case err != nil:
			t.Fatalf("compaction: %v", err)
		}
		snapSeq := s.LastSeq + rapid.Uint64Range(1, 3).Draw(t, "snapgap")
		id := "01KDVDNC000000000000000000"
		snap := Stored{Seq: snapSeq, MsgID: id, Envelope: throughWire(t, c, id)}
		if err := events.CheckStored(snap.Envelope, id); err != nil {
			t.Fatalf("the snapshot breaks a stored rule: %v", err)
		}
		var tail []Stored
		seq := snapSeq
		for i := range rapid.IntRange(0, 10).Draw(t, "tail") {
			seq += rapid.Uint64Range(1, 2).Draw(t, "tailgap")
			tid := fmt.Sprintf("01KDVDND%018d", i)
			tail = append(tail, Stored{Seq: seq, MsgID: tid, Envelope: events.Envelope{ID: tid, Session: testSession, Payload: genAnyKindPayload(t)}})
		}
		cut := rapid.IntRange(0, len(log)).Draw(t, "cut")

		wantHead := s.Clone()
		wantHead.LastSeq, wantHead.Events = snapSeq, s.Events+1
		head, headG := FoldGrants(testSession, append(append([]Stored(nil), log...), snap))
		if !reflect.DeepEqual(head, wantHead) || !reflect.DeepEqual(headG, g) {
			t.Fatalf("original + snapshot:\n got %s %+v\nwant %s %+v", describeState(head), headG, describeState(wantHead), g)
		}
		full, fullG := FoldGrants(testSession, append(append(append([]Stored(nil), log...), snap), tail...))
		cold, coldG := FoldGrants(testSession, append([]Stored{snap}, tail...))
		part, partG := FoldGrants(testSession, append(append(append([]Stored(nil), log[:cut]...), snap), tail...))
		if !reflect.DeepEqual(cold, full) || !reflect.DeepEqual(coldG, fullG) {
			t.Fatalf("cold load differs:\n got %s %+v\nwant %s %+v", describeState(cold), coldG, describeState(full), fullG)
		}
		if !reflect.DeepEqual(part, full) || !reflect.DeepEqual(partG, fullG) {
			t.Fatalf("a view of the first %d events differs:\n got %s\nwant %s", cut, describeState(part), describeState(full))
		}
		// The persisted view (MarshalState) of the cold load is the same.
		b, err := MarshalState(cold)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := UnmarshalState(b); err != nil || !reflect.DeepEqual(back, full) {
			t.Fatalf("view round trip after compaction: %v", err)
		}
	})
}

// A snapshot a direct publisher stores gets the same verdict on every
// fold: one that does not cover the events before it, or lands in an open
// turn, or follows a delete, or carries an incoherent range, is refused
// and reported (Rejected, Rejections) like any refused event, and the
// state is unchanged.
func TestCompactedRefused(t *testing.T) {
	good := func(s State) events.SessionCompacted {
		c, err := Compaction(s, Grants{}, Compacted{FirstSeq: 1, LastSeq: s.LastSeq, Count: s.LastSeq})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := stored(events.ToolDisabled{Name: "bash"}, events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1})
	s := Fold(testSession, base)
	cases := map[string]struct {
		log  []Stored
		snap events.SessionCompacted
	}{
		"stale range": {base, func() events.SessionCompacted { c := good(s); c.LastSeq, c.Count = 2, 2; return c }()},
		"open turn": {stored(events.TurnStarted{Turn: 1}), func() events.SessionCompacted {
			c := good(Fold(testSession, stored(events.ToolDisabled{Name: "x"}))) // covers seq 1
			return c
		}()},
		"after delete":   {stored(events.ToolDisabled{Name: "bash"}, events.SessionDeleted{}), func() events.SessionCompacted { c := good(s); c.LastSeq, c.Count = 2, 2; return c }()},
		"empty range":    {base, func() events.SessionCompacted { c := good(s); c.FirstSeq = 0; return c }()},
		"count too big":  {base, func() events.SessionCompacted { c := good(s); c.Count = 9; return c }()},
		"beyond itself":  {base, func() events.SessionCompacted { c := good(s); c.LastSeq, c.Count = 9, 1; return c }()},
		"picked too big": {base, func() events.SessionCompacted { c := good(s); c.Intent.Picked = make([]string, 17); return c }()},
		"checkpoint ahead": {base, func() events.SessionCompacted {
			c := good(s)
			c.Checkpoint, c.CheckpointSeq = &events.CheckpointRecorded{ContractHash: hash(1), RegistryVersion: "v", Turn: 5}, 1
			return c
		}()},
	}
	for name, tc := range cases {
		before := Fold(testSession, tc.log)
		e := env(tc.snap)
		after := before.Clone()
		err := after.ApplyStored(Stored{Seq: before.LastSeq + 1, MsgID: e.ID, Envelope: e})
		if !errors.Is(err, ErrRejected) {
			t.Errorf("%s: verdict %v, want rejected", name, err)
			continue
		}
		if after.Rejected != before.Rejected+1 || len(after.Rejections) == 0 || after.Rejections[len(after.Rejections)-1].Type != string(events.TypeSessionCompacted) {
			t.Errorf("%s: not reported: %+v", name, after.Rejections)
		}
		after.LastSeq, after.Rejected, after.Rejections = before.LastSeq, before.Rejected, before.Rejections
		if !reflect.DeepEqual(after, before) {
			t.Errorf("%s: a refused snapshot changed the state", name)
		}
	}
	// Decide never emits a snapshot: it is not a command.
	if _, err := Decide(s, smallRegistry(t), events.SessionCompacted{}, Limits{}); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("Decide(SessionCompacted) = %v, want ErrInvalidCommand", err)
	}
}
