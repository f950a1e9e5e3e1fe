package events

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/intent"
)

var update = flag.Bool("update", false, "regenerate testdata/vectors and testdata/fuzz/FuzzDecode seeds")

// Fixed values so the vectors are deterministic (they document the wire
// format in docs/wire-format.md).
const (
	vecTime    = int64(1767225600000) // 2026-01-01T00:00:00Z
	vecSession = "sess_01"
)

func vecID(n int) string { return fmt.Sprintf("01KDVDNA00000000000000%04d", n) }

func bp(b bool) *bool { return &b }

// kv is one entry of an ordered msgpack map, for vectors that Encode would
// not produce (older versions, other writers' key orders, malformed ones).
type kv struct {
	k string
	v any
}

// encodeOrdered writes v with msgpack, keeping []kv maps in order.
func encodeOrdered(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	var walk func(v any)
	walk = func(v any) {
		var err error
		switch x := v.(type) {
		case []kv:
			err = enc.EncodeMapLen(len(x))
			for _, e := range x {
				if err == nil {
					err = enc.EncodeString(e.k)
				}
				walk(e.v)
			}
		case []any:
			err = enc.EncodeArrayLen(len(x))
			for _, e := range x {
				walk(e)
			}
		case []string:
			err = enc.EncodeArrayLen(len(x))
			for _, e := range x {
				walk(e)
			}
		case int:
			err = enc.EncodeInt(int64(x))
		case int64:
			err = enc.EncodeInt(x)
		default:
			err = enc.Encode(x)
		}
		if err != nil {
			t.Fatalf("encode vector: %v", err)
		}
	}
	walk(v)
	return buf.Bytes()
}

type vector struct {
	name        string
	description string
	env         *Envelope // encoded with Encode
	raw         []kv      // encoded in order, for non-Encode vectors
	wantErr     error     // the sentinel Decode must report
}

