package events

// The generic, bounded msgpack parser behind Decode: one msgpack map with
// string keys read into generic values, lengths checked before allocation.

import (
	"github.com/toolintent/engine/internal/clip"

	"bytes"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

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

// knownKeys are returned without allocating when a map key matches: the
// envelope's keys, the keys version 1 renamed, and (added by the payload
// table) every payload key.
var knownKeys = map[string]string{}

func init() {
	for _, k := range []string{keyID, keySession, keyChannel, keyActor, keyTime, keyVersion, keyType, keyData,
		"tools_enabled", "toolset"} {
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
		return p.scalar(p.d.DecodeBool())
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64 ||
		c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32:
		return p.scalar(p.d.DecodeInt64())
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
		return p.scalar(p.d.DecodeFloat64())
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		return p.str()
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return p.array(depth)
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return p.object(depth)
	case msgpcode.IsExt(c):
		return p.ext()
	}
	return nil, fmt.Errorf("byte 0x%02x is not a msgpack type: %w", c, ErrMalformed)
}

// scalar is a decoded scalar v, or err as a malformed-input error.
func (p *parser) scalar(v any, err error) (any, error) {
	if err != nil {
		return nil, p.malformed(err)
	}
	return v, nil
}

// array reads an array's elements, one level deeper.
func (p *parser) array(depth int) (any, error) {
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
}

// object reads a map of string keys, each once, one level deeper.
func (p *parser) object(depth int) (any, error) {
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
			return nil, fmt.Errorf("duplicate map key %q: %w", clip.String(k, clip.Max), ErrMalformed)
		}
		if m[k], err = p.value(depth + 1); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ext skips an extension value, reporting it as extValue.
func (p *parser) ext() (any, error) {
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
