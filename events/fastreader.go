package events

// The msgpack primitives of the fast path of Decode (fastdecode.go):
// lengths, strings, integers and skipping, each refusing (ok == false)
// what it does not handle.

import (
	"math"
)

// fastReader reads msgpack from b at i. Every method returns ok == false
// (and leaves i unspecified) on input it does not handle.
type fastReader struct {
	b []byte
	i int
}

// mapLen reads a map header.
func (r *fastReader) mapLen() (int, bool) { return r.length(0x80, 0xde) }

// arrayLen reads an array header.
func (r *fastReader) arrayLen() (int, bool) { return r.length(0x90, 0xdc) }

// length reads a map or array header whose fixed forms are fix..fix+15
// and whose 16- and 32-bit forms are c16 and c16+1.
func (r *fastReader) length(fix, c16 byte) (int, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	switch {
	case c >= fix && c <= fix+0x0f:
		r.i++
		return int(c & 0x0f), true
	case c == c16:
		return r.len16()
	case c == c16+1:
		return r.len32()
	}
	return 0, false
}

func (r *fastReader) len8() (int, bool) {
	if len(r.b)-r.i < 2 {
		return 0, false
	}
	n := int(r.b[r.i+1])
	r.i += 2
	return n, true
}

func (r *fastReader) len16() (int, bool) {
	if len(r.b)-r.i < 3 {
		return 0, false
	}
	n := int(r.b[r.i+1])<<8 | int(r.b[r.i+2])
	r.i += 3
	return n, true
}

func (r *fastReader) len32() (int, bool) {
	if len(r.b)-r.i < 5 {
		return 0, false
	}
	n := int(r.b[r.i+1])<<24 | int(r.b[r.i+2])<<16 | int(r.b[r.i+3])<<8 | int(r.b[r.i+4])
	r.i += 5
	return n, true
}

// isNil consumes a nil and reports whether there was one.
func (r *fastReader) isNil() bool {
	if r.i < len(r.b) && r.b[r.i] == 0xc0 {
		r.i++
		return true
	}
	return false
}

// bytesN returns the next n bytes.
func (r *fastReader) bytesN(n int, ok bool) ([]byte, bool) {
	if !ok || n < 0 || n > len(r.b)-r.i {
		return nil, false
	}
	s := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	return s, true
}

// key reads a map key, which must be a msgpack str (not bin), as the generic
// parser requires.
func (r *fastReader) key() ([]byte, bool) {
	if r.i >= len(r.b) {
		return nil, false
	}
	c := r.b[r.i]
	switch {
	case c >= 0xa0 && c <= 0xbf:
		r.i++
		return r.bytesN(int(c&0x1f), true)
	case c == 0xd9:
		return r.bytesN(r.len8())
	case c == 0xda:
		return r.bytesN(r.len16())
	case c == 0xdb:
		return r.bytesN(r.len32())
	}
	return nil, false
}

// str reads a str or bin value (the generic parser reads both as strings).
func (r *fastReader) str() ([]byte, bool) {
	if r.i >= len(r.b) {
		return nil, false
	}
	switch r.b[r.i] {
	case 0xc4:
		return r.bytesN(r.len8())
	case 0xc5:
		return r.bytesN(r.len16())
	case 0xc6:
		return r.bytesN(r.len32())
	}
	return r.key()
}

// text reads a str or bin value into dst, as a copy of its own (a cached
// state that keeps one name keeps only that name, not the event); nil
// reads as "" when orNil, else it is refused.
func (r *fastReader) text(dst *string, orNil bool) bool {
	if orNil && r.isNil() {
		*dst = ""
		return true
	}
	b, ok := r.str()
	if !ok {
		return false
	}
	*dst = string(b)
	return true
}

