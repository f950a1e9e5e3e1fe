// Package msgpackcheck validates msgpack bytes from an untrusted source
// before a general-purpose decoder (vmihailenco/msgpack) sees them. That
// decoder trusts the lengths in the input: a 5-byte array header claiming
// 4 billion elements makes it allocate 64 GiB, and a megabyte of nested
// one-element arrays overflows the goroutine stack. Check walks the bytes
// once, without allocating, and refuses any value whose depth, element
// count or string/binary/extension lengths do not fit the limits and the
// bytes actually present, so that the decode that follows allocates at
// most a small multiple of the input.
package msgpackcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrInvalid is matched (errors.Is) by every error of Check: the input is
// not exactly one well-formed msgpack value within the limits.
var ErrInvalid = errors.New("invalid msgpack")

// Default limits (a zero field of Limits takes these).
const (
	DefaultMaxDepth    = 32
	DefaultMaxElements = 1 << 20
	DefaultMaxBytes    = 1 << 20
	// MaxDepthCap is the deepest nesting Check accepts whatever
	// Limits.MaxDepth says (its stack is a fixed array).
	MaxDepthCap = 64
)

// Limits bound a msgpack value. The zero value uses the defaults.
type Limits struct {
	// MaxDepth bounds the nesting of arrays and maps (a scalar at the top
	// is depth 0, the elements of a top-level array depth 1); at most
	// MaxDepthCap.
	MaxDepth int
	// MaxElements bounds the number of array elements plus map keys and
	// values, in total.
	MaxElements int
	// MaxBytes bounds the input length.
	MaxBytes int
	// StringKeys requires every map key to be a string (JSON objects).
	StringKeys bool
	// NoExt refuses extension types (timestamps included).
	NoExt bool
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	l.MaxDepth = min(l.MaxDepth, MaxDepthCap)
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultMaxElements
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// frame is an open container: how many values it still expects and
// whether the next one is a map key.
type frame struct {
	left   uint64
	keyMap bool // a map: values alternate key, value
	isKey  bool // the next value is a key
}

// Check reports whether data is exactly one msgpack value within lim:
// every length fits in the bytes that follow it (a container of n
// elements needs at least n more bytes, a map of n entries 2n), the
// nesting and total element count are bounded, and nothing follows the
// value. It allocates nothing on valid input.
func Check(data []byte, lim Limits) error {
	lim = lim.withDefaults()
	if len(data) == 0 {
		return fmt.Errorf("%w: empty input", ErrInvalid)
	}
	if len(data) > lim.MaxBytes {
		return fmt.Errorf("%w: %d bytes exceed the limit of %d", ErrInvalid, len(data), lim.MaxBytes)
	}
	var stackArr [MaxDepthCap]frame
	stack := stackArr[:0]
	elements := 0
	i := 0
	for {
		if i >= len(data) {
			return fmt.Errorf("%w: truncated at byte %d", ErrInvalid, i)
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].isKey
		start := i
		h, next, err := readHeader(data, start, lim)
		if err != nil {
			return err
		}
		i = next
		if isKey && lim.StringKeys && !h.str {
			return fmt.Errorf("%w: map key at byte %d is not a string (0x%02x)", ErrInvalid, start, data[start])
		}
		if h.skip > len(data)-i {
			return fmt.Errorf("%w: value at byte %d needs %d bytes, %d left", ErrInvalid, start, h.skip, len(data)-i)
		}
		i += h.skip
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			top.left--
			if top.keyMap {
				top.isKey = !top.isKey
			}
		}
		if h.n > 0 {
			count := uint64(h.n)
			if h.isMap {
				count *= 2
			}
			if count > uint64(len(data)-i) {
				return fmt.Errorf("%w: container at byte %d claims %d elements, only %d bytes left", ErrInvalid, start, count, len(data)-i)
			}
			elements += int(count)
			if elements > lim.MaxElements {
				return fmt.Errorf("%w: more than %d elements", ErrInvalid, lim.MaxElements)
			}
			if len(stack) >= lim.MaxDepth {
				return fmt.Errorf("%w: nesting deeper than %d at byte %d", ErrInvalid, lim.MaxDepth, start)
			}
			stack = append(stack, frame{left: count, keyMap: h.isMap, isKey: h.isMap})
			continue
		}
		// A scalar or an empty container completes values upwards.
		for len(stack) > 0 && stack[len(stack)-1].left == 0 {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			if i != len(data) {
				return fmt.Errorf("%w: %d trailing bytes after the value at byte %d", ErrInvalid, len(data)-i, i)
			}
			return nil
		}
	}
}

