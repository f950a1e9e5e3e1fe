package resolver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of a registry document so that a hostile
// file cannot exhaust the stack.
const maxJSONDepth = 128

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// String names the kind for messages ("a string", "an array", ...).
func (k jkind) String() string {
	switch k {
	case jNull:
		return "null"
	case jBool:
		return "a boolean"
	case jNumber:
		return "a number"
	case jString:
		return "a string"
	case jArray:
		return "an array"
	default:
		return "an object"
	}
}

// jnode is a parsed JSON value that keeps object keys in document order
// (for messages) and never goes through a Go map, so nothing about its
// output depends on map iteration.
type jnode struct {
	kind  jkind
	b     bool
	s     string // string value, or the number's literal text
	elems []*jnode
	keys  []string
	vals  []*jnode
}

// get returns the value of key in an object node, or nil.
func (n *jnode) get(key string) *jnode {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// parseJSON parses exactly one JSON value. It rejects duplicate object keys,
// trailing data and nesting deeper than maxJSONDepth.
func parseJSON(data []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec, "$", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data after the JSON value at byte %d; remove it", dec.InputOffset())
	}
	return n, nil
}

func parseValue(dec *json.Decoder, path string, depth int) (*jnode, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("%s: nesting deeper than %d levels; flatten the document", path, maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: invalid JSON near byte %d: %v; fix the syntax", path, dec.InputOffset(), err)
	}
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case json.Number:
		return &jnode{kind: jNumber, s: string(t)}, nil
	case string:
		return &jnode{kind: jString, s: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &jnode{kind: jArray}
			for dec.More() {
				e, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, len(n.elems)), depth+1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%s: invalid JSON near byte %d: %v; fix the syntax", path, dec.InputOffset(), err)
			}
			return n, nil
		case '{':
			n := &jnode{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%s: invalid JSON near byte %d: %v; fix the syntax", path, dec.InputOffset(), err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("%s: invalid JSON near byte %d: object key is not a string; fix the syntax", path, dec.InputOffset())
				}
				if slices.Contains(n.keys, key) {
					return nil, fmt.Errorf("%s: duplicate key %q; keep only one", path, key)
				}
				v, err := parseValue(dec, path+"."+key, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.vals = append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%s: invalid JSON near byte %d: %v; fix the syntax", path, dec.InputOffset(), err)
			}
			return n, nil
		}
	}
	return nil, fmt.Errorf("%s: invalid JSON near byte %d: unexpected %v; fix the syntax", path, dec.InputOffset(), tok)
}

// appendCanonical appends the canonical form of n: compact, object keys
// sorted by their bytes at every level, strings escaped by appendJSONString,
// numbers as written in the source.
func appendCanonical(dst []byte, n *jnode) []byte {
	switch n.kind {
	case jNull:
		return append(dst, "null"...)
	case jBool:
		if n.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case jNumber:
		return append(dst, n.s...)
	case jString:
		return appendJSONString(dst, n.s)
	case jArray:
		dst = append(dst, '[')
		for i, e := range n.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	default:
		order := make([]int, len(n.keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(n.keys[a], n.keys[b]) })
		dst = append(dst, '{')
		for i, k := range order {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, n.keys[k])
			dst = append(dst, ':')
			dst = appendCanonical(dst, n.vals[k])
		}
		return append(dst, '}')
	}
}

// Canonicalize returns the canonical form of a JSON document: compact, with
// object keys sorted recursively, so that two documents that differ only in
// formatting or key order give the same bytes. Parameter schemas loaded into
// a Registry are stored in this form.
func Canonicalize(data []byte) ([]byte, error) {
	n, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("canonicalize JSON: %w", err)
	}
	return appendCanonical(nil, n), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. It escapes '"', '\\', control
// characters, U+2028 and U+2029, and replaces invalid UTF-8 with U+FFFD, as
// encoding/json does, but does not escape '<', '>' and '&'.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
