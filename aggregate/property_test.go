package aggregate

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
	"pgregory.net/rapid"
)

// A small name alphabet so that events collide (disable then enable the
// same tool, load twice, ...).
var genName = rapid.SampledFrom([]string{"read_file", "grep", "bash", "tool_search", "web_search", "big_browser", "send_message", "zz"})

func genTri(t *rapid.T, label string) *bool {
	switch rapid.IntRange(0, 2).Draw(t, label) {
	case 1:
		return bp(false)
	case 2:
		return bp(true)
	}
	return nil
}

func genNames(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 3).Draw(t, label+"_kind") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(genName, 1, 5).Draw(t, label)
}

// genPayload draws any payload, including ones Apply must skip or reject.
func genPayload(t *rapid.T) events.Payload {
	turn := rapid.SampledFrom([]uint64{0, 1, 2, 3, 4, 5, math.MaxUint64}).Draw(t, "turn")
	switch rapid.IntRange(0, 12).Draw(t, "kind") {
	case 0:
		return events.ToolsToggled{Enabled: genTri(t, "enabled")}
	case 1:
		return events.WebSearchSet{Enabled: genTri(t, "ws")}
	case 2:
		return events.PresetChosen{Preset: rapid.SampledFrom([]string{"", "tiny", "ops"}).Draw(t, "preset")}
	case 3:
		return events.ToolDisabled{Name: genName.Draw(t, "name")}
	case 4:
		return events.ToolEnabled{Name: genName.Draw(t, "name")}
	case 5:
		return events.ToolsPicked{Names: genNames(t, "picked")}
	case 6:
		return events.DeferredLoaded{Names: genNames(t, "loaded"), Turn: turn}
	case 7:
		return events.TurnStarted{Turn: turn}
	case 8:
		if rapid.Bool().Draw(t, "end_with_checkpoint") {
			c := genAnyCheckpoint(t, rapid.SampledFrom([]uint64{0, 1, 2, 3, 4, 5, math.MaxUint64}).Draw(t, "cp_turn"))
			return events.TurnEnded{Turn: turn, Checkpoint: &c}
		}
		return &events.TurnEnded{Turn: turn}
	case 9:
		return genAnyCheckpoint(t, turn)
	case 10:
		return foreign{}
	case 11:
		return nil
	}
	return (*events.ToolsToggled)(nil)
}

// genAnyCheckpoint draws a checkpoint at turn, valid or breaking a rule.
func genAnyCheckpoint(t *rapid.T, turn uint64) events.CheckpointRecorded {
	c := events.CheckpointRecorded{Loaded: genNames(t, "cp"), ContractHash: rapid.SampledFrom([]string{hash(7), "h", ""}).Draw(t, "hash"),
		RegistryVersion: rapid.SampledFrom([]string{"v", ""}).Draw(t, "version"), Turn: turn}
	switch rapid.IntRange(0, 2).Draw(t, "contract") {
	case 1:
		c.Contract = []events.ContractEntry{{Name: genName.Draw(t, "cn"), Hash: rapid.SampledFrom([]string{hash(8), "x"}).Draw(t, "ch")}}
	case 2: // a contract that holds every loaded name
		for _, n := range c.Loaded {
			c.Contract = append(c.Contract, events.ContractEntry{Name: n, Hash: hash(9)})
		}
	}
	return c
}

