package aggregate

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
)

// After a SessionDeleted the fold rejects every later event, of every
// type, whoever published it (an event written straight to JetStream by
// another writer is one the API never decided), and records DeletedSeq;
// the state keeps no intent, tool or turn of the session.
func TestFoldRefusesAfterDelete(t *testing.T) {
	evs := stored(
		events.ToolsToggled{Enabled: bp(true)},
		events.TurnStarted{Turn: 1},
		events.SessionDeleted{Reason: "user request"},
		events.TurnEnded{Turn: 1},
		events.ToolDisabled{Name: "bash"},
		events.SessionDeleted{},
	)
	// A direct publish: another writer's event with its own id and
	// Nats-Msg-Id, no Decide in front of it.
	direct := events.Envelope{ID: events.NewID(), Session: testSession, Channel: "raw", Actor: "x", TimeMs: 9, Version: events.SchemaVersion, Type: events.TypeWebSearchSet, Payload: events.WebSearchSet{Enabled: bp(true)}}
	evs = append(evs, Stored{Seq: 7, MsgID: direct.ID, Envelope: direct})
	s := Fold(testSession, evs)
	if !s.Deleted() || s.DeletedSeq != 3 {
		t.Fatalf("deleted %v at %d, want at 3", s.Deleted(), s.DeletedSeq)
	}
	if s.Rejected != 4 || s.Events != 3 || s.LastSeq != 7 {
		t.Fatalf("rejected %d events %d last %d, want 4 rejected, 3 applied, last 7", s.Rejected, s.Events, s.LastSeq)
	}
	if s.Intent.Enabled != nil || s.Intent.Disabled != nil || s.Intent.WebSearch != nil || s.InTurn || s.Turn != 0 {
		t.Errorf("the deleted state keeps data, or an event after the delete changed it: %s", describeState(s))
	}
	for _, r := range s.Rejections {
		if r.Kind != KindRejected || !strings.Contains(r.Reason, "deleted at sequence 3") {
			t.Errorf("rejection %+v does not name the delete", r)
		}
	}
	// Deterministic: a snapshot taken at the delete and folded on gives
	// the same state, byte for byte.
	prefix := Fold(testSession, evs[:3])
	b, err := MarshalState(prefix)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.DeletedSeq != 3 {
		t.Fatalf("the snapshot lost deleted_seq: %d", resumed.DeletedSeq)
	}
	for _, ev := range evs[3:] {
		resumed.ApplyStored(ev) //nolint:errcheck // the verdict is recorded
	}
	if !reflect.DeepEqual(resumed, s) {
		t.Errorf("fold through a snapshot differs:\n%s\n%s", describeState(resumed), describeState(s))
	}
	// Check answers the same for a candidate event.
	if err := s.Check(env(events.ToolsToggled{}), ""); !errors.Is(err, ErrRejected) {
		t.Errorf("Check on a deleted session: %v", err)
	}
}

// Decide refuses every command on a deleted session with ErrDeleted,
// and a delete inside an open turn is accepted as is.
func TestDecideDeleted(t *testing.T) {
	reg := smallRegistry(t)
	open := Fold(testSession, stored(events.TurnStarted{Turn: 1}))
	got, err := Decide(open, reg, events.SessionDeleted{Reason: "gdpr"}, Limits{})
	if err != nil || len(got) != 1 || got[0] != (events.SessionDeleted{Reason: "gdpr"}) {
		t.Fatalf("delete in an open turn: %v %v", got, err)
	}
	s := Fold(testSession, stored(events.TurnStarted{Turn: 1}, events.SessionDeleted{}))
	for _, cmd := range []Command{
		events.ToolsToggled{Enabled: bp(false)},
		events.TurnEnded{},
		events.TurnStarted{},
		events.SessionDeleted{},
		events.ToolEnabled{Name: "bash"},
	} {
		if _, err := Decide(s, reg, cmd, Limits{}); !errors.Is(err, ErrDeleted) {
			t.Errorf("%T on a deleted session: %v, want ErrDeleted", cmd, err)
		}
	}
}

// A view written before deleted_seq existed (version 5) still reads,
// as an open session.
func TestUnmarshalVersion5View(t *testing.T) {
	s, err := UnmarshalState([]byte("\x83\xa1v\x05\xa7session\xa1s\xa8last_seq\x07"))
	if err != nil || s.Session != "s" || s.LastSeq != 7 || s.Deleted() {
		t.Fatalf("version 5 view: %+v %v", s, err)
	}
}
