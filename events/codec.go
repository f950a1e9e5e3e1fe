package events

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Wire keys of the envelope.
const (
	keyID      = "id"
	keySession = "session"
	keyChannel = "channel"
	keyActor   = "actor"
	keyTime    = "time_ms"
	keyVersion = "v"
	keyType    = "type"
	keyData    = "data"
)

// maxDepth bounds the nesting of maps and arrays Decode accepts.
const maxDepth = 16

var encoders = sync.Pool{New: func() any {
	enc := &encoder{}
	enc.e = msgpack.NewEncoder(&enc.buf)
	return enc
}}

type encoder struct {
	buf bytes.Buffer
	e   *msgpack.Encoder
}

// Encode validates e (see Envelope.Validate) and returns its msgpack bytes:
// one map with the string keys id, session, channel, actor, time_ms, v, type
// and data, in that order, integers in their shortest form, every payload
// field present (nil for unset tri-states and unset lists). The output is a
// pure function of e. Errors match ErrInvalidEvent, ErrInvalidSession,
// ErrInvalidName or ErrTooLarge.
func Encode(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	p, _ := deref(e.Payload)
	enc := encoders.Get().(*encoder)
	defer encoders.Put(enc)
	enc.buf.Reset()
	w := enc.e
	// bytes.Buffer writes never fail, so encoder errors cannot occur; they
	// are still checked once at the end via the sticky helper.
	s := sticky{e: w}
	s.mapLen(8)
	s.str(keyID)
	s.str(e.ID)
	s.str(keySession)
	s.str(e.Session)
	s.str(keyChannel)
	s.str(e.Channel)
	s.str(keyActor)
	s.str(e.Actor)
	s.str(keyTime)
	s.int(e.TimeMs)
	s.str(keyVersion)
	s.int(SchemaVersion)
	s.str(keyType)
	s.str(string(p.EventType()))
	s.str(keyData)
	encodePayload(&s, p)
	if s.err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID, s.err)
	}
	if enc.buf.Len() > MaxEventBytes {
		return nil, fmt.Errorf("encode event %s: %d bytes, at most %d allowed, shorten its lists: %w", e.ID, enc.buf.Len(), MaxEventBytes, ErrTooLarge)
	}
	out := make([]byte, enc.buf.Len())
	copy(out, enc.buf.Bytes())
	return out, nil
}

// sticky wraps an encoder and remembers the first error.
type sticky struct {
	e   *msgpack.Encoder
	err error
}

func (s *sticky) do(err error) {
	if s.err == nil {
		s.err = err
	}
}
func (s *sticky) mapLen(n int)  { s.do(s.e.EncodeMapLen(n)) }
func (s *sticky) str(v string)  { s.do(s.e.EncodeString(v)) }
func (s *sticky) int(v int64)   { s.do(s.e.EncodeInt(v)) }
func (s *sticky) uint(v uint64) { s.do(s.e.EncodeUint(v)) }
func (s *sticky) boolPtr(b *bool) {
	if b == nil {
		s.do(s.e.EncodeNil())
		return
	}
	s.do(s.e.EncodeBool(*b))
}
func (s *sticky) strs(v []string) {
	if v == nil {
		s.do(s.e.EncodeNil())
		return
	}
	s.do(s.e.EncodeArrayLen(len(v)))
	for _, x := range v {
		s.str(x)
	}
}

