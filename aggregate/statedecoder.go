package aggregate

// The msgpack primitives of UnmarshalState: stateDecoder reads lengths,
// integers, strings and structures straight from the bytes, with the
// semantics of msgpack's reflection decoder.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// stateDecoder reads a marshalled State straight from its bytes. It mirrors
// the semantics of msgpack's reflection decoder for the wire structs: maps
// or positional arrays for structs, nil as the zero value, string or bin for
// strings, any integer form for integers, repeated keys decoding over the
// earlier value, unknown keys skipped with msgpack's own Skip.
type stateDecoder struct {
	b   []byte
	s   string // copy of b: decoded strings are its substrings
	off int
}

var (
	errTruncated   = errors.New("msgpack: unexpected end of input")
	errArrayStruct = errors.New("msgpack: number of fields in array-encoded struct has changed")
)

func (d *stateDecoder) left() int { return len(d.b) - d.off }

func (d *stateDecoder) code() (byte, error) {
	if d.off >= len(d.b) {
		return 0, errTruncated
	}
	c := d.b[d.off]
	d.off++
	return c, nil
}

// peekNil consumes the next code and reports true if it is nil; otherwise
// it consumes nothing.
func (d *stateDecoder) peekNil() bool {
	if d.off < len(d.b) && d.b[d.off] == msgpcode.Nil {
		d.off++
		return true
	}
	return false
}

func (d *stateDecoder) n(k int) ([]byte, error) {
	if k > d.left() {
		d.off = len(d.b)
		return nil, errTruncated
	}
	p := d.b[d.off : d.off+k]
	d.off += k
	return p, nil
}

func (d *stateDecoder) u8() (uint64, error) {
	p, err := d.n(1)
	if err != nil {
		return 0, err
	}
	return uint64(p[0]), nil
}

func (d *stateDecoder) u16() (uint64, error) {
	p, err := d.n(2)
	if err != nil {
		return 0, err
	}
	return uint64(binary.BigEndian.Uint16(p)), nil
}

func (d *stateDecoder) u32() (uint64, error) {
	p, err := d.n(4)
	if err != nil {
		return 0, err
	}
	return uint64(binary.BigEndian.Uint32(p)), nil
}

