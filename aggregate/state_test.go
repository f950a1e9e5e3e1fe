package aggregate

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolintent/engine/events"
)

// Each event type folds into the state as documented.
func TestApplyRules(t *testing.T) {
	cp := events.CheckpointRecorded{Loaded: []string{"send_message", "big_browser"}, ContractHash: hash(0xab), RegistryVersion: "v", Turn: 2,
		Contract: []events.ContractEntry{{Name: "big_browser", Hash: hash(1)}, {Name: "send_message", Hash: hash(2)}}}
	t1, t2 := events.TurnStarted{Turn: 1}, events.TurnStarted{Turn: 2}
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
		{"enabled true clears picked", []events.Payload{events.ToolsPicked{Names: []string{"grep", "bash"}}, events.ToolsToggled{Enabled: bp(true)}},
			func(s State) bool { return s.Intent.Picked == nil && *s.Intent.Enabled }},
		{"enabled false clears picked", []events.Payload{events.ToolsPicked{Names: []string{"grep"}}, events.ToolsToggled{Enabled: bp(false)}},
			func(s State) bool { return s.Intent.Picked == nil && !*s.Intent.Enabled }},
		{"follow profile clears picked", []events.Payload{events.ToolsPicked{Names: []string{"grep"}}, events.ToolsToggled{}},
			func(s State) bool { return s.Intent.Picked == nil && s.Intent.Enabled == nil }},
		{"picked after the switch stays", []events.Payload{events.ToolsToggled{Enabled: bp(true)}, events.ToolsPicked{Names: []string{"grep"}}},
			func(s State) bool { return reflect.DeepEqual(s.Intent.Picked, []string{"grep"}) && *s.Intent.Enabled }},
		{"the switch keeps preset, disabled and web_search", []events.Payload{events.PresetChosen{Preset: "research"}, events.ToolDisabled{Name: "grep"}, events.WebSearchSet{Enabled: bp(true)}, events.ToolsToggled{Enabled: bp(true)}},
			func(s State) bool {
				return s.Intent.Preset == "research" && reflect.DeepEqual(s.Intent.Disabled, []string{"grep"}) && *s.Intent.WebSearch
			}},
		{"picked keeps order", []events.Payload{events.ToolsPicked{Names: []string{"grep", "bash"}}},
			func(s State) bool { return reflect.DeepEqual(s.Intent.Picked, []string{"grep", "bash"}) }},
		{"picked nil unsets", []events.Payload{events.ToolsPicked{Names: []string{"grep"}}, events.ToolsPicked{}},
			func(s State) bool { return s.Intent.Picked == nil }},
		{"picked empty is set", []events.Payload{events.ToolsPicked{Names: []string{}}},
			func(s State) bool { return s.Intent.Picked != nil && len(s.Intent.Picked) == 0 }},
		{"loaded sorted dedup", []events.Payload{t1, events.DeferredLoaded{Names: []string{"z", "a"}, Turn: 1}, events.DeferredLoaded{Names: []string{"a", "m"}, Turn: 1}},
			func(s State) bool { return reflect.DeepEqual(s.Loaded, []string{"a", "m", "z"}) }},
		{"turn started", []events.Payload{events.TurnStarted{Turn: 1}}, func(s State) bool { return s.Turn == 1 && s.InTurn }},
		{"turn ended", []events.Payload{events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1}}, func(s State) bool { return s.Turn == 1 && !s.InTurn }},
		{"checkpoint replaces loaded", []events.Payload{t1, t2, events.DeferredLoaded{Names: []string{"other"}, Turn: 2}, cp},
			func(s State) bool {
				c := s.Checkpoint
				return reflect.DeepEqual(s.Loaded, []string{"big_browser", "send_message"}) && c != nil && c.Seq == 4 && c.Turn == 2 &&
					c.ContractHash == hash(0xab) && c.RegistryVersion == "v" && reflect.DeepEqual(c.Loaded, cp.Loaded) && reflect.DeepEqual(c.Contract, cp.Contract)
			}},
		{"old checkpoint without loaded restores empty", []events.Payload{t1, events.DeferredLoaded{Names: []string{"other"}, Turn: 1}, events.CheckpointRecorded{ContractHash: hash(0xcd), RegistryVersion: "v"}},
			func(s State) bool { return s.Loaded == nil && s.Checkpoint != nil && s.Checkpoint.Loaded == nil }},
	}
	for _, c := range cases {
		s := Fold(testSession, stored(c.events...))
		if !c.check(s) {
			t.Errorf("%s: state %s", c.name, describeState(s))
		}
		if s.Events != uint64(len(c.events)) || s.LastSeq != uint64(len(c.events)) || s.Skipped != 0 || s.Rejected != 0 || s.Rejections != nil {
			t.Errorf("%s: counters %+v", c.name, s)
		}
	}
}

