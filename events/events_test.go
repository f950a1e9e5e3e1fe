package events

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/vmihailenco/msgpack/v5"
)

// The session id is exactly one NATS subject token.
func TestValidateSessionID(t *testing.T) {
	good := []string{"a", "S-1_x", strings.Repeat("z", 128), "01KDVDNA000000000000000000"}
	bad := []string{"", "a.b", "a*", "a>", "a b", "é", strings.Repeat("z", 129), "a\x00"}
	for _, s := range good {
		if err := ValidateSessionID(s); err != nil {
			t.Errorf("ValidateSessionID(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateSessionID(s); !errors.Is(err, ErrInvalidSession) {
			t.Errorf("ValidateSessionID(%q) = %v, want ErrInvalidSession", s, err)
		}
	}
}

// Tool names in payloads match the registry's name pattern.
func TestValidateToolName(t *testing.T) {
	good := []string{"a", "read_file", "web-search2", "a" + strings.Repeat("b", 63), "Read", "mcp__github__create_issue", "mcp__jira__createJiraIssue"}
	bad := []string{"", "1abc", "_a", "a.b", "a b", "a/b", "a" + strings.Repeat("b", 64)}
	for _, s := range good {
		if err := ValidateToolName(s); err != nil {
			t.Errorf("ValidateToolName(%q) = %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateToolName(s); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateToolName(%q) = %v, want ErrInvalidName", s, err)
		}
	}
}

// New stamps a ULID, the time, the schema version and the type.
func TestNew(t *testing.T) {
	e := New("s1", "web", "alice", &TurnStarted{Turn: 1})
	if _, err := ulid.ParseStrict(e.ID); err != nil {
		t.Fatalf("ID %q: %v", e.ID, err)
	}
	id := ulid.MustParse(e.ID)
	if int64(id.Time()) != e.TimeMs {
		t.Errorf("ULID time %d != TimeMs %d", id.Time(), e.TimeMs)
	}
	if e.Version != SchemaVersion || e.Type != TypeTurnStarted || e.Session != "s1" || e.Channel != "web" || e.Actor != "alice" {
		t.Errorf("New = %+v", e)
	}
	// A nil pointer payload must not panic; Encode refuses it.
	e = New("s1", "", "", (*TurnStarted)(nil))
	if e.Type != "" {
		t.Errorf("Type = %q for a nil payload", e.Type)
	}
	if _, err := Encode(e); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("Encode(nil payload) = %v, want ErrInvalidEvent", err)
	}
}

