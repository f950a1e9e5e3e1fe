package events

import (
	"github.com/toolintent/engine/internal/clip"

	"bytes"
	"fmt"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
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
	s   sticky // reused, so that the payload codecs' calls do not move it to the heap
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
	enc.s = sticky{e: w}
	s := &enc.s
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
	encodePayload(s, p)
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

// encodePayload writes the data map of p, a payload in value form.
func encodePayload(s *sticky, p Payload) {
	r := payloadByType[p.EventType()]
	if r == nil {
		s.do(fmt.Errorf("payload %T is not an events payload type: %w", p, ErrInvalidEvent))
		return
	}
	r.encode(s, p)
}

// Decode parses one event. It never panics. Unknown keys (in the envelope
// and in the payload) are ignored; events of an older schema version are
// upcast to SchemaVersion before the typed decode, so the returned
// envelope always has Version == SchemaVersion and a value (not pointer)
// payload. A version-2 event must name its channel and actor; version-1
// events, which had neither, decode with both "".
//
// On failure the error is a *DecodeError and the returned Envelope holds the
// header fields that could be read (Payload nil), for reporting.
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
		return fail(fmt.Errorf("type %q is not one of %v: %w", clip.String(string(env.Type), clip.Max), allTypes, ErrUnknownType))
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
	r := payloadByType[t]
	if r == nil {
		return nil, fmt.Errorf("type %q: %w", t, ErrUnknownType)
	}
	return r.decode(m)
}