// The state never aliases the events it was folded from.
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

// Apply ignores seq <= LastSeq, so a redelivered event is
// harmless.
func TestApplyIdempotent(t *testing.T) {
	var s State
	s.Apply(1, env(events.ToolDisabled{Name: "grep"}))
	s.Apply(2, env(events.ToolDisabled{Name: "bash"}))
	before := s.Clone()
	s.Apply(2, env(events.ToolEnabled{Name: "bash"}))
	s.Apply(1, env(events.ToolEnabled{Name: "grep"}))
	s.Apply(0, env(events.ToolEnabled{Name: "grep"}))
	if err := s.ApplyStored(Stored{Seq: 2, Err: errors.New("undecodable")}); err != nil {
		t.Fatalf("redelivered undecodable event: %v", err)
	}
	if !reflect.DeepEqual(s, before) {
		t.Fatalf("redelivery changed state:\n%s\n%s", describeState(s), describeState(before))
	}
	if s.Session != testSession {
		t.Errorf("Session = %q, want it adopted from the first event", s.Session)
	}
}

// An undecodable event, an unknown type or a foreign session is
// counted as skipped and later events keep applying.
func TestSkipKeepsLaterEvents(t *testing.T) {
	_, decodeErr := events.Decode([]byte{0xc1})
	other := env(events.ToolDisabled{Name: "bash"})
	other.Session = "someone_else"
	first, last := env(events.ToolDisabled{Name: "grep"}), env(events.ToolsToggled{Enabled: bp(true)})
	evs := []Stored{
		{Seq: 1, MsgID: first.ID, Envelope: first},
		{Seq: 2, Err: decodeErr},
		{Seq: 3, Envelope: events.Envelope{Session: testSession, Payload: foreign{}}},
		{Seq: 4, Envelope: events.Envelope{Session: testSession}},
		{Seq: 5, MsgID: other.ID, Envelope: other},
		{Seq: 7, Err: errors.New("gap then error")},
		{Seq: 8, MsgID: last.ID, Envelope: last},
	}
	s := Fold(testSession, evs)
	if s.Skipped != 5 || s.Events != 2 || s.LastSeq != 8 || s.Rejected != 0 {
		t.Fatalf("counters: %+v", s)
	}
	var seqs []uint64
	for _, r := range s.Rejections {
		if r.Kind != KindSkipped || r.Reason == "" {
			t.Errorf("rejection %+v: want kind %s and a reason", r, KindSkipped)
		}
		seqs = append(seqs, r.Seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{2, 3, 4, 5, 7}) {
		t.Errorf("rejections at %v, want 2 3 4 5 7", seqs)
	}
	if !reflect.DeepEqual(s.Intent.Disabled, []string{"grep"}) || s.Intent.Enabled == nil || !*s.Intent.Enabled {
		t.Fatalf("fold corrupted: %s", describeState(s))
	}
}

type foreign struct{}

func (foreign) EventType() events.Type { return "Foreign" }

// Clone is a deep copy; caches can hand out clones safely.
func TestClone(t *testing.T) {
	s := Fold(testSession, stored(
		events.ToolsToggled{Enabled: bp(true)}, events.WebSearchSet{Enabled: bp(true)},
		events.ToolDisabled{Name: "grep"}, events.ToolsPicked{Names: []string{"bash"}}, events.TurnStarted{Turn: 1},
		events.CheckpointRecorded{Loaded: []string{"a"}, ContractHash: hash(1), RegistryVersion: "v", Contract: []events.ContractEntry{{Name: "a", Hash: hash(2)}}},
		events.TurnStarted{Turn: 9}, // rejected: listed in Rejections
	))
	if s.Rejected != 1 || s.Checkpoint == nil {
		t.Fatalf("setup: %s", describeState(s))
	}
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
	c.Rejections[0].Reason = "x"
	if !*s.Intent.Enabled || !*s.Intent.WebSearch || s.Intent.Disabled[0] != "grep" || s.Intent.Picked[0] != "bash" ||
		s.Loaded[0] != "a" || s.Checkpoint.Loaded[0] != "a" || s.Checkpoint.Contract[0].Name != "a" || s.Checkpoint.Turn != 0 || s.Rejections[0].Reason == "x" {
		t.Fatalf("clone shares memory with the original: %s", describeState(s))
	}
	// Applying to a clone never writes through to the original.
	d := s.Clone()
	d.Apply(10, env(events.ToolDisabled{Name: "aaa"}))
	d.Apply(11, env(events.TurnStarted{Turn: 2}))
	d.Apply(12, env(events.DeferredLoaded{Names: []string{"b"}, Turn: 2}))
	d.Apply(13, env(events.TurnStarted{Turn: 99}))
	if len(d.Loaded) != 2 || d.Rejected != 2 {
		t.Fatalf("setup: %s", describeState(d))
	}
	if len(s.Intent.Disabled) != 1 || len(s.Loaded) != 1 || len(s.Rejections) != 1 {
		t.Fatalf("apply on a clone changed the original: %s", describeState(s))
	}
	if z := (State{}).Clone(); !reflect.DeepEqual(z, State{}) {
		t.Fatalf("zero clone = %+v", z)
	}
}

// MarshalState carries a schema version and round-trips exactly.
func TestMarshalState(t *testing.T) {
	s := Fold(testSession, stored(
		events.ToolsToggled{Enabled: bp(false)}, events.ToolsPicked{Names: []string{}},
		events.TurnStarted{Turn: 1}, events.CheckpointRecorded{Loaded: []string{}, ContractHash: hash(1), RegistryVersion: "v", Contract: []events.ContractEntry{}},
		events.TurnStarted{Turn: 7},
	))
	if s.Rejected != 1 || len(s.Rejections) != 1 || s.Checkpoint == nil {
		t.Fatalf("want one rejection and a checkpoint to round-trip: %s", describeState(s))
	}
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

// A snapshot with a missing, older-than-1 or future version is refused
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
		{"version 1 (folded before the fold rules)", []byte("\x81\xa1v\x01"), ErrStateVersion},
		{"version 2 (folded before the registry rules)", []byte("\x81\xa1v\x02"), ErrStateVersion},
		{"version 3 (folded before the load order)", []byte("\x81\xa1v\x03"), ErrStateVersion},
		{"version 4 (folded before the referenced tools)", []byte("\x81\xa1v\x04"), ErrStateVersion},
		{"future version", []byte("\x81\xa1v\x07"), ErrStateVersion},
		{"trailing", append(mustMarshal(t, State{}), 0xc0), ErrMalformedState},
		{"wrong field type", []byte("\x82\xa1v\x05\xa4turn\xa1x"), ErrMalformedState},
		{"wrong rejection type", []byte("\x82\xa1v\x05\xaarejections\x91\x81\xa3seq\xa1x"), ErrMalformedState},
		{"too large", make([]byte, MaxStateBytes+1), ErrMalformedState},
	}
	for _, c := range cases {
		if _, err := UnmarshalState(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Unknown keys are ignored (a newer writer of the same version).
	s, err := UnmarshalState([]byte("\x83\xa1v\x05\xa5extra\x93\x01\x02\x03\xa7session\xa1s"))
	if err != nil || s.Session != "s" {
		t.Fatalf("unknown key: %+v, %v", s, err)
	}
}

// UnmarshalState never panics on any input.
func FuzzUnmarshalState(f *testing.F) {
	f.Add(mustMarshalF(f, State{}))
	f.Add(mustMarshalF(f, Fold(testSession, stored(events.ToolsPicked{Names: []string{"a"}}, events.CheckpointRecorded{Loaded: []string{"b"}, Contract: []events.ContractEntry{{Name: "b"}}}))))
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("\x82\xa1v\x04\xa6loaded\xdd\xff\xff\xff\xff"))
	f.Add([]byte("\x82\xa1v\x03\xaarejections\x91\x85\xa3seq\x01\xa2id\xa1i\xa4type\xa1t\xa4kind\xa1k\xa6reason\xa1r"))
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

// Every fold rule, on a session mid-turn: the breaking event is not
// applied, LastSeq moves past it, and it is counted and listed with its
// sequence, id, type and a reason naming the rule.
func TestFoldRejectsBrokenRules(t *testing.T) {
	setup := stored(events.ToolsToggled{Enabled: bp(true)}, events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1}, events.TurnStarted{Turn: 2})
	var defaults []string
	for i := range 21 {
		defaults = append(defaults, fmt.Sprintf("tool_%02d", i))
	}
	cp := func(mod func(*events.CheckpointRecorded)) events.CheckpointRecorded {
		c := events.CheckpointRecorded{Loaded: []string{"big_browser"}, ContractHash: hash(1), RegistryVersion: "v", Turn: 2,
			Contract: []events.ContractEntry{{Name: "big_browser", Hash: hash(2)}, {Name: "grep", Hash: hash(3)}}}
		mod(&c)
		return c
	}
	cases := []struct {
		name   string
		p      events.Payload
		msgID  func(id string) string
		reason string
	}{
		{"materialized picked list", events.ToolsPicked{Names: defaults}, nil, "ToolsPicked has 21 names, at most 16"},
		{"picked twice", events.ToolsPicked{Names: []string{"grep", "bash", "grep"}}, nil, `names "grep" twice`},
		{"load in another turn", events.DeferredLoaded{Names: []string{"big_browser"}, Turn: 1}, nil, "DeferredLoaded turn 1, want the open turn 2"},
		{"turn wraps", events.TurnStarted{Turn: math.MaxUint64}, nil, "TurnStarted turn 18446744073709551615, want the next turn 3"},
		{"turn repeated", events.TurnStarted{Turn: 2}, nil, "want the next turn 3"},
		{"end of another turn", events.TurnEnded{Turn: 1}, nil, "TurnEnded turn 1, want the open turn 2"},
		{"checkpoint without contract", cp(func(c *events.CheckpointRecorded) { c.Contract = nil }), nil, `loads "big_browser" but records no contract`},
		{"checkpoint outside its contract", cp(func(c *events.CheckpointRecorded) { c.Loaded = []string{"send_message"} }), nil, `loads "send_message", which is not in its contract`},
		{"checkpoint hash x", cp(func(c *events.CheckpointRecorded) { c.ContractHash = "x" }), nil, `contract_hash "x" is not 64 lower-case hex`},
		{"checkpoint upper-case hash", cp(func(c *events.CheckpointRecorded) { c.ContractHash = strings.ToUpper(hash(0xab)) }), nil, "not 64 lower-case hex"},
		{"checkpoint tool hash", cp(func(c *events.CheckpointRecorded) { c.Contract[1].Hash = "" }), nil, "contract[1] (grep) hash"},
		{"checkpoint without registry version", cp(func(c *events.CheckpointRecorded) { c.RegistryVersion = "" }), nil, "no registry_version"},
		{"checkpoint of a future turn", cp(func(c *events.CheckpointRecorded) { c.Turn = 3 }), nil, "at turn 3, after the last started turn 2"},
		{"no Nats-Msg-Id", events.PresetChosen{Preset: "ops"}, func(string) string { return "" }, "without a Nats-Msg-Id header"},
		{"other Nats-Msg-Id", events.PresetChosen{Preset: "ops"}, func(string) string { return "01KDVDNA000000000000000000" }, `with Nats-Msg-Id "01KDVDNA000000000000000000"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := Fold(testSession, setup)
			if before.Rejected != 0 || before.Turn != 2 || !before.InTurn {
				t.Fatalf("setup: %s", describeState(before))
			}
			e := env(c.p)
			msgID := e.ID
			if c.msgID != nil {
				msgID = c.msgID(e.ID)
			}
			s := before.Clone()
			err := s.ApplyStored(Stored{Seq: 9, MsgID: msgID, Envelope: e})
			if !errors.Is(err, ErrRejected) || !errors.Is(err, events.ErrBrokenRule) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("verdict %v, want a rejection naming %q", err, c.reason)
			}
			want := before.Clone()
			want.LastSeq, want.Rejected = 9, 1
			want.Rejections = []Rejection{{Seq: 9, ID: e.ID, Type: string(e.Type), Kind: KindRejected, Reason: err.Error()}}
			if !reflect.DeepEqual(s, want) {
				t.Fatalf("state after the rejection:\n got %s\nwant %s", describeState(s), describeState(want))
			}
			// Later events still apply.
			if err := s.Apply(10, env(events.TurnEnded{Turn: 2})); err != nil || s.InTurn || s.Events != before.Events+1 {
				t.Fatalf("next event: %v, %s", err, describeState(s))
			}
		})
	}
}

// Loads outside a turn and turn ends without a turn are rejected;
// the sets stay within the wire bound whoever writes them.
func TestFoldRejectsOutOfTurnAndOverflow(t *testing.T) {
	for _, evs := range [][]events.Payload{
		{events.DeferredLoaded{Names: []string{"big_browser"}, Turn: 0}},
		{events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1}, events.DeferredLoaded{Names: []string{"big_browser"}, Turn: 1}},
		{events.TurnEnded{Turn: 0}},
		{events.TurnStarted{Turn: 1}, events.TurnEnded{Turn: 1}, events.TurnEnded{Turn: 1}},
	} {
		s := Fold(testSession, stored(evs...))
		if s.Rejected != 1 || s.Loaded != nil || s.Rejections[0].Seq != uint64(len(evs)) {
			t.Errorf("%v: %s", evs, describeState(s))
		}
	}
	var evs []events.Payload
	for i := range events.MaxListLen + 1 {
		evs = append(evs, events.ToolDisabled{Name: fmt.Sprintf("t%03d", i)})
	}
	evs = append(evs, events.TurnStarted{Turn: 1})
	for i := 0; i <= events.MaxListLen; i += events.MaxListLen / 4 {
		var names []string
		for j := i; j < min(i+events.MaxListLen/4, events.MaxListLen+1); j++ {
			names = append(names, fmt.Sprintf("d%03d", j))
		}
		evs = append(evs, events.DeferredLoaded{Names: names, Turn: 1})
	}
	s := Fold(testSession, stored(evs...))
	if len(s.Intent.Disabled) != events.MaxListLen || len(s.Loaded) != events.MaxListLen || s.Rejected != 2 {
		t.Fatalf("%d disabled, %d loaded, %d rejected; want %d, %d, 2", len(s.Intent.Disabled), len(s.Loaded), s.Rejected, events.MaxListLen, events.MaxListLen)
	}
}

// Rejections keeps the last MaxRejections, oldest first, and the
// counters keep counting.
func TestRejectionsBounded(t *testing.T) {
	var evs []events.Payload
	for range MaxRejections + 3 {
		evs = append(evs, events.TurnEnded{Turn: 5})
	}
	s := Fold(testSession, stored(evs...))
	if s.Rejected != MaxRejections+3 || len(s.Rejections) != MaxRejections || s.Rejections[0].Seq != 4 || s.Rejections[MaxRejections-1].Seq != MaxRejections+3 {
		t.Fatalf("%d rejected, listed %+v", s.Rejected, s.Rejections)
	}
	long := strings.Repeat("é", MaxReasonLen)
	s.ApplyStored(Stored{Seq: 100, Err: errors.New(long)}) //nolint:errcheck
	if r := s.Rejections[MaxRejections-1]; len(r.Reason) > MaxReasonLen || !utf8.ValidString(r.Reason) || r.Kind != KindSkipped || s.Skipped != 1 {
		t.Fatalf("long reason kept as %d bytes (valid %v), kind %s", len(r.Reason), utf8.ValidString(r.Reason), r.Kind)
	}
}