func encodePayload(s *sticky, p Payload) {
	switch v := p.(type) {
	case ToolsToggled:
		s.mapLen(1)
		s.str("enabled")
		s.boolPtr(v.Enabled)
	case WebSearchSet:
		s.mapLen(1)
		s.str("enabled")
		s.boolPtr(v.Enabled)
	case PresetChosen:
		s.mapLen(1)
		s.str("preset")
		s.str(v.Preset)
	case ToolDisabled:
		s.mapLen(1)
		s.str("name")
		s.str(v.Name)
	case ToolEnabled:
		s.mapLen(1)
		s.str("name")
		s.str(v.Name)
	case ToolsPicked:
		s.mapLen(1)
		s.str("names")
		s.strs(v.Names)
	case DeferredLoaded:
		s.mapLen(2)
		s.str("names")
		s.strs(v.Names)
		s.str("turn")
		s.uint(v.Turn)
	case TurnStarted:
		encodeTurnStarted(s, v)
	case TurnEnded:
		s.mapLen(1)
		s.str("turn")
		s.uint(v.Turn)
	case CheckpointRecorded:
		s.mapLen(5)
		s.str("loaded_deferred_tools")
		s.strs(v.Loaded)
		s.str("contract_hash")
		s.str(v.ContractHash)
		s.str("registry_version")
		s.str(v.RegistryVersion)
		s.str("turn")
		s.uint(v.Turn)
		s.str("contract")
		if v.Contract == nil {
			s.do(s.e.EncodeNil())
			return
		}
		s.do(s.e.EncodeArrayLen(len(v.Contract)))
		for _, c := range v.Contract {
			s.mapLen(2)
			s.str("name")
			s.str(c.Name)
			s.str("hash")
			s.str(c.Hash)
		}
	default:
		s.do(fmt.Errorf("payload %T is not an events payload type: %w", p, ErrInvalidEvent))
	}
}

// Decode parses one event. It never panics. Unknown keys (in the envelope
// and in the payload) are ignored; events of an older schema version are
// upcast to SchemaVersion before the typed decode (R3), so the returned
// envelope always has Version == SchemaVersion and a value (not pointer)
// payload. A version-2 event must name its channel and actor; version-1
// events, which had neither, decode with both "".
//
// On failure the error is a *DecodeError and the returned Envelope holds the
// header fields that could be read (Payload nil), for reporting (R26).
func Decode(b []byte) (Envelope, error) {
	if env, ok := decodeFast(b); ok {
		return env, nil
	}
	return decodeGeneric(b)
}

// decodeGeneric is Decode through the generic map (decode); the fast path
// (decodeFast) returns the same envelope for the inputs it accepts.
func decodeGeneric(b []byte) (Envelope, error) {
	env, err := decode(b)
	if err != nil {
		env.Payload = nil
		return env, &DecodeError{ID: env.ID, Session: env.Session, Type: env.Type, Version: env.Version, Err: err}
	}
	return env, nil
}

// decode does the work of Decode; on error the returned header fields are
// what could be read.
func decode(b []byte) (env Envelope, _ error) {
	wireVersion := 0 // reported on failure, even after upcasting
	fail := func(err error) (Envelope, error) {
		env.Version = wireVersion
		return env, err
	}
	if len(b) > MaxEventBytes {
		return fail(fmt.Errorf("%d bytes, at most %d allowed: %w: %w", len(b), MaxEventBytes, ErrTooLarge, ErrMalformed))
	}
	top, err := parse(b)
	if err != nil {
		return fail(err)
	}
	// Header fields, read leniently first so errors can name them.
	env.ID, _ = top[keyID].(string)
	env.Session, _ = top[keySession].(string)
	if t, ok := top[keyType].(string); ok {
		env.Type = Type(t)
	}
	v, err := intField(top, keyVersion, true)
	if err != nil {
		return fail(err)
	}
	wireVersion = clampInt(v)
	if v > SchemaVersion {
		return fail(fmt.Errorf("version %d, this engine reads up to %d, upgrade it: %w", v, SchemaVersion, ErrFutureVersion))
	}
	if v < 1 {
		return fail(fmt.Errorf("version %d, want 1 to %d: %w", v, SchemaVersion, ErrMalformed))
	}
	env.Version = int(v)
	for _, k := range [...]string{keyID, keySession, keyType} {
		if _, err := strField(top, k, true); err != nil {
			return fail(err)
		}
	}
	if env.Channel, err = strField(top, keyChannel, false); err != nil {
		return fail(err)
	}
	if env.Actor, err = strField(top, keyActor, false); err != nil {
		return fail(err)
	}
	if env.TimeMs, err = intField(top, keyTime, true); err != nil {
		return fail(err)
	}
	if !env.Type.Known() {
		return fail(fmt.Errorf("type %q is not one of %v: %w", clip(string(env.Type)), allTypes, ErrUnknownType))
	}
	if err := upcast(top, env.Type, env.Version); err != nil {
		return fail(err)
	}
	env.Version = SchemaVersion
	data, err := dataMap(top)
	if err != nil {
		return fail(err)
	}
	p, err := decodePayload(env.Type, data)
	if err != nil {
		return fail(fmt.Errorf("data: %w", err))
	}
	env.Payload = p
	if err := env.validate(wireVersion >= 2); err != nil {
		return fail(fmt.Errorf("%w: %w", err, ErrMalformed))
	}
	return env, nil
}