func (d *stateDecoder) u64() (uint64, error) {
	p, err := d.n(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(p), nil
}

// integer decodes like msgpack's DecodeInt64 / DecodeUint64 (the same bits:
// signed forms are sign-extended).
func (d *stateDecoder) integer(what string) (uint64, error) {
	if d.off < len(d.b) && d.b[d.off] <= msgpcode.PosFixedNumHigh {
		d.off++
		return uint64(d.b[d.off-1]), nil
	}
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Nil {
		return 0, nil
	}
	if msgpcode.IsFixedNum(c) {
		return uint64(int8(c)), nil
	}
	switch c {
	case msgpcode.Uint8:
		return d.u8()
	case msgpcode.Int8:
		n, err := d.u8()
		return uint64(int8(n)), err
	case msgpcode.Uint16:
		return d.u16()
	case msgpcode.Int16:
		n, err := d.u16()
		return uint64(int16(n)), err
	case msgpcode.Uint32:
		return d.u32()
	case msgpcode.Int32:
		n, err := d.u32()
		return uint64(int32(n)), err
	case msgpcode.Uint64, msgpcode.Int64:
		return d.u64()
	}
	return 0, fmt.Errorf("msgpack: invalid code=%x decoding %s", c, what)
}

func (d *stateDecoder) uint(p *uint64) error {
	n, err := d.integer("uint64")
	if err != nil {
		return err
	}
	*p = n
	return nil
}

func (d *stateDecoder) bool(p *bool) error {
	c, err := d.code()
	if err != nil {
		return err
	}
	switch c {
	case msgpcode.Nil, msgpcode.False:
		*p = false
	case msgpcode.True:
		*p = true
	default:
		return fmt.Errorf("msgpack: invalid code=%x decoding bool", c)
	}
	return nil
}

func (d *stateDecoder) tri(p **bool) error {
	if d.peekNil() {
		*p = nil
		return nil
	}
	if *p == nil {
		*p = new(bool)
	}
	return d.bool(*p)
}

func (d *stateDecoder) bytesLen(c byte) (int, error) {
	if c == msgpcode.Nil {
		return -1, nil
	}
	if msgpcode.IsFixedString(c) {
		return int(c & msgpcode.FixedStrMask), nil
	}
	var n uint64
	var err error
	switch c {
	case msgpcode.Str8, msgpcode.Bin8:
		n, err = d.u8()
	case msgpcode.Str16, msgpcode.Bin16:
		n, err = d.u16()
	case msgpcode.Str32, msgpcode.Bin32:
		n, err = d.u32()
	default:
		return 0, fmt.Errorf("msgpack: invalid code=%x decoding string/bytes length", c)
	}
	return int(n), err
}

// raw reads a string or bin (nil reads as empty) and returns its offset
// and length in d.b.
func (d *stateDecoder) raw() (int, int, error) {
	// Fast path: a complete fixstr or str8.
	if i := d.off; i < len(d.b) {
		c := d.b[i]
		at, n := -1, 0
		if c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh {
			at, n = i+1, int(c&msgpcode.FixedStrMask)
		} else if c == msgpcode.Str8 && i+1 < len(d.b) {
			at, n = i+2, int(d.b[i+1])
		}
		if at >= 0 && n <= len(d.b)-at {
			d.off = at + n
			return at, n, nil
		}
	}
	c, err := d.code()
	if err != nil {
		return 0, 0, err
	}
	n, err := d.bytesLen(c)
	if err != nil || n <= 0 {
		return 0, 0, err
	}
	at := d.off
	if _, err := d.n(n); err != nil {
		return 0, 0, err
	}
	return at, n, nil
}

// key reads a map key without allocating; it is valid until d.b changes.
func (d *stateDecoder) key() (string, error) {
	at, n, err := d.raw()
	if err != nil || n == 0 {
		return "", err
	}
	return unsafeString(d.b[at : at+n]), nil
}

func (d *stateDecoder) string(p *string) error {
	at, n, err := d.raw()
	if err != nil {
		return err
	}
	*p = d.s[at : at+n]
	return nil
}

// arrayLen returns the length of an array, -1 for nil.
func (d *stateDecoder) arrayLen(c byte) (int, error) {
	return d.length(c, msgpcode.FixedArrayLow, msgpcode.FixedArrayHigh, msgpcode.Array16, 1, "msgpack: invalid code=%x decoding array length")
}

// length reads the length of an array or a map whose fixed forms are
// fixLow..fixHigh and whose 16- and 32-bit forms are c16 and c16+1; -1
// for nil. Every element takes at least per bytes, so a longer claim is
// truncated input. For any other code it consumes nothing more and returns
// an error formatted with bad.
func (d *stateDecoder) length(c, fixLow, fixHigh, c16 byte, per int, bad string) (int, error) {
	if c == msgpcode.Nil {
		return -1, nil
	}
	if c >= fixLow && c <= fixHigh {
		return int(c - fixLow), nil
	}
	var n uint64
	var err error
	switch c {
	case c16:
		n, err = d.u16()
	case c16 + 1:
		n, err = d.u32()
	default:
		return 0, fmt.Errorf(bad, c)
	}
	if err == nil && int(n) > d.left()/per {
		return 0, errTruncated
	}
	return int(n), err
}

func (d *stateDecoder) array() (int, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	return d.arrayLen(c)
}

// mapLen returns the length of a map, -1 for nil; for any other code it
// consumes nothing more and returns an error.
func (d *stateDecoder) mapLen(c byte) (int, error) {
	return d.length(c, msgpcode.FixedMapLow, msgpcode.FixedMapHigh, msgpcode.Map16, 2, "msgpack: unexpected code=%x decoding map length")
}

// strings decodes like msgpack's []string decoder: nil leaves *p as it is.
func (d *stateDecoder) strings(p *[]string) error {
	n, err := d.array()
	if err != nil || n == -1 {
		return err
	}
	ss := *p
	if ss == nil || cap(ss) < n {
		ss = make([]string, n)
	} else {
		ss = ss[:n]
	}
	for i := range ss {
		if err := d.string(&ss[i]); err != nil {
			return err
		}
	}
	*p = ss
	return nil
}

// skip skips one value with msgpack's own Skip.
func (d *stateDecoder) skip() error {
	r := bytes.NewReader(d.b[d.off:])
	err := msgpack.NewDecoder(r).Skip()
	d.off = len(d.b) - r.Len()
	return err
}

// structure decodes a struct of nfields fields like msgpack's struct
// decoder: a map (nil: the zero value), or an array with every field in
// order (empty: the zero value). field decodes the field named name (map
// form) or numbered i (array form) and reports false for an unknown name.
func (d *stateDecoder) structure(nfields int, zero func(), field func(name string, i int) (bool, error)) error {
	c, err := d.code()
	if err != nil {
		return err
	}
	n, err := d.mapLen(c)
	if err == nil {
		if n == -1 {
			zero()
			return nil
		}
		for range n {
			name, err := d.key()
			if err != nil {
				return err
			}
			ok, err := field(name, -1)
			if err != nil {
				return err
			}
			if !ok {
				if err := d.skip(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	n, err2 := d.arrayLen(c)
	if err2 != nil {
		return err
	}
	if n <= 0 {
		zero()
		return nil
	}
	if n != nfields {
		return errArrayStruct
	}
	for i := range n {
		if _, err := field("", i); err != nil {
			return err
		}
	}
	return nil
}