// genLog draws a log: increasing sequences with gaps, occasional
// redeliveries, decode errors, events of another session, and events that
// break a fold rule, including a missing or different Nats-Msg-Id.
func genLog(t *rapid.T) []Stored {
	n := rapid.IntRange(0, 40).Draw(t, "n")
	out := make([]Stored, 0, n)
	var seq uint64
	for range n {
		switch rapid.IntRange(0, 9).Draw(t, "seqkind") {
		case 0: // redelivery of an old sequence
		case 1:
			seq += 3
		default:
			seq++
		}
		id := fmt.Sprintf("01KDVDNA%018d", len(out))
		st := Stored{Seq: seq, MsgID: id}
		switch rapid.IntRange(0, 9).Draw(t, "evkind") {
		case 0:
			st.Err = errors.New("undecodable")
		case 1:
			st.Envelope = events.Envelope{ID: id, Session: "other", Payload: events.ToolDisabled{Name: "grep"}}
		default:
			st.Envelope = events.Envelope{ID: id, Session: testSession, Payload: genPayload(t)}
		}
		switch rapid.IntRange(0, 19).Draw(t, "msgid") {
		case 0:
			st.MsgID = ""
		case 1:
			st.MsgID = "01KDVDNA999999999999999999"
		}
		out = append(out, st)
	}
	return out
}

func foldFrom(s State, evs []Stored) State {
	for _, ev := range evs {
		s.ApplyStored(ev) //nolint:errcheck // recorded in s
	}
	return s
}

// Folding any event sequence never panics, gives the state
// an independent reference fold gives (refFold: not Fold compared
// with itself), and keeps the state's invariants (sorted sets, counters).
func TestPropertyFoldMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genLog(t)
		a := Fold(testSession, log)
		if d := diffRef(a, refFold(testSession, log)); d != "" {
			t.Fatalf("fold differs from the reference in %s: %s", d, describeState(a))
		}
		if !slices.IsSorted(a.Loaded) || len(slices.Compact(slices.Clone(a.Loaded))) != len(a.Loaded) {
			t.Fatalf("Loaded not a sorted set: %q", a.Loaded)
		}
		if !slices.IsSorted(a.Intent.Disabled) || len(slices.Compact(slices.Clone(a.Intent.Disabled))) != len(a.Intent.Disabled) {
			t.Fatalf("Disabled not a sorted set: %q", a.Intent.Disabled)
		}
		if (a.Loaded != nil && len(a.Loaded) == 0) || (a.Intent.Disabled != nil && len(a.Intent.Disabled) == 0) {
			t.Fatalf("empty set not normalised to nil")
		}
		var last, fresh uint64
		for _, ev := range log {
			if ev.Seq > last {
				fresh++
			}
			last = max(last, ev.Seq)
		}
		if a.LastSeq != last {
			t.Fatalf("LastSeq %d, want %d", a.LastSeq, last)
		}
		// Every event above LastSeq is applied, skipped or
		// rejected, exactly one of them.
		if a.Events+a.Skipped+a.Rejected != fresh {
			t.Fatalf("counted %d+%d+%d of %d events", a.Events, a.Skipped, a.Rejected, fresh)
		}
		if len(a.Rejections) > MaxRejections || uint64(len(a.Rejections)) > a.Skipped+a.Rejected {
			t.Fatalf("%d rejections listed for %d+%d", len(a.Rejections), a.Skipped, a.Rejected)
		}
		if len(a.Loaded) > events.MaxListLen || len(a.Intent.Picked) > events.MaxPicked {
			t.Fatalf("a bound was passed: %d loaded, %d picked", len(a.Loaded), len(a.Intent.Picked))
		}
		if a.Turn > fresh || (a.InTurn && a.Turn == 0) {
			t.Fatalf("turn %d (in turn %v) after %d events: a turn must start at Turn+1", a.Turn, a.InTurn, fresh)
		}
	})
}