// Ids are unique and increasing even under concurrent use (they are
// the dedupe ids).
func TestNewIDConcurrentMonotonic(t *testing.T) {
	const workers, per = 8, 500
	var mu sync.Mutex
	seen := make(map[string]bool, workers*per)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := ""
			for range per {
				id := NewID()
				if id <= prev {
					t.Errorf("id %s not after %s", id, prev)
				}
				prev = id
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func validEnv(p Payload) Envelope {
	return Envelope{ID: vecID(1), Session: "s1", Channel: "c", Actor: "a", TimeMs: 5, Version: SchemaVersion, Payload: p}
}

// Encode refuses envelopes Decode would refuse, so nothing unreadable
// is ever appended.
func TestEncodeValidates(t *testing.T) {
	long := make([]string, MaxListLen+1)
	for i := range long {
		long[i] = "t"
	}
	cases := []struct {
		name string
		e    Envelope
		want error
	}{
		{"bad id", func() Envelope { e := validEnv(TurnEnded{}); e.ID = "nope"; return e }(), ErrInvalidEvent},
		{"bad session", func() Envelope { e := validEnv(TurnEnded{}); e.Session = "a.b"; return e }(), ErrInvalidSession},
		{"type mismatch", func() Envelope { e := validEnv(TurnEnded{}); e.Type = TypeTurnStarted; return e }(), ErrInvalidEvent},
		{"old version", func() Envelope { e := validEnv(TurnEnded{}); e.Version = 1; return e }(), ErrInvalidEvent},
		{"no payload", validEnv(nil), ErrInvalidEvent},
		{"bad name", validEnv(ToolDisabled{Name: "Bad name"}), ErrInvalidName},
		{"empty name", validEnv(ToolEnabled{}), ErrInvalidName},
		{"bad preset", validEnv(PresetChosen{Preset: "Full Set"}), ErrInvalidName},
		{"long list", validEnv(ToolsPicked{Names: long}), ErrInvalidEvent},
		{"bad loaded", validEnv(CheckpointRecorded{Loaded: []string{"x y"}}), ErrInvalidName},
		{"bad contract", validEnv(CheckpointRecorded{Contract: []ContractEntry{{Name: ""}}}), ErrInvalidName},
		{"long actor", func() Envelope { e := validEnv(TurnEnded{}); e.Actor = strings.Repeat("a", MaxTextLen+1); return e }(), ErrInvalidEvent},
		{"bad utf8", func() Envelope { e := validEnv(TurnEnded{}); e.Channel = "\xff"; return e }(), ErrInvalidEvent},
		{"no channel", func() Envelope { e := validEnv(TurnEnded{}); e.Channel = ""; return e }(), ErrInvalidEvent},
		{"no actor", func() Envelope { e := validEnv(TurnEnded{}); e.Actor = ""; return e }(), ErrInvalidEvent},
	}
	for _, c := range cases {
		if _, err := Encode(c.e); !errors.Is(err, c.want) {
			t.Errorf("%s: Encode error %v, want %v", c.name, err, c.want)
		}
	}
	// Version 0 and an empty Type are filled in.
	e := validEnv(&TurnEnded{Turn: 2})
	e.Version = 0
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b)
	if err != nil || d.Version != SchemaVersion || d.Type != TypeTurnEnded || d.Payload != (TurnEnded{Turn: 2}) {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
}

// Every way an event can be broken yields a *DecodeError matching
// the right sentinel, never a panic; unknown types keep their header.
func TestDecodeErrors(t *testing.T) {
	h := func(extra ...kv) []kv {
		return append([]kv{{"id", vecID(1)}, {"session", "s1"}, {"time_ms", 1}, {"v", 2}}, extra...)
	}
	long := make([]string, MaxListLen+1)
	for i := range long {
		long[i] = "t"
	}
	cases := []struct {
		name string
		raw  []byte
		want error
	}{
		{"too large", bytes.Repeat([]byte{0xc0}, MaxEventBytes+1), ErrTooLarge},
		{"too large is malformed", bytes.Repeat([]byte{0xc0}, MaxEventBytes+1), ErrMalformed},
		{"not a map", []byte{0x01}, ErrMalformed},
		{"empty", nil, ErrMalformed},
		{"unknown type", encodeOrdered(t, h(kv{"type", "Nope"})), ErrUnknownType},
		{"future version", encodeOrdered(t, []kv{{"id", vecID(1)}, {"session", "s1"}, {"time_ms", 1}, {"v", 9}, {"type", "TurnEnded"}}), ErrFutureVersion},
		{"version 0", encodeOrdered(t, []kv{{"id", vecID(1)}, {"session", "s1"}, {"time_ms", 1}, {"v", 0}, {"type", "TurnEnded"}}), ErrMalformed},
		{"no version", encodeOrdered(t, []kv{{"id", vecID(1)}, {"session", "s1"}, {"time_ms", 1}, {"type", "TurnEnded"}}), ErrMalformed},
		{"no time", encodeOrdered(t, []kv{{"id", vecID(1)}, {"session", "s1"}, {"v", 2}, {"type", "TurnEnded"}}), ErrMalformed},
		{"bad id", encodeOrdered(t, []kv{{"id", "x"}, {"session", "s1"}, {"time_ms", 1}, {"v", 2}, {"type", "TurnEnded"}}), ErrMalformed},
		{"id not string", encodeOrdered(t, []kv{{"id", 5}, {"session", "s1"}, {"time_ms", 1}, {"v", 2}, {"type", "TurnEnded"}}), ErrMalformed},
		{"bad session", encodeOrdered(t, []kv{{"id", vecID(1)}, {"session", "a b"}, {"time_ms", 1}, {"v", 2}, {"type", "TurnEnded"}}), ErrInvalidSession},
		{"data not map", encodeOrdered(t, h(kv{"type", "TurnEnded"}, kv{"data", "x"})), ErrMalformed},
		{"negative turn", encodeOrdered(t, h(kv{"type", "TurnEnded"}, kv{"data", []kv{{"turn", -1}}})), ErrMalformed},
		{"enabled not bool", encodeOrdered(t, h(kv{"type", "ToolsToggled"}, kv{"data", []kv{{"enabled", "yes"}}})), ErrMalformed},
		{"names not list", encodeOrdered(t, h(kv{"type", "ToolsPicked"}, kv{"data", []kv{{"names", "a"}}})), ErrMalformed},
		{"name not string", encodeOrdered(t, h(kv{"type", "ToolsPicked"}, kv{"data", []kv{{"names", []any{1}}}})), ErrMalformed},
		{"list too long", encodeOrdered(t, h(kv{"type", "ToolsPicked"}, kv{"data", []kv{{"names", long}}})), ErrMalformed},
		{"bad name", encodeOrdered(t, h(kv{"type", "ToolDisabled"}, kv{"data", []kv{{"name", "a.b"}}})), ErrInvalidName},
		{"missing name", encodeOrdered(t, h(kv{"type", "ToolDisabled"}, kv{"data", []kv{}})), ErrMalformed},
		{"duplicate key", encodeOrdered(t, h(kv{"type", "TurnEnded"}, kv{"type", "TurnEnded"})), ErrMalformed},
		{"trailing", append(encodeOrdered(t, h(kv{"type", "TurnEnded"})), 0xc0), ErrMalformed},
		{"huge map header", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"deep nesting", append([]byte{0x81, 0xa1, 'x'}, bytes.Repeat([]byte{0x91}, 40)...), ErrMalformed},
		// Version 2 names who wrote every event.
		{"v2 without channel", encodeOrdered(t, h(kv{"type", "TurnEnded"}, kv{"actor", "a"})), ErrInvalidEvent},
		{"v2 without actor", encodeOrdered(t, h(kv{"type", "TurnEnded"}, kv{"channel", "web"}, kv{"actor", ""})), ErrMalformed},
	}
	for _, c := range cases {
		e, err := Decode(c.raw)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: error %v is not a *DecodeError", c.name, err)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v does not match %v", c.name, err, c.want)
		}
		if e.Payload != nil {
			t.Errorf("%s: payload %v on error", c.name, e.Payload)
		}
	}
	// The header of an unknown-type event is reported.
	_, err := Decode(encodeOrdered(t, h(kv{"type", "Nope"})))
	var de *DecodeError
	if !errors.As(err, &de) || de.ID != vecID(1) || de.Session != "s1" || de.Type != "Nope" || de.Version != 2 {
		t.Fatalf("DecodeError = %+v", de)
	}
	if !strings.Contains(err.Error(), vecID(1)) || !strings.Contains(err.Error(), `"Nope"`) {
		t.Errorf("message %q does not name the event", err)
	}
}