func vectors() []vector {
	v2 := func(n int, p Payload) *Envelope {
		return &Envelope{ID: vecID(n), Session: vecSession, Channel: "web", Actor: "user:alice", TimeMs: vecTime + int64(n), Version: SchemaVersion, Type: p.EventType(), Payload: p}
	}
	header := func(n, v int, typ string) []kv {
		return []kv{{"id", vecID(n)}, {"session", vecSession}, {"time_ms", vecTime + int64(n)}, {"v", v}, {"type", typ}}
	}
	with := func(h []kv, extra ...kv) []kv { return append(h, extra...) }
	return []vector{
		{name: "tools_toggled", description: "v2 ToolsToggled{enabled:true}", env: v2(1, ToolsToggled{Enabled: bp(true)})},
		{name: "tools_toggled_unset", description: "v2 ToolsToggled with enabled nil: follow the profile", env: v2(2, ToolsToggled{})},
		{name: "web_search_set", description: "v2 WebSearchSet{enabled:false}", env: v2(3, WebSearchSet{Enabled: bp(false)})},
		{name: "preset_chosen", description: "v2 PresetChosen{preset:research}", env: v2(4, PresetChosen{Preset: "research"})},
		{name: "tool_disabled", description: "v2 ToolDisabled{name:bash}", env: v2(5, ToolDisabled{Name: "bash"})},
		{name: "tool_enabled", description: "v2 ToolEnabled{name:bash}", env: v2(6, ToolEnabled{Name: "bash"})},
		{name: "tools_picked", description: "v2 ToolsPicked in the user's order", env: v2(7, ToolsPicked{Names: []string{"read_file", "grep", "web_fetch"}})},
		{name: "tools_picked_unset", description: "v2 ToolsPicked with names nil: unset the picked list", env: v2(8, ToolsPicked{})},
		{name: "deferred_loaded", description: "v2 DeferredLoaded in turn 3", env: v2(9, DeferredLoaded{Names: []string{"playwright_browser"}, Turn: 3})},
		{name: "deferred_evicted", description: "v2 DeferredEvicted after turn 7: the loaded set's bound unloads two tools", env: v2(24, DeferredEvicted{Names: []string{"send_message", "playwright_browser"}, Turn: 7, Reason: "bound"})},
		{name: "session_deleted", description: "v2 SessionDeleted: the session is closed for good", env: v2(26, SessionDeleted{Reason: "user request"})},
		{name: "session_compacted", description: "v2 SessionCompacted: events 3..40 (12 of them) rolled up into the state they fold to, then purged", env: v2(28, SessionCompacted{
			FirstSeq: 3, LastSeq: 40, Count: 12, FirstMs: vecTime, LastMs: vecTime + 5000, Reason: "retention: idle since 2026-01-01T00:00:00Z",
			Intent:     intent.Intent{Enabled: bp(true), WebSearch: bp(true), Disabled: []string{"bash"}},
			Loaded:     []string{"playwright_browser"},
			Referenced: []string{"playwright_browser", "send_message"},
			Turn:       3, TurnSeq: 31,
			Checkpoint: &CheckpointRecorded{Loaded: []string{"playwright_browser"}, ContractHash: strings.Repeat("ab", 32), RegistryVersion: "builtin-2026.12.1", Turn: 3,
				Contract: []ContractEntry{{Name: "playwright_browser", Hash: strings.Repeat("01", 32)}}},
			CheckpointSeq: 38, Events: 12,
			Grants:     []CompactedGrant{{Tool: "bash", Scope: ScopeSession, By: "user:alice", Channel: "web", Turn: 2, Seq: 20}},
			GrantsTurn: 3,
		})},
		{name: "permission_granted", description: "v2 PermissionGranted: alice allows bash for the session, answered in turn 5", env: v2(25, PermissionGranted{By: "user:alice", Scope: ScopeSession, Tool: "bash", Turn: 5})},
		{name: "turn_started", description: "v2 TurnStarted{turn:3}", env: v2(10, TurnStarted{Turn: 3})},
		{name: "turn_ended", description: "v2 TurnEnded{turn:3}", env: v2(11, TurnEnded{Turn: 3})},
		{name: "turn_ended_checkpoint", description: "v2 TurnEnded carrying its checkpoint: a turn's end at a safe point in one event; older logs hold TurnEnded{turn} then CheckpointRecorded, which fold the same", env: v2(27, TurnEnded{Turn: 3, Checkpoint: &CheckpointRecorded{
			Loaded:          []string{"playwright_browser"},
			ContractHash:    strings.Repeat("ab", 32),
			RegistryVersion: "builtin-2026.12.1",
			Turn:            3,
			Contract:        []ContractEntry{{Name: "playwright_browser", Hash: strings.Repeat("01", 32)}},
		}})},
		{name: "checkpoint_recorded", description: "v2 CheckpointRecorded with a per-tool contract", env: v2(12, CheckpointRecorded{
			Loaded:          []string{"playwright_browser", "send_message"},
			ContractHash:    strings.Repeat("ab", 32),
			RegistryVersion: "builtin-2026.12.1",
			Turn:            3,
			Contract:        []ContractEntry{{Name: "playwright_browser", Hash: strings.Repeat("01", 32)}, {Name: "send_message", Hash: strings.Repeat("02", 32)}},
		})},
		{name: "v1_tools_toggled", description: "v1 ToolsToggled: key tools_enabled, no channel/actor; read as v2 with enabled",
			raw: with(header(13, 1, "ToolsToggled"), kv{"data", []kv{{"tools_enabled", false}}})},
		{name: "v1_preset_chosen", description: "v1 PresetChosen: key toolset, no channel/actor; read as v2 with preset",
			raw: with(header(14, 1, "PresetChosen"), kv{"data", []kv{{"toolset", "coding"}}})},
		{name: "v1_checkpoint_recorded", description: "v1 CheckpointRecorded without loaded_deferred_tools: read as v2 with the empty set",
			raw: with(header(15, 1, "CheckpointRecorded"), kv{"data", []kv{{"contract_hash", strings.Repeat("cd", 32)}, {"registry_version", "builtin-2025.1"}, {"turn", 7}}})},
		{name: "v2_foreign_writer", description: "v2 written by another language: other key order, extra keys at both levels are ignored",
			raw: []kv{{"type", "ToolsPicked"}, {"v", 2}, {"data", []kv{{"names", []string{}}, {"ui_hint", "compact"}}}, {"trace_id", "abc"},
				{"time_ms", vecTime + 16}, {"actor", "bot"}, {"channel", "slack"}, {"session", vecSession}, {"id", vecID(16)}}},
		{name: "turn_started_recorded", description: "v2 TurnStarted recording its request: the session's intent, the profile, an override intent, the registry version and the contract hash", env: v2(22, TurnStarted{
			Turn:            4,
			Intent:          &TurnIntent{Enabled: bp(true), Preset: "research", Disabled: []string{"bash"}},
			Profile:         "coder",
			Override:        &TurnOverride{Kind: OverrideIntent, Intent: &TurnIntent{WebSearch: bp(true)}},
			RegistryVersion: "builtin-2026.12.1",
			ContractHash:    strings.Repeat("ef", 32),
		})},
		{name: "turn_started_provider", description: "v2 TurnStarted recording its request and the provider mode the turn was begun for", env: v2(29, TurnStarted{
			Turn:            5,
			Intent:          &TurnIntent{Enabled: bp(true)},
			RegistryVersion: "builtin-2026.12.1",
			ContractHash:    strings.Repeat("ef", 32),
			Provider:        "openai-engine",
		})},
		{name: "turn_started_override_names", description: "v2 TurnStarted with an override of names, a short user-curated list", env: v2(23, TurnStarted{
			Turn:            5,
			Intent:          &TurnIntent{},
			Override:        &TurnOverride{Kind: OverrideNames, Names: []string{"read_file", "grep"}},
			RegistryVersion: "builtin-2026.12.1",
			ContractHash:    strings.Repeat("0f", 32),
		})},
		{name: "bad_unknown_type", description: "an unknown type: kept in the log and skipped; the header is still reported",
			raw: with(header(17, 2, "ToolsRenamed"), kv{"channel", "web"}, kv{"actor", "x"}, kv{"data", []kv{{"from", "a"}}}), wantErr: ErrUnknownType},
		{name: "bad_future_version", description: "schema version 3 (newer than this reader): kept in the log and skipped",
			raw: with(header(18, 3, "ToolsToggled"), kv{"data", []kv{{"enabled", true}}}), wantErr: ErrFutureVersion},
		{name: "bad_tool_name", description: "a tool name outside ^[A-Za-z][A-Za-z0-9_-]{0,63}$: malformed, kept in the log and skipped",
			raw: with(header(19, 2, "ToolDisabled"), kv{"data", []kv{{"name", "Bash Tool"}}}), wantErr: ErrMalformed},
		{name: "bad_no_actor", description: "a v2 event without an actor (v2 names who wrote every event): malformed, kept in the log and skipped",
			raw: with(header(21, 2, "ToolsToggled"), kv{"channel", "web"}, kv{"actor", ""}, kv{"data", []kv{{"enabled", true}}}), wantErr: ErrMalformed},
		{name: "bad_session", description: "a session id with a dot (two NATS tokens): malformed, kept in the log and skipped",
			raw: []kv{{"id", vecID(20)}, {"session", "a.b"}, {"time_ms", vecTime}, {"v", 2}, {"type", "TurnEnded"}, {"data", []kv{{"turn", 1}}}}, wantErr: ErrMalformed},
	}
}