func clampInt(v int64) int {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < math.MinInt32 {
		return math.MinInt32
	}
	return int(v)
}

func dataMap(top map[string]any) (map[string]any, error) {
	raw, ok := top[keyData]
	if !ok || raw == nil {
		return map[string]any{}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want a map: %w", keyData, kind(raw), ErrMalformed)
	}
	return m, nil
}

func decodePayload(t Type, m map[string]any) (Payload, error) {
	var err error
	switch t {
	case TypeToolsToggled:
		var p ToolsToggled
		p.Enabled, err = boolPtrField(m, "enabled")
		return p, err
	case TypeWebSearchSet:
		var p WebSearchSet
		p.Enabled, err = boolPtrField(m, "enabled")
		return p, err
	case TypePresetChosen:
		var p PresetChosen
		p.Preset, err = strField(m, "preset", false)
		return p, err
	case TypeToolDisabled:
		var p ToolDisabled
		p.Name, err = strField(m, "name", true)
		return p, err
	case TypeToolEnabled:
		var p ToolEnabled
		p.Name, err = strField(m, "name", true)
		return p, err
	case TypeToolsPicked:
		var p ToolsPicked
		p.Names, err = strsField(m, "names", MaxListLen)
		return p, err
	case TypeDeferredLoaded:
		var p DeferredLoaded
		if p.Names, err = strsField(m, "names", MaxListLen); err != nil {
			return nil, err
		}
		p.Turn, err = uintField(m, "turn")
		return p, err
	case TypeTurnStarted:
		return decodeTurnStarted(m)
	case TypeTurnEnded:
		var p TurnEnded
		p.Turn, err = uintField(m, "turn")
		return p, err
	case TypeCheckpointRecorded:
		var p CheckpointRecorded
		if p.Loaded, err = strsField(m, "loaded_deferred_tools", MaxListLen); err != nil {
			return nil, err
		}
		if p.ContractHash, err = strField(m, "contract_hash", false); err != nil {
			return nil, err
		}
		if p.RegistryVersion, err = strField(m, "registry_version", false); err != nil {
			return nil, err
		}
		if p.Turn, err = uintField(m, "turn"); err != nil {
			return nil, err
		}
		p.Contract, err = contractField(m, "contract")
		return p, err
	}
	return nil, fmt.Errorf("type %q: %w", t, ErrUnknownType)
}

// ---- typed field access on the generic map ----

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "a bool"
	case int64, uint64:
		return "an integer"
	case float64:
		return "a float"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	}
	return "an extension value"
}

func strField(m map[string]any, key string, required bool) (string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		if required {
			return "", fmt.Errorf("key %q is missing: %w", key, ErrMalformed)
		}
		return "", nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("key %q holds %s, want a string: %w", key, kind(raw), ErrMalformed)
	}
	return s, nil
}

func boolPtrField(m map[string]any, key string) (*bool, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want a bool or nil: %w", key, kind(raw), ErrMalformed)
	}
	return &b, nil
}

// intField reads an integer; integral floats are accepted for writers that
// only have doubles.
func intField(m map[string]any, key string, required bool) (int64, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		if required {
			return 0, fmt.Errorf("key %q is missing: %w", key, ErrMalformed)
		}
		return 0, nil
	}
	switch v := raw.(type) {
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("key %q holds %d, out of int64 range: %w", key, v, ErrMalformed)
		}
		return int64(v), nil
	case float64:
		if v == math.Trunc(v) && v >= -(1<<63) && v < 1<<63 {
			return int64(v), nil
		}
		return 0, fmt.Errorf("key %q holds %v, want an integer: %w", key, v, ErrMalformed)
	}
	return 0, fmt.Errorf("key %q holds %s, want an integer: %w", key, kind(raw), ErrMalformed)
}