// int reads an integer; big is true for a uint64 above MaxInt64, whose
// value is then in u.
func (r *fastReader) int() (v int64, u uint64, big, ok bool) {
	if r.i >= len(r.b) {
		return 0, 0, false, false
	}
	b := r.b[r.i:]
	c := b[0]
	switch {
	case c <= 0x7f:
		r.i++
		return int64(c), 0, false, true
	case c >= 0xe0:
		r.i++
		return int64(int8(c)), 0, false, true
	}
	need := 0
	switch c {
	case 0xcc, 0xd0:
		need = 2
	case 0xcd, 0xd1:
		need = 3
	case 0xce, 0xd2:
		need = 5
	case 0xcf, 0xd3:
		need = 9
	default:
		return 0, 0, false, false
	}
	if len(b) < need {
		return 0, 0, false, false
	}
	r.i += need
	switch c {
	case 0xcc:
		return int64(b[1]), 0, false, true
	case 0xd0:
		return int64(int8(b[1])), 0, false, true
	case 0xcd:
		return int64(be16(b[1:])), 0, false, true
	case 0xd1:
		return int64(int16(be16(b[1:]))), 0, false, true
	case 0xce:
		return int64(be32(b[1:])), 0, false, true
	case 0xd2:
		return int64(int32(be32(b[1:]))), 0, false, true
	case 0xcf:
		x := be64(b[1:])
		if x > math.MaxInt64 {
			return 0, x, true, true
		}
		return int64(x), 0, false, true
	default: // 0xd3
		return int64(be64(b[1:])), 0, false, true
	}
}

func be16(b []byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }
func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
func be64(b []byte) uint64 { return uint64(be32(b))<<32 | uint64(be32(b[4:])) }

// number reads an integer as int does, or nil as 0.
func (r *fastReader) number() (v int64, u uint64, big, ok bool) {
	if r.isNil() {
		return 0, 0, false, true
	}
	return r.int()
}

// uintOrNil reads a non-negative integer or nil (0) into dst, as
// uintField does.
func (r *fastReader) uintOrNil(dst *uint64) bool {
	v, u, big, ok := r.number()
	switch {
	case !ok || !big && v < 0:
		return false
	case big:
		*dst = u
	default:
		*dst = uint64(v)
	}
	return true
}

// intOrNil reads an integer up to MaxInt64 or nil (0) into dst, as
// intField does (it also reads floats, which the fast path declines).
func (r *fastReader) intOrNil(dst *int64) bool {
	v, _, big, ok := r.number()
	*dst = v
	return ok && !big
}

// skipScalar skips nil, a bool, an integer, a float or a string.
func (r *fastReader) skipScalar() bool {
	if r.i >= len(r.b) {
		return false
	}
	c := r.b[r.i]
	switch {
	case c == 0xc0 || c == 0xc2 || c == 0xc3 || c <= 0x7f || c >= 0xe0:
		r.i++
		return true
	case c == 0xca:
		return r.skipN(5)
	case c == 0xcb:
		return r.skipN(9)
	case c >= 0xcc && c <= 0xcf || c >= 0xd0 && c <= 0xd3:
		_, _, _, ok := r.int()
		return ok
	}
	_, ok := r.str()
	return ok
}

func (r *fastReader) skipN(n int) bool {
	if len(r.b)-r.i < n {
		return false
	}
	r.i += n
	return true
}

// skipUnknown skips the value of an unknown key: a scalar or an array of
// scalars. Maps (whose keys would need duplicate checks), nested arrays and
// extension values are not handled.
func (r *fastReader) skipUnknown() bool {
	if isArray, ok := r.skipArray(r.skipScalar); isArray {
		return ok
	}
	return r.skipScalar()
}

// skipArray skips an array of values each skipped by each; isArray is
// false, and nothing is consumed, when the next value is not an array.
func (r *fastReader) skipArray(each func() bool) (isArray, ok bool) {
	n, isArray := r.arrayLen()
	if !isArray {
		return false, false
	}
	if n > len(r.b)-r.i {
		return true, false
	}
	for range n {
		if !each() {
			return true, false
		}
	}
	return true, true
}

// skipDataMap skips a data map (for a type not read yet): string keys and
// values that are scalars, arrays of scalars, or arrays of maps of scalars
// (CheckpointRecorded.contract). Key rules are checked when the map is
// decoded for real, after the envelope.
func (r *fastReader) skipDataMap() bool {
	n, ok := r.mapLen()
	if !ok || n > len(r.b)-r.i {
		return false
	}
	for range n {
		if _, ok := r.key(); !ok {
			return false
		}
		if isArray, ok := r.skipArray(r.skipScalarMap); isArray {
			if !ok {
				return false
			}
			continue
		}
		if !r.skipScalar() {
			return false
		}
	}
	return true
}

// skipScalarMap skips a scalar or a map of string keys to scalars.
func (r *fastReader) skipScalarMap() bool {
	n, ok := r.mapLen()
	if !ok {
		return r.skipScalar()
	}
	if n > len(r.b)-r.i {
		return false
	}
	for range n {
		if _, ok := r.key(); !ok {
			return false
		}
		if !r.skipScalar() {
			return false
		}
	}
	return true
}