// Decoding is tolerant: unknown keys (of any msgpack type, including
// extensions) are ignored, integral floats and bin strings are accepted,
// missing optional fields read back unset.
func TestDecodeTolerant(t *testing.T) {
	raw := encodeOrdered(t, []kv{
		{"ext", extRaw}, {"id", vecID(1)}, {"session", "s1"}, {"time_ms", float64(42)}, {"v", 2}, {"channel", []byte("web")}, {"actor", "a"},
		{"type", "CheckpointRecorded"}, {"nested", []kv{{"a", []any{1, "x", nil, 1.5}}}},
		{"data", []kv{{"contract_hash", []byte("h")}, {"future_field", true}}},
	})
	e, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := CheckpointRecorded{ContractHash: "h"}
	got := e.Payload.(CheckpointRecorded)
	if got.ContractHash != want.ContractHash || got.Loaded != nil || got.Contract != nil || e.TimeMs != 42 || e.Channel != "web" || e.Actor != "a" {
		t.Fatalf("Decode = %+v", e)
	}
}

// extRaw is an extension value (fixext1, type 5), written verbatim.
var extRaw = msgpack.RawMessage{0xd4, 0x05, 0x00}

// Upcasters are keyed by (type, version); v1 keys are renamed, and a
// writer that sent both keys is read at the newer one.
func TestUpcasters(t *testing.T) {
	cases := []struct {
		name string
		typ  string
		data []kv
		want Payload
	}{
		{"v1 tools_enabled", "ToolsToggled", []kv{{"tools_enabled", true}}, ToolsToggled{Enabled: bp(true)}},
		{"v1 tools_enabled nil", "ToolsToggled", []kv{{"tools_enabled", nil}}, ToolsToggled{}},
		{"v1 both keys", "ToolsToggled", []kv{{"tools_enabled", true}, {"enabled", false}}, ToolsToggled{Enabled: bp(false)}},
		{"v1 toolset", "PresetChosen", []kv{{"toolset", "coding"}}, PresetChosen{Preset: "coding"}},
		{"v1 unchanged type", "TurnStarted", []kv{{"turn", 4}}, TurnStarted{Turn: 4}},
		{"v1 no data", "ToolsToggled", nil, ToolsToggled{}},
	}
	for _, c := range cases {
		raw := []kv{{"id", vecID(1)}, {"session", "s1"}, {"time_ms", 1}, {"v", 1}, {"type", c.typ}}
		if c.data != nil {
			raw = append(raw, kv{"data", c.data})
		}
		e, err := Decode(encodeOrdered(t, raw))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if e.Version != SchemaVersion {
			t.Errorf("%s: version %d", c.name, e.Version)
		}
		if !payloadEqual(e.Payload, c.want) {
			t.Errorf("%s: payload %+v, want %+v", c.name, e.Payload, c.want)
		}
	}
	// Every upcaster reads a version below SchemaVersion of a known type.
	for k := range upcasters {
		if !k.typ.Known() || k.from < 1 || k.from >= SchemaVersion {
			t.Errorf("upcaster %+v is unreachable", k)
		}
	}
}

func payloadEqual(a, b Payload) bool {
	ea, _ := Encode(validEnv(a))
	eb, _ := Encode(validEnv(b))
	return ea != nil && bytes.Equal(ea, eb)
}

// The exact wire layout of one event (string keys, fixed order).
func TestEncodeLayout(t *testing.T) {
	b, err := Encode(validEnv(TurnStarted{Turn: 1}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "session", "channel", "actor", "time_ms", "v", "type", "data"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	if d := m["data"].(map[string]any); d["turn"] != int64(1) {
		t.Errorf("data = %v", d)
	}
	// Too large on encode.
	names := make([]string, MaxListLen)
	for i := range names {
		names[i] = "t" + strings.Repeat("x", 62)
	}
	big := CheckpointRecorded{Loaded: names, Contract: make([]ContractEntry, MaxContractLen)}
	for i := range big.Contract {
		big.Contract[i] = ContractEntry{Name: names[0], Hash: strings.Repeat("f", 64)}
	}
	if _, err := Encode(validEnv(big)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Encode(big) = %v, want ErrTooLarge", err)
	}
}
