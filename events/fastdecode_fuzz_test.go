package events

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// errClass names the error class of a Decode error, "" for none.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnknownType):
		return "unknown-type"
	case errors.Is(err, ErrFutureVersion):
		return "future-version"
	case errors.Is(err, ErrTooLarge):
		return "too-large"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	}
	return "other"
}

// fuzzDecodeSeeds reads the FuzzDecode seed corpus.
func fuzzDecodeSeeds(t testing.TB) [][]byte {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: unexpected corpus format", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, []byte(s))
	}
	return out
}

// The single-pass fast path of Decode must agree with the generic path on
// every input: same envelope, and whenever the fast path declines, Decode is
// the generic path (same envelope, error class and DecodeError header).
func FuzzDecodeFastMatchesGeneric(f *testing.F) {
	for _, b := range fuzzDecodeSeeds(f) {
		f.Add(b)
	}
	for _, v := range vectors() {
		f.Add(v.bytes(f))
	}
	// Key orders and value kinds the fast path must handle like the generic one.
	extra := [][]kv{
		{{"data", []kv{{"enabled", true}}}, {"type", "ToolsToggled"}, {"v", 2}, {"time_ms", vecTime}, {"session", vecSession}, {"id", vecID(1)}},
		{{"data", []kv{{"contract", []any{map[string]any{"name": "bash", "hash": "x"}}}, {"turn", 2}}}, {"type", "CheckpointRecorded"}, {"v", 2}, {"time_ms", vecTime}, {"session", vecSession}, {"id", vecID(2)}},
		{{"id", vecID(3)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "ToolDisabled"}, {"data", []kv{{"name", []byte("bash")}, {"x", []int{1, 2}}}}, {"y", 1.5}},
		{{"id", vecID(4)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "TurnEnded"}, {"data", []kv{{"turn", 2.0}}}},
		{{"id", vecID(5)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "TurnEnded"}, {"data", nil}},
		{{"id", vecID(6)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "ToolEnabled"}},
		{{"id", vecID(7)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "ToolsToggled"}, {"data", []kv{{"enabled", true}}}, {"z", 1}, {"z", 2}},
		// A turn end's checkpoint, nil, of the wrong kind, and before the turn.
		{{"id", vecID(8)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "TurnEnded"}, {"data", []kv{{"turn", 2}, {"checkpoint", nil}}}},
		{{"id", vecID(9)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "TurnEnded"}, {"data", []kv{{"turn", 2}, {"checkpoint", "x"}}}},
		{{"id", vecID(10)}, {"session", vecSession}, {"time_ms", vecTime}, {"v", 2}, {"type", "TurnEnded"}, {"data", []kv{{"checkpoint", []kv{{"contract_hash", "h"}, {"registry_version", "r"}, {"turn", 2}}}, {"turn", 2}}}},
	}
	for _, e := range extra {
		f.Add(encodeOrdered(f, e))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		gen, genErr := decodeGeneric(b)
		if fast, ok := decodeFast(b); ok {
			if genErr != nil {
				t.Fatalf("fast path accepted what the generic path refuses (%v): %+v", genErr, fast)
			}
			if !reflect.DeepEqual(fast, gen) {
				t.Fatalf("fast and generic paths differ:\n fast    %+v\n generic %+v", fast, gen)
			}
		}
		got, err := Decode(b)
		if errClass(err) != errClass(genErr) {
			t.Fatalf("Decode error class %q (%v), generic %q (%v)", errClass(err), err, errClass(genErr), genErr)
		}
		if !reflect.DeepEqual(got, gen) {
			t.Fatalf("Decode and generic envelopes differ:\n Decode  %+v\n generic %+v", got, gen)
		}
		if err != nil {
			var de, ge *DecodeError
			if !errors.As(err, &de) || !errors.As(genErr, &ge) {
				t.Fatalf("errors are not *DecodeError: %v, %v", err, genErr)
			}
			if de.ID != ge.ID || de.Session != ge.Session || de.Type != ge.Type || de.Version != ge.Version || err.Error() != genErr.Error() {
				t.Fatalf("DecodeError differs:\n %v\n %v", err, genErr)
			}
		}
	})
}

// The fast path must actually take the common events. A TurnStarted that
// records its request and a SessionCompacted may go through the generic
// decoder.
func TestDecodeFastTakesVectors(t *testing.T) {
	for _, v := range vectors() {
		if v.wantErr != nil {
			continue
		}
		_, ok := decodeFast(v.bytes(t))
		t.Logf("%s: fast=%v", v.name, ok)
		if !ok && !strings.HasPrefix(v.name, "v1_") && !strings.HasPrefix(v.name, "turn_started_") && v.name != "session_compacted" {
			t.Errorf("%s: fast path declined a v2 event", v.name)
		}
	}
}