// Folding a prefix, snapshotting it through MarshalState /
// UnmarshalState and folding the rest equals folding everything: this is
// what snapshots rely on. Folding the rest onto a Clone equals it too.
func TestPropertyFoldHalves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genLog(t)
		cut := rapid.IntRange(0, len(log)).Draw(t, "cut")
		all := Fold(testSession, log)
		prefix := Fold(testSession, log[:cut])
		b, err := MarshalState(prefix)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := UnmarshalState(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(snap, prefix) {
			t.Fatalf("snapshot round trip:\n got %s\nwant %s", describeState(snap), describeState(prefix))
		}
		resumed := foldFrom(snap, log[cut:])
		if !reflect.DeepEqual(resumed, all) {
			t.Fatalf("halves differ from whole:\n got %s\nwant %s", describeState(resumed), describeState(all))
		}
		cloned := foldFrom(prefix.Clone(), log[cut:])
		if !reflect.DeepEqual(cloned, all) {
			t.Fatalf("clone + rest differs from whole")
		}
		// Folding the rest must not have written through to the prefix.
		if again := Fold(testSession, log[:cut]); !reflect.DeepEqual(again, prefix) {
			t.Fatalf("folding onto a clone changed the original")
		}
		// Replaying the whole log again onto the final state changes nothing.
		if re := foldFrom(all.Clone(), log); !reflect.DeepEqual(re, all) {
			t.Fatalf("redelivery of the whole log changed the state")
		}
	})
}

// Folding events that went through the wire equals folding the
// originals (nil versus empty, unset tri-states survive).
func TestPropertyFoldThroughWire(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var direct, wire []Stored
		n := rapid.IntRange(0, 20).Draw(t, "n")
		for i := range n {
			p := genPayload(t)
			if _, ok := events.PayloadValue(p); !ok {
				continue
			}
			e := env(p)
			b, err := events.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			d, err := events.Decode(b)
			seq := uint64(i + 1)
			direct = append(direct, Stored{Seq: seq, MsgID: e.ID, Envelope: e})
			wire = append(wire, Stored{Seq: seq, MsgID: e.ID, Envelope: d, Err: err})
		}
		if a, b := Fold(testSession, direct), Fold(testSession, wire); !reflect.DeepEqual(a, b) {
			t.Fatalf("wire fold differs:\n got %s\nwant %s", describeState(b), describeState(a))
		}
	})
}

// genState draws a session state as a fold could leave it, with turns at
// the edges (0, the last turn number) and sets near their bounds.
func genFoldedState(t *rapid.T) State {
	s := State{Session: testSession, LastSeq: rapid.Uint64Range(0, 100).Draw(t, "last")}
	s.Turn = rapid.SampledFrom([]uint64{0, 1, 2, 7, math.MaxUint64 - 1, math.MaxUint64}).Draw(t, "turn")
	s.InTurn = s.Turn > 0 && rapid.Bool().Draw(t, "in_turn")
	s.Intent.Enabled = genTri(t, "enabled")
	s.Intent.Picked = genNames(t, "picked")
	s.Intent.Preset = rapid.SampledFrom([]string{"", "tiny", "ops"}).Draw(t, "preset")
	s.Loaded = sortedSet(genNames(t, "loaded"))
	s.Intent.Disabled = sortedSet(genNames(t, "disabled"))
	if rapid.IntRange(0, 4).Draw(t, "full") == 0 {
		// Sets one short of the wire bound.
		for i := len(s.Loaded); i < events.MaxListLen-1; i++ {
			s.Loaded = intent.InsertSorted(s.Loaded, fmt.Sprintf("x%03d", i))
		}
		for i := len(s.Intent.Disabled); i < events.MaxListLen-1; i++ {
			s.Intent.Disabled = intent.InsertSorted(s.Intent.Disabled, fmt.Sprintf("x%03d", i))
		}
	}
	return s
}

