package aggregate

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/toolintent/engine/events"
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

// genPayload draws any payload, including ones Apply must skip.
func genPayload(t *rapid.T) events.Payload {
	turn := rapid.Uint64Range(0, 5).Draw(t, "turn")
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
		return &events.TurnEnded{Turn: turn}
	case 9:
		c := events.CheckpointRecorded{Loaded: genNames(t, "cp"), ContractHash: "h", RegistryVersion: "v", Turn: turn}
		if rapid.Bool().Draw(t, "contract") {
			c.Contract = []events.ContractEntry{{Name: genName.Draw(t, "cn"), Hash: "x"}}
		}
		return c
	case 10:
		return foreign{}
	case 11:
		return nil
	}
	return (*events.ToolsToggled)(nil)
}

// genLog draws a log: increasing sequences with gaps, occasional
// redeliveries, decode errors and events of another session.
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
		st := Stored{Seq: seq}
		switch rapid.IntRange(0, 9).Draw(t, "evkind") {
		case 0:
			st.Err = errors.New("undecodable")
		case 1:
			st.Envelope = events.Envelope{Session: "other", Payload: events.ToolDisabled{Name: "grep"}}
		default:
			st.Envelope = events.Envelope{Session: testSession, Payload: genPayload(t)}
		}
		out = append(out, st)
	}
	return out
}

func foldFrom(s State, evs []Stored) State {
	for _, ev := range evs {
		if ev.Err != nil {
			s.Skip(ev.Seq)
		} else {
			s.Apply(ev.Seq, ev.Envelope)
		}
	}
	return s
}

// R24, R26: folding any event sequence never panics, is deterministic, and
// keeps the state's invariants (sorted sets, counters).
func TestPropertyFoldDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genLog(t)
		a := Fold(testSession, log)
		b := Fold(testSession, log)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("fold not deterministic")
		}
		ba, err1 := MarshalState(a)
		bb, err2 := MarshalState(b)
		if err1 != nil || err2 != nil || string(ba) != string(bb) {
			t.Fatalf("marshalled states differ: %v %v", err1, err2)
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
		var last uint64
		for _, ev := range log {
			last = max(last, ev.Seq)
		}
		if a.LastSeq != last {
			t.Fatalf("LastSeq %d, want %d", a.LastSeq, last)
		}
		if a.Events+a.Skipped > uint64(len(log)) {
			t.Fatalf("counted %d+%d of %d events", a.Events, a.Skipped, len(log))
		}
	})
}

// R24: folding a prefix, snapshotting it through MarshalState /
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

// R3, R24: folding events that went through the wire equals folding the
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
			direct = append(direct, Stored{Seq: seq, Envelope: e})
			wire = append(wire, Stored{Seq: seq, Envelope: d, Err: err})
		}
		if a, b := Fold(testSession, direct), Fold(testSession, wire); !reflect.DeepEqual(a, b) {
			t.Fatalf("wire fold differs:\n got %s\nwant %s", describeState(b), describeState(a))
		}
	})
}
