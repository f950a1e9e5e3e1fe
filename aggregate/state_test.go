package aggregate

import (
	"errors"
	"reflect"
	"testing"

	"github.com/toolintent/engine/events"
)

// R1, R24: each event type folds into the state as documented.
func TestApplyRules(t *testing.T) {
	cp := events.CheckpointRecorded{Loaded: []string{"send_message", "big_browser"}, ContractHash: "h", RegistryVersion: "v", Turn: 2,
		Contract: []events.ContractEntry{{Name: "big_browser", Hash: "x"}}}
	cases := []struct {
		name   string
		events []events.Payload
		check  func(s State) bool
	}{
		{"enabled true", []events.Payload{events.ToolsToggled{Enabled: bp(true)}}, func(s State) bool { return *s.Intent.Enabled }},
		{"enabled back to unset", []events.Payload{events.ToolsToggled{Enabled: bp(false)}, events.ToolsToggled{}}, func(s State) bool { return s.Intent.Enabled == nil }},
		{"web search", []events.Payload{events.WebSearchSet{Enabled: bp(false)}}, func(s State) bool { return !*s.Intent.WebSearch && s.Intent.Enabled == nil }},
		{"preset", []events.Payload{events.PresetChosen{Preset: "research"}}, func(s State) bool { return s.Intent.Preset == "research" }},
		{"preset unset", []events.Payload{events.PresetChosen{Preset: "research"}, events.PresetChosen{}}, func(s State) bool { return s.Intent.Preset == "" }},
		{"disabled sorted dedup", []events.Payload{events.ToolDisabled{Name: "grep"}, events.ToolDisabled{Name: "bash"}, events.ToolDisabled{Name: "grep"}},
			func(s State) bool { return reflect.DeepEqual(s.Intent.Disabled, []string{"bash", "grep"}) }},
		{"enabled removes", []events.Payload{events.ToolDisabled{Name: "grep"}, events.ToolDisabled{Name: "bash"}, events.ToolEnabled{Name: "grep"}, events.ToolEnabled{Name: "nope"}},
			func(s State) bool { return reflect.DeepEqual(s.Intent.Disabled, []string{"bash"}) }},
		{"last enabled leaves nil", []events.Payload{events.ToolDisabled{Name: "grep"}, events.ToolEnabled{Name: "grep"}},
			func(s State) bool { return s.Intent.Disabled == nil }},
		{"R1 enabled true clears picked", []events.Payload{events.ToolsPicked{Names: []string{"grep", "bash"}}, events.ToolsToggled{Enabled: bp(true)}},
			func(s State) bool { return s.Intent.Picked == nil && *s.Intent.Enabled }},
		{"R1 enabled false clears picked", []events.Payload{events.ToolsPicked{Names: []string{"grep"}}, events.ToolsToggled{Enabled: bp(false)}},
			func(s State) bool { return s.Intent.Picked == nil && !*s.Intent.Enabled }},
		{"R1 follow profile clears picked", []events.Payload{events.ToolsPicked{Names: []string{"grep"}}, events.ToolsToggled{}},
			func(s State) bool { return s.Intent.Picked == nil && s.Intent.Enabled == nil }},
		{"R1 picked after the switch stays", []events.Payload{events.ToolsToggled{Enabled: bp(true)}, events.ToolsPicked{Names: []string{"grep"}}},
			func(s State) bool { return reflect.DeepEqual(s.Intent.Picked, []string{"grep"}) && *s.Intent.Enabled }},
		{"R1 the switch keeps preset, disabled and web_search", []events.Payload{events.PresetChosen{Preset: "research"}, events.ToolDisabled{Name: "grep"}, events.WebSearchSet{Enabled: bp(true)}, events.ToolsToggled{Enabled: bp(true)}},
			func(s State) bool {
				return s.Intent.Preset == "research" && reflect.DeepEqual(s.Intent.Disabled, []string{"grep"}) && *s.Intent.WebSearch
			}},
		{"picked keeps order", []events.Payload{events.ToolsPicked{Names: []string{"grep", "bash"}}},
			func(s State) bool { return reflect.DeepEqual(s.Intent.Picked, []string{"grep", "bash"}) }},
		{"picked nil unsets", []events.Payload{events.ToolsPicked{Names: []string{"grep"}}, events.ToolsPicked{}},
			func(s State) bool { return s.Intent.Picked == nil }},
		{"picked empty is set", []events.Payload{events.ToolsPicked{Names: []string{}}},
			func(s State) bool { return s.Intent.Picked != nil && len(s.Intent.Picked) == 0 }},
		{"loaded sorted dedup", []events.Payload{events.DeferredLoaded{Names: []string{"z", "a"}}, events.DeferredLoaded{Names: []string{"a", "m"}}},
			func(s State) bool { return reflect.DeepEqual(s.Loaded, []string{"a", "m", "z"}) }},
		{"turn started", []events.Payload{events.TurnStarted{Turn: 1}}, func(s State) bool { return s.Turn == 1 && s.InTurn }},
		{"turn ended", []events.Payload{events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1}}, func(s State) bool { return s.Turn == 1 && !s.InTurn }},
		{"checkpoint replaces loaded", []events.Payload{events.DeferredLoaded{Names: []string{"other"}}, cp},
			func(s State) bool {
				c := s.Checkpoint
				return reflect.DeepEqual(s.Loaded, []string{"big_browser", "send_message"}) && c != nil && c.Seq == 2 && c.Turn == 2 &&
					c.ContractHash == "h" && c.RegistryVersion == "v" && reflect.DeepEqual(c.Loaded, cp.Loaded) && reflect.DeepEqual(c.Contract, cp.Contract)
			}},
		{"old checkpoint without loaded restores empty", []events.Payload{events.DeferredLoaded{Names: []string{"other"}}, events.CheckpointRecorded{ContractHash: "h"}},
			func(s State) bool { return s.Loaded == nil && s.Checkpoint != nil && s.Checkpoint.Loaded == nil }},
	}
	for _, c := range cases {
		s := Fold(testSession, stored(c.events...))
		if !c.check(s) {
			t.Errorf("%s: state %s", c.name, describeState(s))
		}
		if s.Events != uint64(len(c.events)) || s.LastSeq != uint64(len(c.events)) || s.Skipped != 0 {
			t.Errorf("%s: counters %+v", c.name, s)
		}
	}
}

