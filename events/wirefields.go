package events

// Field descriptors of the payload maps. A codec is the list of a map's
// keys in wire order; each field knows how its value is written (Encode),
// read from the generic map (the generic path of Decode) and read straight
// from the bytes (the fast path), so the three readings of a key cannot
// drift apart. Field access goes through typed accessors, not reflection:
// the fast path stays a loop over the codec and a direct store.

import "fmt"

// field is one key of a payload map of type P.
type field[P any] struct {
	key string
	// req: the key must be present (and not nil); the generic reader
	// reports it missing, the fast path declines.
	req bool
	// omit, when set, leaves the key out of the encoded map when it
	// reports true (TurnStarted writes only what it records).
	omit func(p *P) bool
	enc  func(s *sticky, p *P)
	dec  func(m map[string]any, p *P) error
	fast func(r *fastReader, p *P) bool
	// keys are the keys of a nested map, for the parser's known keys.
	keys []string
	// last: the generic reader reads the key after the others, so that
	// of several bad keys the others are reported first (TurnStarted's
	// override, whose errors it reports after those of the keys written
	// after it).
	last bool
}

// codec is the fields of a map of type P in wire order.
type codec[P any] []field[P]

// encode writes p as a map of the fields not omitted, in order.
func (c codec[P]) encode(s *sticky, p *P) {
	n := 0
	for i := range c {
		if c[i].omit == nil || !c[i].omit(p) {
			n++
		}
	}
	s.mapLen(n)
	for i := range c {
		if c[i].omit == nil || !c[i].omit(p) {
			s.str(c[i].key)
			c[i].enc(s, p)
		}
	}
}

