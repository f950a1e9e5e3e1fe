package aggregate

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"pgregory.net/rapid"
)

// turnEndLogs draws a random turn history as the engine writes it and
// returns it in the two forms a log may hold: older, every turn end
// at a safe point as the atomic pair TurnEnded + CheckpointRecorded; newer,
// one TurnEnded carrying the checkpoint. The newer form reuses the older
// one's sequences and ids, with the checkpoint's sequence on the combined
// event (the TurnEnded's sequence is a gap), so that the two folds must
// agree on every field but Events. pairs counts the turn ends in pair form.
func turnEndLogs(t *rapid.T) (older, newer []Stored, pairs uint64) {
	var (
		seq    uint64
		turn   uint64
		inTurn bool
	)
	add := func(log *[]Stored, s uint64, p events.Payload, id string) {
		e := env(p)
		e.ID = id
		*log = append(*log, Stored{Seq: s, MsgID: id, Envelope: e})
	}
	both := func(p events.Payload) {
		seq++
		id := events.NewID()
		add(&older, seq, p, id)
		add(&newer, seq, p, id)
	}
	n := rapid.IntRange(0, 60).Draw(t, "n")
	for range n {
		switch rapid.IntRange(0, 9).Draw(t, "op") {
		case 0:
			both(events.ToolsToggled{Enabled: genTri(t, "enabled")})
		case 1:
			both(events.ToolDisabled{Name: genName.Draw(t, "disabled")})
		case 2:
			both(events.PresetChosen{Preset: rapid.SampledFrom([]string{"", "tiny", "ops"}).Draw(t, "preset")})
		case 3, 4: // a search in the open turn (or, rejected alike, outside one)
			both(events.DeferredLoaded{Names: rapid.SliceOfN(genName, 1, 3).Draw(t, "loaded"), Turn: turn})
		case 5: // a mid-turn safe point: a CheckpointRecorded in both forms
			both(validCheckpoint(t, turn))
		case 6:
			if !inTurn {
				both(events.DeferredEvicted{Names: rapid.SliceOfN(genName, 1, 2).Draw(t, "evicted"), Turn: turn, Reason: "bound"})
			}
		default: // the turn boundary
			if !inTurn {
				turn++
				inTurn = true
				both(events.TurnStarted{Turn: turn})
				continue
			}
			inTurn = false
			if rapid.IntRange(0, 4).Draw(t, "plain_end") == 0 { // a client's TurnEnded command: no checkpoint
				both(events.TurnEnded{Turn: turn})
				continue
			}
			cp := validCheckpoint(t, turn)
			endID, cpID := events.NewID(), events.NewID()
			add(&older, seq+1, events.TurnEnded{Turn: turn}, endID)
			add(&older, seq+2, cp, cpID)
			add(&newer, seq+2, events.TurnEnded{Turn: turn, Checkpoint: &cp}, endID)
			seq += 2
			pairs++
		}
	}
	return older, newer, pairs
}

// validCheckpoint draws a checkpoint that every fold rule accepts at turn:
// a valid hash and registry version, every loaded tool in the contract.
func validCheckpoint(t *rapid.T, turn uint64) events.CheckpointRecorded {
	loaded := rapid.SliceOfNDistinct(genName, 0, 4, rapid.ID[string]).Draw(t, "cp_loaded")
	c := events.CheckpointRecorded{Loaded: loaded, ContractHash: hash(7), RegistryVersion: "v1", Turn: rapid.Uint64Range(0, turn).Draw(t, "cp_turn")}
	for _, n := range loaded {
		c.Contract = append(c.Contract, events.ContractEntry{Name: n, Hash: hash(9)})
	}
	if rapid.Bool().Draw(t, "cp_extra") {
		c.Contract = append(c.Contract, events.ContractEntry{Name: "zz_extra", Hash: hash(8)})
	}
	return c
}

// A log whose turn ends are TurnEnded + CheckpointRecorded pairs and
// a log whose turn ends are one TurnEnded carrying the checkpoint fold to
// the same State (every field, Checkpoint and LoadOrder included, but the
// count of applied events), at every prefix, and through a snapshot.
func TestPropertyTurnEndFormsFoldTheSame(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		older, newer, pairs := turnEndLogs(t)
		a, b := Fold(testSession, older), Fold(testSession, newer)
		if a.Events != b.Events+pairs {
			t.Fatalf("applied %d events in pair form, %d in one-event form with %d pairs", a.Events, b.Events, pairs)
		}
		a.Events, b.Events = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("the two forms fold differently:\n pairs %s\n one   %s", describeState(a), describeState(b))
		}
		if b.Rejected != 0 && slices.ContainsFunc(b.Rejections, func(r Rejection) bool { return r.Type == string(events.TypeTurnEnded) }) {
			t.Fatalf("a turn end the engine writes was rejected: %+v", b.Rejections)
		}
		// A snapshot of the newer form decodes to the same state.
		raw, err := MarshalState(Fold(testSession, newer))
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalState(raw)
		if err != nil {
			t.Fatal(err)
		}
		if back.Events = 0; !reflect.DeepEqual(back, b) {
			t.Fatalf("snapshot round trip changed the state:\n got  %s\n want %s", describeState(back), describeState(b))
		}
	})
}