func uintField(m map[string]any, key string) (uint64, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return 0, nil
	}
	switch v := raw.(type) {
	case uint64:
		return v, nil
	case int64:
		if v < 0 {
			return 0, fmt.Errorf("key %q holds %d, want a non-negative integer: %w", key, v, ErrMalformed)
		}
		return uint64(v), nil
	case float64:
		if v == math.Trunc(v) && v >= 0 && v < 1<<64 {
			return uint64(v), nil
		}
		return 0, fmt.Errorf("key %q holds %v, want a non-negative integer: %w", key, v, ErrMalformed)
	}
	return 0, fmt.Errorf("key %q holds %s, want a non-negative integer: %w", key, kind(raw), ErrMalformed)
}

// strsField reads a list of strings; nil/absent stays nil, an empty array
// is an empty non-nil slice.
func strsField(m map[string]any, key string, max int) ([]string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	arr, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want an array of strings: %w", key, kind(raw), ErrMalformed)
	}
	if len(arr) > max {
		return nil, fmt.Errorf("key %q has %d entries, at most %d allowed: %w", key, len(arr), max, ErrMalformed)
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("key %q entry %d holds %s, want a string: %w", key, i, kind(x), ErrMalformed)
		}
		out[i] = s
	}
	return out, nil
}

func contractField(m map[string]any, key string) ([]ContractEntry, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	arr, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want an array of maps: %w", key, kind(raw), ErrMalformed)
	}
	if len(arr) > MaxContractLen {
		return nil, fmt.Errorf("key %q has %d entries, at most %d allowed: %w", key, len(arr), MaxContractLen, ErrMalformed)
	}
	out := make([]ContractEntry, len(arr))
	for i, x := range arr {
		em, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %q entry %d holds %s, want a map: %w", key, i, kind(x), ErrMalformed)
		}
		var err error
		if out[i].Name, err = strField(em, "name", true); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		if out[i].Hash, err = strField(em, "hash", false); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
	}
	return out, nil
}

// ---- generic, bounded msgpack parsing ----

// extValue stands for an extension value; it is skipped, not interpreted.
type extValue struct{}

// parse reads b as exactly one msgpack map with string keys into generic
// values: nil, bool, int64, uint64 (above MaxInt64 only), float64, string
// (also for bin), []any, map[string]any, extValue. Lengths are checked
// against the remaining input before anything is allocated.
func parse(b []byte) (map[string]any, error) {
	p := parsers.Get().(*parser)
	defer parsers.Put(p)
	p.b = b
	p.r.Reset(b)
	p.d.Reset(&p.r)
	defer func() { p.b = nil; p.r.Reset(nil) }()
	c, err := p.d.PeekCode()
	if err != nil {
		return nil, fmt.Errorf("empty input: %w", ErrMalformed)
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return nil, fmt.Errorf("envelope starts with byte 0x%02x, want a msgpack map: %w", c, ErrMalformed)
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes after the envelope: %w", p.r.Len(), ErrMalformed)
	}
	return v.(map[string]any), nil
}

type parser struct {
	b []byte
	r bytes.Reader
	d *msgpack.Decoder
}

var parsers = sync.Pool{New: func() any {
	p := &parser{}
	p.d = msgpack.NewDecoder(&p.r)
	return p
}}

// knownKeys are returned without allocating when a map key matches.
var knownKeys = map[string]string{}

func init() {
	for _, k := range []string{keyID, keySession, keyChannel, keyActor, keyTime, keyVersion, keyType, keyData,
		"enabled", "preset", "name", "names", "turn", "loaded_deferred_tools", "contract_hash",
		"registry_version", "contract", "hash", "tools_enabled", "toolset"} {
		knownKeys[k] = k
	}
}

