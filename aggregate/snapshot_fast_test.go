package aggregate

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
)

// Reference (reflection-based) encoder and decoder: the implementation
// MarshalState / UnmarshalState replaced. The fast ones must produce the
// same bytes and accept exactly the same inputs.

type refStateWire struct {
	V          int                `msgpack:"v"`
	Session    string             `msgpack:"session"`
	Intent     refIntentWire      `msgpack:"intent"`
	Loaded     []string           `msgpack:"loaded"`
	Turn       uint64             `msgpack:"turn"`
	InTurn     bool               `msgpack:"in_turn"`
	LastSeq    uint64             `msgpack:"last_seq"`
	Events     uint64             `msgpack:"events"`
	Checkpoint *refCheckpointWire `msgpack:"checkpoint"`
	Skipped    uint64             `msgpack:"skipped"`
	Rejected   uint64             `msgpack:"rejected"`
	Rejections []refRejection     `msgpack:"rejections"`
	TurnSeq    uint64             `msgpack:"turn_seq"`
	LoadOrder  []string           `msgpack:"load_order"`
	Referenced []string           `msgpack:"referenced"`
	DeletedSeq uint64             `msgpack:"deleted_seq"`
}

type refRejection struct {
	Seq    uint64 `msgpack:"seq"`
	ID     string `msgpack:"id"`
	Type   string `msgpack:"type"`
	Kind   string `msgpack:"kind"`
	Reason string `msgpack:"reason"`
}

type refIntentWire struct {
	Enabled   *bool    `msgpack:"enabled"`
	WebSearch *bool    `msgpack:"web_search"`
	Preset    string   `msgpack:"preset"`
	Disabled  []string `msgpack:"disabled"`
	Picked    []string `msgpack:"picked"`
}

type refCheckpointWire struct {
	Loaded          []string           `msgpack:"loaded_deferred_tools"`
	ContractHash    string             `msgpack:"contract_hash"`
	RegistryVersion string             `msgpack:"registry_version"`
	Turn            uint64             `msgpack:"turn"`
	Seq             uint64             `msgpack:"seq"`
	Contract        []refContractEntry `msgpack:"contract"`
}

type refContractEntry struct {
	Name string `msgpack:"name"`
	Hash string `msgpack:"hash"`
}