// genCommand draws a command, often one Decide accepts: checkpoints of the
// registry's real contract, loads of deferred tools, long picked lists.
func genCommand(t *rapid.T, reg *resolver.Registry) events.Payload {
	all := []string{"zz", "tool_search"}
	for _, tl := range reg.Tools() {
		all = append(all, tl.Name)
	}
	name := rapid.SampledFrom(all)
	switch rapid.IntRange(0, 4).Draw(t, "cmdkind") {
	case 0:
		return events.ToolsPicked{Names: rapid.SliceOfNDistinct(name, 0, 30, rapid.ID[string]).Draw(t, "picked")}
	case 1:
		return events.DeferredLoaded{Names: rapid.SliceOfN(name, 0, 4).Draw(t, "loaded"), Turn: rapid.SampledFrom([]uint64{0, 1, 2, 7}).Draw(t, "lturn")}
	case 2:
		res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: bp(true)}})
		if err != nil {
			t.Fatal(err)
		}
		c := events.CheckpointRecorded{ContractHash: res.ContractHash, RegistryVersion: res.RegistryVersion, Turn: rapid.SampledFrom([]uint64{0, 1, 2, 7}).Draw(t, "cturn")}
		for _, tl := range res.Tools {
			c.Contract = append(c.Contract, events.ContractEntry{Name: tl.Name, Hash: resolver.ToolHash(tl)})
		}
		c.Loaded = rapid.SliceOfN(name, 0, 3).Draw(t, "cploaded")
		if rapid.Bool().Draw(t, "old_registry") {
			c.RegistryVersion = "older-1"
			c.ContractHash, _ = resolver.ContractHashFromToolHashes(c.RegistryVersion, hashesOf(c.Contract))
		}
		return c
	}
	return genPayload(t)
}

func hashesOf(c []events.ContractEntry) []string {
	out := make([]string, len(c))
	for i, e := range c {
		out[i] = e.Hash
	}
	return out
}

// Decide never emits an event the fold rejects. For any state and
// command, and any limits (even looser than the wire bounds), every event
// Decide returns, applied in order as stored by the engine and folded
// against the registry Decide used as the one in force, is
// applied.
func TestPropertyDecideEmitsOnlyFoldable(t *testing.T) {
	regs := []*resolver.Registry{resolver.Default(), smallRegistry(t)}
	rapid.Check(t, func(t *rapid.T) {
		reg := rapid.SampledFrom(regs).Draw(t, "reg")
		s := genFoldedState(t)
		lim := Limits{MaxPicked: rapid.IntRange(0, 40).Draw(t, "max_picked"), MaxDisabled: rapid.IntRange(0, 400).Draw(t, "max_disabled")}
		for range rapid.IntRange(1, 6).Draw(t, "cmds") {
			out, err := Decide(s, reg, genCommand(t, reg), lim)
			if err != nil {
				continue
			}
			for _, p := range out {
				e := env(p)
				if err := s.ApplyStored(Stored{Seq: s.LastSeq + 1, MsgID: e.ID, Envelope: e, Registry: reg}); err != nil {
					t.Fatalf("Decide emitted %#v, which the fold rejects: %v", p, err)
				}
			}
		}
	})
}

// The fold's verdict depends only on the state, the event and its
// Nats-Msg-Id: Check agrees with what ApplyStored does, on every state a
// fold can reach.
func TestPropertyCheckIsTheVerdict(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genLog(t)
		s := State{Session: testSession}
		for _, ev := range log {
			if _, known := events.PayloadValue(ev.Envelope.Payload); ev.Seq <= s.LastSeq || ev.Err != nil || ev.Envelope.Session != testSession || !known {
				s.ApplyStored(ev) //nolint:errcheck
				continue
			}
			verdict := s.Check(ev.Envelope, ev.MsgID)
			before := s.Clone()
			err := s.ApplyStored(ev)
			if (verdict == nil) != (err == nil) {
				t.Fatalf("Check says %v, ApplyStored %v", verdict, err)
			}
			if err != nil {
				if !errors.Is(err, ErrRejected) || !errors.Is(err, events.ErrBrokenRule) {
					t.Fatalf("rejection %v matches neither ErrRejected nor ErrBrokenRule", err)
				}
				// Not applied: only the counters, LastSeq and the list moved.
				after := s.Clone()
				after.LastSeq, after.Rejected, after.Rejections = before.LastSeq, before.Rejected, before.Rejections
				if !reflect.DeepEqual(after, before) || s.Rejected != before.Rejected+1 || s.Rejections[len(s.Rejections)-1].Seq != ev.Seq {
					t.Fatalf("rejected event changed the state:\n%s\n%s", describeState(s), describeState(before))
				}
			}
		}
	})
}