// header is what a value's first bytes say of it.
type header struct {
	n     int64 // the element count of a container it opens (-1: not a container)
	isMap bool
	skip  int  // payload bytes of a scalar
	str   bool // a string
}

// readHeader reads the type byte at start and the length that follows
// it, checking that a string, binary or extension length fits in the
// bytes left; it returns the header and the offset after it.
func readHeader(data []byte, start int, lim Limits) (header, int, error) {
	c := data[start]
	i := start + 1
	h := header{n: -1}
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
	case c >= 0x80 && c <= 0x8f:
		h.n, h.isMap = int64(c&0x0f), true
	case c >= 0x90 && c <= 0x9f:
		h.n = int64(c & 0x0f)
	case c >= 0xa0 && c <= 0xbf:
		h.skip, h.str = int(c&0x1f), true
	default:
		switch c {
		case 0xc1:
			return h, i, fmt.Errorf("%w: byte 0xc1 (never used) at offset %d", ErrInvalid, start)
		case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb:
			w := 1 << ((c - 0xc4) % 3) // c4,d9: 1; c5,da: 2; c6,db: 4
			if c >= 0xd9 {
				w = 1 << (c - 0xd9)
				h.str = true
			}
			l, ok := uintN(data, i, w)
			if !ok {
				return h, i, fmt.Errorf("%w: truncated length at byte %d", ErrInvalid, i)
			}
			i += w
			if l > uint64(len(data)-i) {
				return h, i, fmt.Errorf("%w: length %d at byte %d exceeds the %d bytes left", ErrInvalid, l, start, len(data)-i)
			}
			h.skip = int(l)
		case 0xc7, 0xc8, 0xc9:
			if lim.NoExt {
				return h, i, fmt.Errorf("%w: extension type at byte %d not allowed", ErrInvalid, start)
			}
			w := 1 << (c - 0xc7)
			l, ok := uintN(data, i, w)
			if !ok {
				return h, i, fmt.Errorf("%w: truncated length at byte %d", ErrInvalid, i)
			}
			i += w
			if l >= uint64(len(data)-i) { // type byte + l bytes
				return h, i, fmt.Errorf("%w: extension length %d at byte %d exceeds the bytes left", ErrInvalid, l, start)
			}
			h.skip = int(l) + 1
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
			if lim.NoExt {
				return h, i, fmt.Errorf("%w: extension type at byte %d not allowed", ErrInvalid, start)
			}
			h.skip = 1 + 1<<(c-0xd4)
		case 0xca, 0xce, 0xd2:
			h.skip = 4
		case 0xcb, 0xcf, 0xd3:
			h.skip = 8
		case 0xcc, 0xd0:
			h.skip = 1
		case 0xcd, 0xd1:
			h.skip = 2
		case 0xdc, 0xdd, 0xde, 0xdf:
			w := 2
			if c == 0xdd || c == 0xdf {
				w = 4
			}
			l, ok := uintN(data, i, w)
			if !ok {
				return h, i, fmt.Errorf("%w: truncated length at byte %d", ErrInvalid, i)
			}
			i += w
			h.n, h.isMap = int64(l), c >= 0xde
		}
	}
	return h, i, nil
}

// uintN reads a big-endian unsigned integer of w bytes (1, 2 or 4) at i.
func uintN(data []byte, i, w int) (uint64, bool) {
	if w > len(data)-i {
		return 0, false
	}
	switch w {
	case 1:
		return uint64(data[i]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(data[i:])), true
	default:
		return uint64(binary.BigEndian.Uint32(data[i:])), true
	}
}