func refMarshalState(s State) ([]byte, error) {
	w := refStateWire{
		V:       StateVersion,
		Session: s.Session,
		Intent: refIntentWire{
			Enabled:   s.Intent.Enabled,
			WebSearch: s.Intent.WebSearch,
			Preset:    s.Intent.Preset,
			Disabled:  s.Intent.Disabled,
			Picked:    s.Intent.Picked,
		},
		Loaded:  s.Loaded,
		Turn:    s.Turn,
		InTurn:  s.InTurn,
		LastSeq: s.LastSeq,
		Events:  s.Events,
		Skipped: s.Skipped,

		Rejected:   s.Rejected,
		TurnSeq:    s.TurnSeq,
		LoadOrder:  s.LoadOrder,
		Referenced: s.Referenced,
		DeletedSeq: s.DeletedSeq,
	}
	if s.Rejections != nil {
		w.Rejections = make([]refRejection, len(s.Rejections))
		for i, r := range s.Rejections {
			w.Rejections[i] = refRejection(r)
		}
	}
	if c := s.Checkpoint; c != nil {
		w.Checkpoint = &refCheckpointWire{
			Loaded:          c.Loaded,
			ContractHash:    c.ContractHash,
			RegistryVersion: c.RegistryVersion,
			Turn:            c.Turn,
			Seq:             c.Seq,
		}
		if c.Contract != nil {
			w.Checkpoint.Contract = make([]refContractEntry, len(c.Contract))
			for i, e := range c.Contract {
				w.Checkpoint.Contract[i] = refContractEntry(e)
			}
		}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(&w); err != nil {
		return nil, fmt.Errorf("marshal state of session %q: %w", s.Session, err)
	}
	return buf.Bytes(), nil
}

func refUnmarshalState(b []byte) (State, error) {
	if len(b) > MaxStateBytes {
		return State{}, fmt.Errorf("unmarshal state: %d bytes, at most %d allowed: %w", len(b), MaxStateBytes, ErrMalformedState)
	}
	var w refStateWire
	w.V = -1
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	if err := dec.Decode(&w); err != nil {
		return State{}, fmt.Errorf("unmarshal state: %v: %w", err, ErrMalformedState)
	}
	if r.Len() != 0 {
		return State{}, fmt.Errorf("unmarshal state: %d trailing bytes: %w", r.Len(), ErrMalformedState)
	}
	switch {
	case w.V == -1:
		return State{}, fmt.Errorf("unmarshal state: key \"v\" is missing: %w", ErrMalformedState)
	case w.V < MinStateVersion || w.V > StateVersion:
		return State{}, fmt.Errorf("unmarshal state: version %d, this engine reads %d to %d, rebuild from the log: %w", w.V, MinStateVersion, StateVersion, ErrStateVersion)
	}
	s := State{
		Session: w.Session,
		Intent: intent.Intent{
			Enabled:   w.Intent.Enabled,
			WebSearch: w.Intent.WebSearch,
			Preset:    w.Intent.Preset,
			Disabled:  w.Intent.Disabled,
			Picked:    w.Intent.Picked,
		},
		Loaded:  w.Loaded,
		Turn:    w.Turn,
		InTurn:  w.InTurn,
		LastSeq: w.LastSeq,
		Events:  w.Events,
		Skipped: w.Skipped,

		Rejected:   w.Rejected,
		TurnSeq:    w.TurnSeq,
		LoadOrder:  w.LoadOrder,
		Referenced: w.Referenced,
		DeletedSeq: w.DeletedSeq,
	}
	if w.Rejections != nil {
		s.Rejections = make([]Rejection, len(w.Rejections))
		for i, r := range w.Rejections {
			s.Rejections[i] = Rejection(r)
		}
	}
	if c := w.Checkpoint; c != nil {
		s.Checkpoint = &Checkpoint{Seq: c.Seq, Record: Record{
			Loaded:          c.Loaded,
			ContractHash:    c.ContractHash,
			RegistryVersion: c.RegistryVersion,
			Turn:            c.Turn,
		}}
		if c.Contract != nil {
			s.Checkpoint.Contract = make([]events.ContractEntry, len(c.Contract))
			for i, e := range c.Contract {
				s.Checkpoint.Contract[i] = events.ContractEntry(e)
			}
		}
	}
	return s, nil
}

// typicalState is a typical projection view: an intent with a few
// disabled names, a loaded set, a checkpoint with a 21-entry contract.
func typicalState() State {
	contract := make([]events.ContractEntry, 21)
	for i := range contract {
		contract[i] = events.ContractEntry{
			Name: fmt.Sprintf("tool_number_%02d", i),
			Hash: fmt.Sprintf("%064x", uint64(i)*0x9e3779b97f4a7c15),
		}
	}
	return State{
		Session: "sess-0123456789abcdef",
		Intent: intent.Intent{
			Enabled:  bp(true),
			Preset:   "ops",
			Disabled: []string{"bash", "send_message", "web_search"},
		},
		Loaded:  []string{"big_browser", "tool_number_03", "tool_number_07"},
		Turn:    42,
		InTurn:  true,
		LastSeq: 123456,
		Events:  321,
		Checkpoint: &Checkpoint{Seq: 123400, Record: Record{
			Loaded:          []string{"big_browser", "tool_number_03"},
			ContractHash:    fmt.Sprintf("%064x", uint64(77)),
			RegistryVersion: "2026-11-30.1",
			Turn:            41,
			Contract:        contract,
		}},
	}
}

func BenchmarkMarshalStateTypical(b *testing.B) {
	s := typicalState()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MarshalState(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalStateTypical(b *testing.B) {
	raw, err := MarshalState(typicalState())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalState(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRefMarshalStateTypical(b *testing.B) {
	s := typicalState()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := refMarshalState(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRefUnmarshalStateTypical(b *testing.B) {
	raw, err := refMarshalState(typicalState())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := refUnmarshalState(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func genStrings(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 3).Draw(t, label+"_kind") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(rapid.String(), 1, 40).Draw(t, label)
}

func genLongString(t *rapid.T, label string) string {
	switch rapid.IntRange(0, 4).Draw(t, label+"_len") {
	case 0:
		return ""
	case 1:
		return rapid.StringN(0, 40, -1).Draw(t, label)
	case 2:
		return rapid.StringN(30, 300, -1).Draw(t, label)
	case 3:
		return string(make([]byte, rapid.SampledFrom([]int{31, 32, 255, 256, 65535, 65536, 70000}).Draw(t, label+"_n")))
	}
	return rapid.String().Draw(t, label)
}

func genUint(t *rapid.T, label string) uint64 {
	switch rapid.IntRange(0, 2).Draw(t, label+"_kind") {
	case 0:
		return rapid.SampledFrom([]uint64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, 1<<64 - 1}).Draw(t, label)
	case 1:
		return rapid.Uint64Range(0, 1000).Draw(t, label)
	}
	return rapid.Uint64().Draw(t, label)
}

func genState(t *rapid.T) State {
	s := State{
		Session: genLongString(t, "session"),
		Intent: intent.Intent{
			Enabled:   genTri(t, "enabled"),
			WebSearch: genTri(t, "web_search"),
			Preset:    genLongString(t, "preset"),
			Disabled:  genStrings(t, "disabled"),
			Picked:    genStrings(t, "picked"),
		},
		Loaded:  genStrings(t, "loaded"),
		Turn:    genUint(t, "turn"),
		InTurn:  rapid.Bool().Draw(t, "in_turn"),
		LastSeq: genUint(t, "last_seq"),
		Events:  genUint(t, "events"),
		Skipped: genUint(t, "skipped"),

		Rejected:   genUint(t, "rejected"),
		TurnSeq:    genUint(t, "turn_seq"),
		LoadOrder:  genStrings(t, "load_order"),
		Referenced: genStrings(t, "referenced"),
		DeletedSeq: genUint(t, "deleted_seq"),
	}
	switch rapid.IntRange(0, 2).Draw(t, "rejections_kind") {
	case 1:
		s.Rejections = []Rejection{}
	case 2:
		n := rapid.IntRange(1, MaxRejections).Draw(t, "rejections_n")
		s.Rejections = make([]Rejection, n)
		for i := range s.Rejections {
			s.Rejections[i] = Rejection{Seq: genUint(t, "r_seq"), ID: genLongString(t, "r_id"), Type: genLongString(t, "r_type"),
				Kind: rapid.SampledFrom([]string{KindSkipped, KindRejected, ""}).Draw(t, "r_kind"), Reason: genLongString(t, "r_reason")}
		}
	}
	if rapid.Bool().Draw(t, "has_checkpoint") {
		c := &Checkpoint{Record: Record{
			Loaded:          genStrings(t, "cp_loaded"),
			ContractHash:    genLongString(t, "contract_hash"),
			RegistryVersion: genLongString(t, "registry_version"),
			Turn:            genUint(t, "cp_turn"),
		}, Seq: genUint(t, "cp_seq")}
		switch rapid.IntRange(0, 2).Draw(t, "contract_kind") {
		case 1:
			c.Contract = []events.ContractEntry{}
		case 2:
			n := rapid.IntRange(1, 40).Draw(t, "contract_n")
			c.Contract = make([]events.ContractEntry, n)
			for i := range c.Contract {
				c.Contract[i] = events.ContractEntry{Name: genLongString(t, "name"), Hash: genLongString(t, "hash")}
			}
		}
		s.Checkpoint = c
	}
	return s
}

// The hand-written encoder writes exactly the bytes of the reflection
// encoder, and both decoders read them back to s.
func TestMarshalStateMatchesReference(t *testing.T) {
	check := func(t tb, s State) {
		got, err := MarshalState(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := refMarshalState(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("bytes differ:\n got %x\nwant %x", got, want)
		}
		back, err := UnmarshalState(got)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back, s)
		}
	}
	check(t, State{})
	check(t, typicalState())
	rapid.Check(t, func(t *rapid.T) { check(t, genState(t)) })
}

// sameDecode fails unless UnmarshalState and the reference decoder agree on
// b: the same state, or errors of the same class. The reference decoder
// (vmihailenco/msgpack) allocates a struct slice's length before reading
// its elements, so a count larger than the bytes left would make it
// allocate gigabytes; such input is truncated msgpack, whose verdict is
// known (malformed) without running it (every input is checked, none
// skipped; the reference only runs on input whose counts fit its bytes).
func sameDecode(t tb, b []byte) {
	t.Helper()
	got, gerr := UnmarshalState(b)
	class := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, ErrStateVersion):
			return "version"
		case errors.Is(err, ErrMalformedState):
			return "malformed"
		}
		return "other: " + err.Error()
	}
	if len(b) <= MaxStateBytes && countsExceedBytes(b) {
		if class(gerr) != "malformed" {
			t.Fatalf("input %x is truncated msgpack (a length or count exceeds the bytes left): got %v, want a malformed error", b, gerr)
		}
		return
	}
	want, werr := refUnmarshalState(b)
	if class(gerr) != class(werr) {
		t.Fatalf("input %x: got error %v, reference %v", b, gerr, werr)
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("input %x:\n got %+v\nwant %+v", b, got, want)
	}
}

// countsExceedBytes walks the first msgpack value of b, in the order a
// decoder reads it, and reports whether it is cut short: a string, binary
// or extension length, or an array or map count (each element takes at
// least one byte), exceeds the bytes that follow, or the bytes end first.
// It stops (false) at a code msgpack never uses (0xc1): a decoder fails
// there before reading further. Iterative: it keeps only the number of
// values still to read.
func countsExceedBytes(b []byte) bool {
	off, need := 0, 1
	be := func(n int) (uint64, bool) { // a big-endian length of n bytes at off+1
		if off+1+n > len(b) {
			return 0, false
		}
		var v uint64
		for _, c := range b[off+1 : off+1+n] {
			v = v<<8 | uint64(c)
		}
		return v, true
	}
	for need > 0 {
		if off >= len(b) {
			return true
		}
		c := b[off]
		size, lenBytes, count := 1, 0, uint64(0) // header bytes, length-field bytes, nested values
		var payload uint64
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			count = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			count = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			payload = uint64(c & 0x1f)
		case c == 0xc1:
			return false
		case c == 0xc4 || c == 0xd9:
			lenBytes = 1
		case c == 0xc5 || c == 0xda:
			lenBytes = 2
		case c == 0xc6 || c == 0xdb:
			lenBytes = 4
		case c >= 0xc7 && c <= 0xc9:
			lenBytes, payload = 1<<(c-0xc7), 1 // ext: length, then a type byte
			if c == 0xc9 {
				lenBytes = 4
			}
		case c == 0xca, c == 0xce, c == 0xd2:
			payload = 4
		case c == 0xcb, c == 0xcf, c == 0xd3:
			payload = 8
		case c == 0xcc, c == 0xd0:
			payload = 1
		case c == 0xcd, c == 0xd1:
			payload = 2
		case c >= 0xd4 && c <= 0xd8:
			payload = 1 + 1<<(c-0xd4) // fixext: type byte and 1..16 bytes
		case c == 0xdc || c == 0xde:
			lenBytes = 2
		case c == 0xdd || c == 0xdf:
			lenBytes = 4
		}
		var n uint64
		if lenBytes > 0 {
			v, ok := be(lenBytes)
			if !ok {
				return true
			}
			n = v
			size += lenBytes
		}
		switch c {
		case 0xdc, 0xdd:
			count = n
		case 0xde, 0xdf:
			count = 2 * n
		case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb, 0xc7, 0xc8, 0xc9:
			payload += n
		}
		off += size
		left := uint64(len(b) - off)
		if payload > left {
			return true
		}
		off += int(payload)
		left -= payload
		// Every value still to read takes at least one byte.
		if uint64(need-1)+count > left {
			return true
		}
		need += int(count) - 1
	}
	return false
}

// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Keys the generator draws from: every key of the wire form, and others.
var genKey = rapid.SampledFrom([]string{
	"v", "session", "intent", "loaded", "turn", "in_turn", "last_seq", "events", "checkpoint", "skipped",
	"enabled", "web_search", "preset", "disabled", "picked",
	"loaded_deferred_tools", "contract_hash", "registry_version", "seq", "contract", "name", "hash",
	"rejected", "rejections", "id", "type", "kind", "reason", "turn_seq", "load_order", "referenced", "deleted_seq",
	"", "V", "extra", "x",
})

// genWire draws arbitrary msgpack bytes shaped like (and often unlike) a
// marshalled State: maps keyed by wire keys, positional arrays, nil, every
// integer and string form, repeated keys, unknown keys, wrong types.
func genWire(t *rapid.T, depth int) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	var gen func(depth int)
	gen = func(depth int) {
		kind := rapid.IntRange(0, 16).Draw(t, "kind")
		if depth <= 0 && kind >= 12 {
			kind = kind % 12
		}
		switch kind {
		case 0:
			_ = enc.EncodeNil()
		case 1:
			_ = enc.EncodeBool(rapid.Bool().Draw(t, "bool"))
		case 2:
			_ = enc.EncodeUint(genUint(t, "uint"))
		case 3:
			_ = enc.EncodeInt(rapid.Int64().Draw(t, "int"))
		case 4:
			n := rapid.Int64Range(-200, 200).Draw(t, "small")
			switch rapid.IntRange(0, 7).Draw(t, "intform") {
			case 0:
				_ = enc.EncodeInt8(int8(n))
			case 1:
				_ = enc.EncodeInt16(int16(n))
			case 2:
				_ = enc.EncodeInt32(int32(n))
			case 3:
				_ = enc.EncodeInt64(n)
			case 4:
				_ = enc.EncodeUint8(uint8(n))
			case 5:
				_ = enc.EncodeUint16(uint16(n))
			case 6:
				_ = enc.EncodeUint32(uint32(n))
			case 7:
				_ = enc.EncodeUint64(uint64(n))
			}
		case 5:
			_ = enc.EncodeFloat64(1.5)
		case 6, 7:
			_ = enc.EncodeString(genKey.Draw(t, "str"))
		case 8:
			_ = enc.EncodeString(genLongString(t, "longstr"))
		case 9:
			_ = enc.EncodeBytes([]byte(genKey.Draw(t, "bin")))
		case 10:
			_ = enc.EncodeBytes(nil)
		case 11:
			buf.Write(rapid.SampledFrom([][]byte{{0xd4, 1, 2}, {0xc7, 1, 5, 9}, {0xc1}, {0xd9, 0}, {0xc4, 0}, {0xdc, 0, 0}, {0xde, 0, 0}}).Draw(t, "odd"))
		case 12, 13:
			n := rapid.IntRange(0, 12).Draw(t, "arraylen")
			_ = enc.EncodeArrayLen(n)
			for range n {
				gen(depth - 1)
			}
		default:
			n := rapid.IntRange(0, 12).Draw(t, "maplen")
			_ = enc.EncodeMapLen(n)
			for range n {
				if rapid.IntRange(0, 9).Draw(t, "keykind") == 0 {
					gen(0)
				} else {
					_ = enc.EncodeString(genKey.Draw(t, "key"))
				}
				if rapid.IntRange(0, 4).Draw(t, "version") == 0 {
					_ = enc.EncodeUint(StateVersion)
				} else {
					gen(depth - 1)
				}
			}
		}
	}
	if rapid.Bool().Draw(t, "state_like") {
		// A map with "v": StateVersion and some fields, to get past the
		// version check.
		n := rapid.IntRange(0, 12).Draw(t, "topn")
		_ = enc.EncodeMapLen(n + 1)
		_ = enc.EncodeString("v")
		_ = enc.EncodeUint(StateVersion)
		for range n {
			_ = enc.EncodeString(genKey.Draw(t, "topkey"))
			gen(depth)
		}
	} else {
		gen(depth)
	}
	return buf.Bytes()
}

func TestUnmarshalStateMatchesReference(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0xc0}, {0x90}, {0x80}, {0x91, 0x01}, {0x9a}, {0xdc, 0, 10},
		[]byte("\x81\xa1v\xff"), []byte("\x81\xa1v\xc0"), []byte("\x81\xa1v\xd3\xff\xff\xff\xff\xff\xff\xff\xff"),
		[]byte("\x82\xa1v\x03\xa6loaded\xdd\xff\xff\xff\xff"),
		[]byte("\x82\xa1v\x03\xaacheckpoint\x90"),
		[]byte("\x83\xa1v\x03\xaacheckpoint\x81\xa8contract\x92\x80\xc0\xaacheckpoint\x81\xa8contract\x93\x82\xa4name\xa1a\xa4hash\xa1b\x92\xa1c\xa1d\x90"),
		[]byte("\x82\xa1v\x03\xaacheckpoint\x81\xa8contract\xdd\xff\xff\xff\xff"),
		// Repeated keys decode over the earlier value, element by element.
		[]byte("\x83\xa1v\x03\xaacheckpoint\x82\xa8contract\x92\x81\xa4name\xa1a\x81\xa4name\xa1c\xa8contract\x91\x81\xa4hash\xa1b\xaacheckpoint\x81\xa8contract\x92\x80\x80"),
		[]byte("\x83\xa1v\x03\xa6intent\x82\xa7enabled\xc3\xa6preset\xa1p\xa6intent\x81\xa8disabled\x91\xa1d"),
		[]byte("\x82\xa1v\x03\xa6loaded\x91\xc4\x03abc"),
		[]byte("\x83\xa1v\x03\xa6loaded\x91\xa1a\xa6loaded\xc0"),
		[]byte("\x82\xa1v\x01\xa6loaded\x91\xa1a"),
		[]byte("\x83\xa1v\x03\xaarejections\x92\x85\xa3seq\x01\xa2id\xa1i\xa4type\xa1t\xa4kind\xa1k\xa6reason\xa1r\xc0\xaarejections\x91\x95\x02\xa1j\xa1u\xa1l\xa1s"),
		[]byte("\x82\xa1v\x03\xaarejections\x91\x94\x01\xa1i\xa1t\xa1k"),
	} {
		sameDecode(t, b)
	}
	typical, _ := refMarshalState(typicalState())
	sameDecode(t, typical)
	// Bytes that look like a huge array32 header inside a string no
	// longer skip the differential check; a real one is truncated input.
	quoted := typicalState()
	quoted.Session = "s\xdd\xff\xff\xff\xff"
	qb, _ := refMarshalState(quoted)
	if countsExceedBytes(qb) {
		t.Fatal("a string holding 0xdd ff ff ff ff read as an array header")
	}
	sameDecode(t, qb)
	huge := []byte("\x82\xa1v\x03\xaarejections\xdd\xff\xff\xff\xff")
	if !countsExceedBytes(huge) {
		t.Fatal("an array32 header counting 4G elements in 5 bytes not seen as truncated")
	}
	sameDecode(t, huge)
	rapid.Check(t, func(t *rapid.T) { sameDecode(t, genWire(t, 4)) })
	// Mutations of real states.
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		if rapid.Bool().Draw(t, "typical") {
			b = bytes.Clone(typical)
		} else {
			b, _ = refMarshalState(genState(t))
		}
		for range rapid.IntRange(1, 4).Draw(t, "mutations") {
			if len(b) == 0 {
				break
			}
			i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				b[i] = rapid.Byte().Draw(t, "byte")
			case 1:
				b = append(b[:i:i], b[i+1:]...)
			case 2:
				b = append(b[:i:i], append([]byte{rapid.Byte().Draw(t, "byte")}, b[i:]...)...)
			case 3:
				b = b[:i]
			}
		}
		sameDecode(t, b)
	})
}

// Differential fuzzing against the reference decoder.
func FuzzUnmarshalStateMatchesReference(f *testing.F) {
	f.Add(mustMarshalF(f, State{}))
	f.Add(mustMarshalF(f, typicalState()))
	f.Add([]byte("\x83\xa1v\x03\xaacheckpoint\x81\xa8contract\x92\x80\xc0\xaacheckpoint\x81\xa8contract\x93\x82\xa4name\xa1a\xa4hash\xa1b\x92\xa1c\xa1d\x90"))
	f.Fuzz(func(t *testing.T, b []byte) { sameDecode(t, b) })
}