func (v vector) bytes(t testing.TB) []byte {
	if v.env != nil {
		b, err := Encode(*v.env)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		return b
	}
	return encodeOrdered(t, v.raw)
}

// expected is the JSON description of a vector's decoded form.
type expected struct {
	Description string         `json:"description"`
	Envelope    map[string]any `json:"envelope,omitempty"`
	Error       string         `json:"error,omitempty"`
	Header      map[string]any `json:"error_header,omitempty"`
}

// sentinelName is the wire-level name of a decode error in the vector
// files (no Go identifiers there: foreign clients read them).
func sentinelName(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{{"unknown_type", ErrUnknownType}, {"future_version", ErrFutureVersion}, {"malformed", ErrMalformed}} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return fmt.Sprintf("unexpected error %v", err)
}

// describe turns a Decode result into its JSON description, through JSON so
// that the comparison with the file is on JSON values.
func describe(t testing.TB, desc string, e Envelope, err error) []byte {
	t.Helper()
	x := expected{Description: desc}
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("error %v is not a *DecodeError", err)
		}
		x.Error = sentinelName(err)
		x.Header = map[string]any{"id": de.ID, "session": de.Session, "type": de.Type, "v": de.Version}
	} else {
		x.Envelope = map[string]any{"id": e.ID, "session": e.Session, "channel": e.Channel, "actor": e.Actor,
			"time_ms": e.TimeMs, "v": e.Version, "type": e.Type, "data": e.Payload}
	}
	b, jerr := json.MarshalIndent(x, "", "  ")
	if jerr != nil {
		t.Fatal(jerr)
	}
	return append(b, '\n')
}