// A TurnEnded whose checkpoint breaks a rule of CheckpointRecorded
// is rejected as a whole, by every fold alike: the turn stays open, the
// checkpoint and loaded set stay as they were, and the rejection names
// the event and the rule.
func TestFoldRejectsTurnEndWithBadCheckpoint(t *testing.T) {
	good := events.CheckpointRecorded{Loaded: []string{"big_browser"}, ContractHash: hash(7), RegistryVersion: "v1", Turn: 1,
		Contract: []events.ContractEntry{{Name: "big_browser", Hash: hash(9)}}}
	for _, tc := range []struct {
		name string
		bad  func(c *events.CheckpointRecorded)
		why  string
	}{
		{"hash not a SHA-256", func(c *events.CheckpointRecorded) { c.ContractHash = "x" }, "TurnEnded checkpoint: CheckpointRecorded contract_hash"},
		{"no registry version", func(c *events.CheckpointRecorded) { c.RegistryVersion = "" }, "no registry_version"},
		{"loaded tool not in the contract", func(c *events.CheckpointRecorded) { c.Contract = nil }, "records no contract"},
		{"after the last started turn", func(c *events.CheckpointRecorded) { c.Turn = 2 }, "TurnEnded checkpoint at turn 2, after the last started turn 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := good.Clone()
			tc.bad(&cp)
			log := stored(events.TurnStarted{Turn: 1}, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 1}, events.TurnEnded{Turn: 1, Checkpoint: &cp})
			s := Fold(testSession, log)
			if !s.InTurn || s.Turn != 1 || s.Checkpoint != nil || !slices.Equal(s.Loaded, []string{"send_message"}) {
				t.Fatalf("a rejected turn end changed the state: %s", describeState(s))
			}
			if s.Rejected != 1 || len(s.Rejections) != 1 || s.Rejections[0].Seq != 3 || s.Rejections[0].Type != "TurnEnded" || s.Rejections[0].Kind != KindRejected {
				t.Fatalf("rejections %+v (rejected %d), want the TurnEnded at seq 3", s.Rejections, s.Rejected)
			}
			if !strings.Contains(s.Rejections[0].Reason, tc.why) {
				t.Errorf("reason %q does not name the rule %q", s.Rejections[0].Reason, tc.why)
			}
			pre := Fold(testSession, log[:2])
			if err := pre.Check(log[2].Envelope, log[2].MsgID); !errors.Is(err, ErrRejected) || !errors.Is(err, events.ErrBrokenRule) {
				t.Fatalf("Check = %v, want ErrRejected and ErrBrokenRule", err)
			}
		})
	}
	// The valid one ends the turn and records the checkpoint at its
	// sequence.
	cp := good.Clone()
	s := Fold(testSession, stored(events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1, Checkpoint: &cp}))
	if s.InTurn || s.Checkpoint == nil || s.Checkpoint.Seq != 2 || !slices.Equal(s.Loaded, []string{"big_browser"}) || s.Rejected != 0 {
		t.Fatalf("state %s", describeState(s))
	}
}

// Decide validates a TurnEnded's checkpoint with the rules of a
// CheckpointRecorded and emits ONE event, the TurnEnded carrying the
// normalised checkpoint; after the turn has ended, the checkpoint alone.
func TestDecideTurnEndedWithCheckpoint(t *testing.T) {
	def := resolver.Default()
	s := Fold(testSession, stored(events.TurnStarted{Turn: 1}))
	sum, contract := realContract(t, def)
	cp := events.CheckpointRecorded{Loaded: []string{"send_message", "playwright_browser"}, ContractHash: sum, RegistryVersion: def.Version(), Contract: contract}
	out := decideOK(t, s, def, events.TurnEnded{Checkpoint: &cp})
	if len(out) != 1 {
		t.Fatalf("Decide = %+v, want one TurnEnded", out)
	}
	te, ok := out[0].(events.TurnEnded)
	if !ok || te.Turn != 1 || te.Checkpoint == nil || te.Checkpoint.Turn != 1 || !slices.Equal(te.Checkpoint.Loaded, []string{"playwright_browser", "send_message"}) {
		t.Fatalf("Decide = %+v, want TurnEnded{1} with the sorted checkpoint of turn 1", out[0])
	}
	if cp.Loaded[0] != "send_message" {
		t.Fatal("Decide modified the command")
	}
	// What Decide emits, the fold applies.
	e := env(te)
	if err := s.ApplyStored(Stored{Seq: 2, MsgID: e.ID, Envelope: e}); err != nil || s.InTurn || s.Checkpoint == nil || s.Checkpoint.Seq != 2 {
		t.Fatalf("fold of the decided event: %v, %s", err, describeState(s))
	}
	before := Fold(testSession, stored(events.TurnStarted{Turn: 1}))
	bad := cp.Clone()
	bad.ContractHash = hash(3)
	decideErr(t, before, def, events.TurnEnded{Checkpoint: &bad}, Limits{}, ErrInvalidCommand, "decide TurnEnded checkpoint", "add up to")
	bad = cp.Clone()
	bad.Turn = 2
	decideErr(t, before, def, events.TurnEnded{Checkpoint: &bad}, Limits{}, ErrInvalidCommand, "turn 2")
	bad = cp.Clone()
	bad.Loaded = []string{"read_file"}
	decideErr(t, before, def, events.TurnEnded{Checkpoint: &bad}, Limits{}, ErrInvalidCommand, `"read_file" is resident`)
	// The turn has ended already: the checkpoint alone, as.
	out = decideOK(t, s, def, events.TurnEnded{Checkpoint: &cp})
	if len(out) != 1 {
		t.Fatalf("Decide after the end = %+v", out)
	}
	if c, ok := out[0].(events.CheckpointRecorded); !ok || c.Turn != 1 {
		t.Fatalf("Decide after the end = %+v, want the CheckpointRecorded alone", out[0])
	}
}