func (p *parser) malformed(err error) error {
	return fmt.Errorf("msgpack at offset %d: %v: %w", int(p.r.Size())-p.r.Len(), err, ErrMalformed)
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d: %w", maxDepth, ErrMalformed)
	}
	c, err := p.d.PeekCode()
	if err != nil {
		return nil, p.malformed(err)
	}
	switch {
	case c == msgpcode.Nil:
		_ = p.d.DecodeNil()
		return nil, nil
	case c == msgpcode.True || c == msgpcode.False:
		v, err := p.d.DecodeBool()
		if err != nil {
			return nil, p.malformed(err)
		}
		return v, nil
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64 ||
		c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32:
		v, err := p.d.DecodeInt64()
		if err != nil {
			return nil, p.malformed(err)
		}
		return v, nil
	case c == msgpcode.Uint64:
		v, err := p.d.DecodeUint64()
		if err != nil {
			return nil, p.malformed(err)
		}
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return v, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		v, err := p.d.DecodeFloat64()
		if err != nil {
			return nil, p.malformed(err)
		}
		return v, nil
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		return p.str()
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := p.d.DecodeArrayLen()
		if err != nil {
			return nil, p.malformed(err)
		}
		if n > p.r.Len() { // every element takes at least one byte
			return nil, fmt.Errorf("array of %d elements in %d remaining bytes: %w", n, p.r.Len(), ErrMalformed)
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = p.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return arr, nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := p.d.DecodeMapLen()
		if err != nil {
			return nil, p.malformed(err)
		}
		if n > p.r.Len()/2 { // every entry takes at least two bytes
			return nil, fmt.Errorf("map of %d entries in %d remaining bytes: %w", n, p.r.Len(), ErrMalformed)
		}
		m := make(map[string]any, n)
		for range n {
			kc, err := p.d.PeekCode()
			if err != nil {
				return nil, p.malformed(err)
			}
			if !msgpcode.IsString(kc) {
				return nil, fmt.Errorf("map key starts with byte 0x%02x, keys must be strings: %w", kc, ErrMalformed)
			}
			k, err := p.key()
			if err != nil {
				return nil, err
			}
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("duplicate map key %q: %w", clip(k), ErrMalformed)
			}
			if m[k], err = p.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	case msgpcode.IsExt(c):
		// Read the header and check the claimed length against the bytes
		// left before skipping: the library's Skip allocates a buffer of
		// the claimed length first (13 input bytes made it allocate 1 MB).
		_, n, err := p.d.DecodeExtHeader()
		if err != nil {
			return nil, p.malformed(err)
		}
		if n < 0 || n > p.r.Len() {
			return nil, fmt.Errorf("extension of %d bytes in %d remaining bytes: %w", n, p.r.Len(), ErrMalformed)
		}
		if _, err := p.r.Seek(int64(n), io.SeekCurrent); err != nil {
			return nil, p.malformed(err)
		}
		return extValue{}, nil
	}
	return nil, fmt.Errorf("byte 0x%02x is not a msgpack type: %w", c, ErrMalformed)
}

func (p *parser) str() (string, error) {
	b, err := p.raw()
	return string(b), err
}

// key reads a map key, reusing the constant for known keys.
func (p *parser) key() (string, error) {
	b, err := p.raw()
	if err != nil {
		return "", err
	}
	if k, ok := knownKeys[string(b)]; ok {
		return k, nil
	}
	return string(b), nil
}

// raw reads a str or bin value and returns its bytes, aliasing the input.
func (p *parser) raw() ([]byte, error) {
	n, err := p.d.DecodeBytesLen() // accepts str and bin headers
	if err != nil {
		return nil, p.malformed(err)
	}
	if n <= 0 {
		return nil, nil
	}
	if n > p.r.Len() {
		return nil, fmt.Errorf("string of %d bytes in %d remaining bytes: %w", n, p.r.Len(), ErrMalformed)
	}
	// The decoder reads the bytes.Reader directly (no buffering), so the
	// bytes can be cut from the input and the reader advanced.
	off := int(p.r.Size()) - p.r.Len()
	if _, err := p.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, p.malformed(err)
	}
	return p.b[off : off+n], nil
}