const vectorDir = "testdata/vectors"

// Every golden vector decodes to its recorded form; v2
// vectors re-encode to the same bytes.
func TestGoldenVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	vs := vectors()
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			hexText, err := os.ReadFile(filepath.Join(vectorDir, v.name+".hex"))
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenVectors -update)", err)
			}
			b, err := hex.DecodeString(strings.TrimSpace(string(hexText)))
			if err != nil {
				t.Fatal(err)
			}
			if want := v.bytes(t); !bytes.Equal(b, want) {
				t.Fatalf("vector bytes changed:\n file %x\n code %x", b, want)
			}
			e, derr := Decode(b)
			if (derr != nil) != (v.wantErr != nil) || (derr != nil && !errors.Is(derr, v.wantErr)) {
				t.Fatalf("Decode error = %v, want %v", derr, v.wantErr)
			}
			wantJSON, err := os.ReadFile(filepath.Join(vectorDir, v.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(describe(t, v.description, e, derr), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(wantJSON, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded form differs from %s.json:\n got %s\nwant %s", v.name, describe(t, v.description, e, derr), wantJSON)
			}
			if derr == nil && v.env != nil {
				again, err := Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, b) {
					t.Fatalf("re-encode differs:\n got %x\nwant %x", again, b)
				}
				if !reflect.DeepEqual(e, *v.env) {
					t.Fatalf("decoded %+v, want %+v", e, *v.env)
				}
			}
		})
	}
	// Every file in the directory belongs to a vector.
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*"))
	names := map[string]bool{}
	for _, v := range vs {
		names[v.name+".hex"], names[v.name+".json"] = true, true
	}
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("stray vector file %s (run -update)", f)
		}
	}
}

func writeVectors(t *testing.T) {
	t.Helper()
	if err := os.RemoveAll(vectorDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(vectorDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors() {
		b := v.bytes(t)
		e, err := Decode(b)
		write(t, filepath.Join(vectorDir, v.name+".hex"), []byte(hex.EncodeToString(b)+"\n"))
		write(t, filepath.Join(vectorDir, v.name+".json"), describe(t, v.description, e, err))
	}
	writeFuzzSeeds(t)
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// malformedSeeds are hand-made broken inputs for the fuzz corpus.
func malformedSeeds(t testing.TB) map[string][]byte {
	good := vectors()[0].bytes(t)
	seeds := map[string][]byte{
		"empty":          {},
		"nil":            {0xc0},
		"array":          {0x91, 0x01},
		"huge_map":       {0xdf, 0xff, 0xff, 0xff, 0xff},
		"huge_str":       {0x81, 0xdb, 0xff, 0xff, 0xff, 0xff},
		"huge_array":     {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"deep":           append([]byte{0x81, 0xa1, 'x'}, bytes.Repeat([]byte{0x91}, 40)...),
		"int_key":        {0x81, 0x01, 0x02},
		"ext_value":      encodeOrdered(t, []kv{{"x", msgpack.RawMessage{0xd4, 0x05, 0x00}}}),
		"never_used":     {0xc1},
		"truncated":      good[:len(good)/2],
		"trailing_bytes": append(bytes.Clone(good), 0x00),
	}
	return seeds
}

func writeFuzzSeeds(t *testing.T) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seed := func(name string, b []byte) {
		write(t, filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)))
	}
	for _, v := range vectors() {
		seed("vector_"+v.name, v.bytes(t))
	}
	m := malformedSeeds(t)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		seed("malformed_"+k, m[k])
	}
}