// decode reads a P from a generic map, field by field in wire order (the
// fields marked last at the end); unknown keys are ignored.
func (c codec[P]) decode(m map[string]any) (P, error) {
	var p P
	for _, last := range [...]bool{false, true} {
		for i := range c {
			if c[i].last != last {
				continue
			}
			if err := c[i].dec(m, &p); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// fast reads the n entries of a map into p as decode reads them from the
// generic map; it declines (false) a duplicate or missing required key, a
// value of another kind and more unknown keys than the fast path tracks.
func (c codec[P]) fast(r *fastReader, n int, p *P) bool {
	var (
		seen    uint64
		unknown unknownKeys
	)
	for range n {
		k, ok := r.key()
		if !ok {
			return false
		}
		i := c.index(k)
		if i < 0 {
			if !unknown.add(k) || !r.skipUnknown() {
				return false
			}
			continue
		}
		if seen&(1<<i) != 0 || !c[i].fast(r, p) {
			return false
		}
		seen |= 1 << i
	}
	for i := range c {
		if c[i].req && seen&(1<<i) == 0 {
			return false
		}
	}
	return true
}

func (c codec[P]) index(k []byte) int {
	for i := range c {
		if c[i].key == string(k) {
			return i
		}
	}
	return -1
}

// allKeys lists the keys of the codec and of its nested maps.
func (c codec[P]) allKeys() []string {
	var out []string
	for i := range c {
		out = append(append(out, c[i].key), c[i].keys...)
	}
	return out
}

// omitted returns f left out of the encoded map when unset reports true.
func (f field[P]) omitted(unset func(p *P) bool) field[P] {
	f.omit = unset
	return f
}

// readLast returns f read by the generic reader after the other keys.
func (f field[P]) readLast() field[P] {
	f.last = true
	return f
}

// valueKind is how a value of type V is written, read from the generic
// map and read by the fast path.
type valueKind[V any] struct {
	req  bool // see field.req
	enc  func(s *sticky, v V)
	dec  func(m map[string]any, key string) (V, error)
	fast func(r *fastReader, v *V) bool
}

// The kinds of the scalar and list fields.
var (
	// A *bool: true, false or nil (unset).
	triKind = valueKind[*bool]{enc: (*sticky).boolPtr, dec: boolPtrField, fast: (*fastReader).boolPtr}
	// A string; nil or absent reads "".
	textKind = valueKind[string]{enc: (*sticky).str,
		dec:  func(m map[string]any, key string) (string, error) { return strField(m, key, false) },
		fast: func(r *fastReader, v *string) bool { return r.text(v, true) }}
	// A string that must be present and not nil.
	nameKind = valueKind[string]{req: true, enc: (*sticky).str,
		dec:  func(m map[string]any, key string) (string, error) { return strField(m, key, true) },
		fast: func(r *fastReader, v *string) bool { return r.text(v, false) }}
	// A list of at most MaxListLen strings; nil stays nil, an empty array
	// is an empty non-nil list.
	namesKind = valueKind[[]string]{enc: (*sticky).strs,
		dec:  func(m map[string]any, key string) ([]string, error) { return strsField(m, key, MaxListLen) },
		fast: (*fastReader).strs}
	// A non-negative integer; nil or absent reads 0.
	uintKind = valueKind[uint64]{enc: (*sticky).uint, dec: uintField, fast: (*fastReader).uintOrNil}
	// An integer; nil or absent reads 0.
	intKind = valueKind[int64]{enc: (*sticky).int,
		dec:  func(m map[string]any, key string) (int64, error) { return intField(m, key, false) },
		fast: (*fastReader).intOrNil}
)

// valueAt is the field key of kind k, held at at(p).
func valueAt[P, V any](key string, k valueKind[V], at func(*P) *V) field[P] {
	return field[P]{key: key, req: k.req,
		enc: func(s *sticky, p *P) { k.enc(s, *at(p)) },
		dec: func(m map[string]any, p *P) (err error) {
			*at(p), err = k.dec(m, key)
			return err
		},
		fast: func(r *fastReader, p *P) bool { return k.fast(r, at(p)) },
	}
}

// The fields of each kind, for the table's rows.
func triAt[P any](key string, at func(*P) **bool) field[P]      { return valueAt(key, triKind, at) }
func textAt[P any](key string, at func(*P) *string) field[P]    { return valueAt(key, textKind, at) }
func nameAt[P any](key string, at func(*P) *string) field[P]    { return valueAt(key, nameKind, at) }
func namesAt[P any](key string, at func(*P) *[]string) field[P] { return valueAt(key, namesKind, at) }
func uintAt[P any](key string, at func(*P) *uint64) field[P]    { return valueAt(key, uintKind, at) }
func intAt[P any](key string, at func(*P) *int64) field[P]      { return valueAt(key, intKind, at) }

// ptrAt is a nested map of type E, nil when absent or nil. A nested
// error is prefixed with the key.
func ptrAt[P, E any](key string, elem codec[E], at func(*P) **E) field[P] {
	return field[P]{key: key, keys: elem.allKeys(),
		enc: func(s *sticky, p *P) {
			if e := *at(p); e != nil {
				elem.encode(s, e)
				return
			}
			s.do(s.e.EncodeNil())
		},
		dec: func(m map[string]any, p *P) (err error) {
			*at(p), err = nestedField(m, key, elem)
			return err
		},
		fast: func(r *fastReader, p *P) (ok bool) {
			*at(p), ok = fastNested(r, elem)
			return ok
		},
	}
}

// structAt is a nested map of type E held by value: absent or nil reads
// the zero E, which is written as a map like any other.
func structAt[P, E any](key string, elem codec[E], at func(*P) *E) field[P] {
	return field[P]{key: key, keys: elem.allKeys(),
		enc: func(s *sticky, p *P) { elem.encode(s, at(p)) },
		dec: func(m map[string]any, p *P) error {
			e, err := nestedField(m, key, elem)
			if e != nil {
				*at(p) = *e
			}
			return err
		},
		fast: func(r *fastReader, p *P) bool {
			e, ok := fastNested(r, elem)
			if e != nil {
				*at(p) = *e
			}
			return ok
		},
	}
}

// nestedField reads the nested map under key as an E; nil when absent or
// nil.
func nestedField[E any](m map[string]any, key string, elem codec[E]) (*E, error) {
	em, err := mapField(m, key)
	if err != nil || em == nil {
		return nil, err
	}
	e, err := elem.decode(em)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &e, nil
}

// fastNested is nestedField on the fast path.
func fastNested[E any](r *fastReader, elem codec[E]) (*E, bool) {
	if r.isNil() {
		return nil, true
	}
	n, ok := r.mapLen()
	e := new(E)
	if !ok || !elem.fast(r, n, e) {
		return nil, false
	}
	return e, true
}

// listAt is an array of at most max nested maps of type E; nil stays
// nil, an empty array is an empty non-nil list. An entry's error is
// prefixed with key[i].
func listAt[P, E any](key string, max int, elem codec[E], at func(*P) *[]E) field[P] {
	return field[P]{key: key, keys: elem.allKeys(),
		enc: func(s *sticky, p *P) {
			list := *at(p)
			if list == nil {
				s.do(s.e.EncodeNil())
				return
			}
			s.do(s.e.EncodeArrayLen(len(list)))
			for i := range list {
				elem.encode(s, &list[i])
			}
		},
		dec: func(m map[string]any, p *P) error {
			ms, err := mapsField(m, key, max)
			if err != nil || ms == nil {
				return err
			}
			out := make([]E, len(ms))
			for i, em := range ms {
				if out[i], err = elem.decode(em); err != nil {
					return fmt.Errorf("%s[%d]: %w", key, i, err)
				}
			}
			*at(p) = out
			return nil
		},
		fast: func(r *fastReader, p *P) bool {
			return fastArray(r, max, at(p), func(e *E) bool {
				m, ok := r.mapLen()
				return ok && m <= len(r.b)-r.i && elem.fast(r, m, e)
			})
		},
	}
}