// R24: the state never aliases the events it was folded from.
func TestApplyCopies(t *testing.T) {
	names := []string{"grep"}
	on := true
	s := Fold(testSession, stored(events.ToolsToggled{Enabled: &on}, events.ToolsPicked{Names: names}))
	names[0] = "changed"
	on = false
	if s.Intent.Picked[0] != "grep" || !*s.Intent.Enabled {
		t.Fatalf("state aliases event data: %s", describeState(s))
	}
}

// R23, R24: Apply ignores seq <= LastSeq, so a redelivered event is
// harmless.
func TestApplyIdempotent(t *testing.T) {
	var s State
	s.Apply(1, env(events.ToolDisabled{Name: "grep"}))
	s.Apply(2, env(events.ToolDisabled{Name: "bash"}))
	before := s.Clone()
	s.Apply(2, env(events.ToolEnabled{Name: "bash"}))
	s.Apply(1, env(events.ToolEnabled{Name: "grep"}))
	s.Apply(0, env(events.ToolEnabled{Name: "grep"}))
	s.Skip(2)
	if !reflect.DeepEqual(s, before) {
		t.Fatalf("redelivery changed state:\n%s\n%s", describeState(s), describeState(before))
	}
	if s.Session != testSession {
		t.Errorf("Session = %q, want it adopted from the first event", s.Session)
	}
}

// R26: an undecodable event, an unknown type or a foreign session is
// counted as skipped and later events keep applying.
func TestSkipKeepsLaterEvents(t *testing.T) {
	_, decodeErr := events.Decode([]byte{0xc1})
	other := env(events.ToolDisabled{Name: "bash"})
	other.Session = "someone_else"
	evs := []Stored{
		{Seq: 1, Envelope: env(events.ToolDisabled{Name: "grep"})},
		{Seq: 2, Err: decodeErr},
		{Seq: 3, Envelope: events.Envelope{Session: testSession, Payload: foreign{}}},
		{Seq: 4, Envelope: events.Envelope{Session: testSession}},
		{Seq: 5, Envelope: other},
		{Seq: 7, Err: errors.New("gap then error")},
		{Seq: 8, Envelope: env(events.ToolsToggled{Enabled: bp(true)})},
	}
	s := Fold(testSession, evs)
	if s.Skipped != 5 || s.Events != 2 || s.LastSeq != 8 {
		t.Fatalf("counters: %+v", s)
	}
	if !reflect.DeepEqual(s.Intent.Disabled, []string{"grep"}) || s.Intent.Enabled == nil || !*s.Intent.Enabled {
		t.Fatalf("fold corrupted: %s", describeState(s))
	}
}

type foreign struct{}

func (foreign) EventType() events.Type { return "Foreign" }

