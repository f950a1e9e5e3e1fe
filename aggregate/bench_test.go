package aggregate

import (
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// benchLog is a realistic session: intent changes, then turns with loads
// and checkpoints.
func benchLog(b *testing.B) [][]byte {
	var ps []events.Payload
	ps = append(ps, events.ToolsToggled{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(true)},
		events.ToolDisabled{Name: "bash"}, events.PresetChosen{Preset: "research"})
	for turn := uint64(1); turn <= 24; turn++ {
		ps = append(ps, events.TurnStarted{Turn: turn})
		if turn%4 == 0 {
			ps = append(ps, events.DeferredLoaded{Names: []string{"send_message"}, Turn: turn})
		}
		ps = append(ps, events.TurnEnded{Turn: turn})
		if turn%8 == 0 {
			ps = append(ps, events.CheckpointRecorded{Loaded: []string{"send_message"}, ContractHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", RegistryVersion: "builtin-2026.12.1", Turn: turn,
				Contract: []events.ContractEntry{{Name: "send_message", Hash: "89abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567"}}})
		}
	}
	ps = append(ps, events.ToolsPicked{Names: []string{"read_file", "grep", "web_fetch"}}, events.ToolEnabled{Name: "bash"})
	out := make([][]byte, len(ps))
	for i, p := range ps {
		raw, err := events.Encode(env(p))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = raw
	}
	return out
}

// The cost of rebuilding a session from its log (decode + the fold's
// rules + apply, per event); snapshots bound how many events this runs
// over.
func BenchmarkDecodeFold(b *testing.B) {
	log := benchLog(b)
	ids := make([]string, len(log))
	for i, raw := range log {
		e, err := events.Decode(raw)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = e.ID // the Nats-Msg-Id header of each stored event
	}
	b.ReportAllocs()
	for b.Loop() {
		s := State{Session: testSession}
		for i, raw := range log {
			e, err := events.Decode(raw)
			s.ApplyStored(Stored{Seq: uint64(i + 1), MsgID: ids[i], Envelope: e, Err: err})
		}
		if s.Skipped != 0 || s.Rejected != 0 || s.Events != uint64(len(log)) {
			b.Fatalf("fold: %+v", s)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(log)), "ns/event")
}

// Apply alone, per event.
func BenchmarkApply(b *testing.B) {
	log := benchLog(b)
	envs := make([]events.Envelope, len(log))
	for i, raw := range log {
		e, err := events.Decode(raw)
		if err != nil {
			b.Fatal(err)
		}
		envs[i] = e
	}
	b.ReportAllocs()
	for b.Loop() {
		s := State{Session: testSession}
		for i, e := range envs {
			s.Apply(uint64(i+1), e)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(envs)), "ns/event")
}

// Snapshot encode + decode of a folded state.
func BenchmarkMarshalState(b *testing.B) {
	log := benchLog(b)
	var s State
	for i, raw := range log {
		e, _ := events.Decode(raw)
		s.Apply(uint64(i+1), e)
	}
	b.ReportAllocs()
	for b.Loop() {
		raw, err := MarshalState(s)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := UnmarshalState(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// Explaining one tool over a session's log: the fold plus one
// registry explanation per event that changes the intent. Compare with
// BenchmarkDecodeFold's fold alone (events are decoded once, outside the
// loop, here).
func BenchmarkBlame(b *testing.B) {
	raw := benchLog(b)
	envs := make([]events.Envelope, len(raw))
	for i, r := range raw {
		e, err := events.Decode(r)
		if err != nil {
			b.Fatal(err)
		}
		envs[i] = e
	}
	reg := resolver.Default()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bl := NewBlame(reg, testSession, "bash", intent.Override{}, "")
		for i, e := range envs {
			bl.Apply(Stored{Seq: uint64(i + 1), MsgID: e.ID, Envelope: e})
		}
		if bl.Seq() == 0 {
			b.Fatal("no event blamed")
		}
	}
	b.ReportMetric(float64(len(envs)), "events/op")
}