// R24: Clone is a deep copy; caches can hand out clones safely.
func TestClone(t *testing.T) {
	s := Fold(testSession, stored(
		events.ToolsToggled{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(true)},
		events.ToolDisabled{Name: "grep"}, events.ToolsPicked{Names: []string{"bash"}},
		events.CheckpointRecorded{Loaded: []string{"a"}, ContractHash: "h", Contract: []events.ContractEntry{{Name: "a", Hash: "1"}}},
	))
	c := s.Clone()
	if !reflect.DeepEqual(c, s) {
		t.Fatal("clone differs")
	}
	*c.Intent.Enabled = false
	*c.Intent.WebSearch = false
	c.Intent.Disabled[0] = "x"
	c.Intent.Picked[0] = "x"
	c.Loaded[0] = "x"
	c.Checkpoint.Loaded[0] = "x"
	c.Checkpoint.Contract[0].Name = "x"
	c.Checkpoint.Turn = 9
	if !*s.Intent.Enabled || !*s.Intent.WebSearch || s.Intent.Disabled[0] != "grep" || s.Intent.Picked[0] != "bash" ||
		s.Loaded[0] != "a" || s.Checkpoint.Loaded[0] != "a" || s.Checkpoint.Contract[0].Name != "a" || s.Checkpoint.Turn != 0 {
		t.Fatalf("clone shares memory with the original: %s", describeState(s))
	}
	// Applying to a clone never writes through to the original.
	d := s.Clone()
	d.Apply(10, env(events.ToolDisabled{Name: "aaa"}))
	d.Apply(11, env(events.DeferredLoaded{Names: []string{"0"}}))
	if len(s.Intent.Disabled) != 1 || len(s.Loaded) != 1 {
		t.Fatalf("apply on a clone changed the original: %s", describeState(s))
	}
	if z := (State{}).Clone(); !reflect.DeepEqual(z, State{}) {
		t.Fatalf("zero clone = %+v", z)
	}
}

// R3, R24: MarshalState carries a schema version and round-trips exactly.
func TestMarshalState(t *testing.T) {
	s := Fold(testSession, stored(
		events.ToolsToggled{Enabled: bp(false)}, events.ToolsPicked{Names: []string{}},
		events.TurnStarted{Turn: 1}, events.CheckpointRecorded{Loaded: []string{}, ContractHash: "h", Contract: []events.ContractEntry{}},
	))
	b, err := MarshalState(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %s\nwant %s", describeState(got), describeState(s))
	}
	b2, _ := MarshalState(got)
	if string(b) != string(b2) {
		t.Fatal("MarshalState is not deterministic")
	}
	if z, err := UnmarshalState(mustMarshal(t, State{})); err != nil || !reflect.DeepEqual(z, State{}) {
		t.Fatalf("zero state round trip = %+v, %v", z, err)
	}
}

func mustMarshal(t *testing.T, s State) []byte {
	t.Helper()
	b, err := MarshalState(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// R3: a snapshot with a missing, older-than-1 or future version is refused
// with ErrStateVersion / ErrMalformedState, never misread.
func TestUnmarshalStateErrors(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformedState},
		{"not a map", []byte{0x01}, ErrMalformedState},
		{"no version", []byte("\x81\xa7session\xa1s"), ErrMalformedState},
		{"version 0", []byte("\x81\xa1v\x00"), ErrStateVersion},
		{"future version", []byte("\x81\xa1v\x02"), ErrStateVersion},
		{"trailing", append(mustMarshal(t, State{}), 0xc0), ErrMalformedState},
		{"wrong field type", []byte("\x82\xa1v\x01\xa4turn\xa1x"), ErrMalformedState},
		{"too large", make([]byte, MaxStateBytes+1), ErrMalformedState},
	}
	for _, c := range cases {
		if _, err := UnmarshalState(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Unknown keys are ignored (a newer writer of the same version).
	s, err := UnmarshalState([]byte("\x83\xa1v\x01\xa5extra\x93\x01\x02\x03\xa7session\xa1s"))
	if err != nil || s.Session != "s" {
		t.Fatalf("unknown key: %+v, %v", s, err)
	}
}

// R26: UnmarshalState never panics on any input.
func FuzzUnmarshalState(f *testing.F) {
	f.Add(mustMarshalF(f, State{}))
	f.Add(mustMarshalF(f, Fold(testSession, stored(events.ToolsPicked{Names: []string{"a"}}, events.CheckpointRecorded{Loaded: []string{"b"}, Contract: []events.ContractEntry{{Name: "b"}}}))))
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("\x82\xa1v\x01\xa6loaded\xdd\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := UnmarshalState(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedState) && !errors.Is(err, ErrStateVersion) {
				t.Fatalf("error %v matches no sentinel", err)
			}
			return
		}
		again, err := MarshalState(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := UnmarshalState(again)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-marshal changed the state: %v", err)
		}
	})
}

func mustMarshalF(f *testing.F, s State) []byte {
	b, err := MarshalState(s)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
