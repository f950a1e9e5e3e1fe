package events

import "sync"

// The fast path of Decode. It reads a v2 envelope in one pass straight into
// Envelope fields and the typed payload, without the generic map. It only
// ever reports success: on anything it does not handle, and on any input the
// generic path would refuse, it returns ok == false and Decode runs the
// generic path (decode), which then produces the result, including every
// error. It therefore must accept only inputs the generic path accepts, and
// return exactly what the generic path returns for them.
//
// Handled: a msgpack map envelope with v == 2 (integer), string (or bin)
// id/session/type, optional string-or-nil channel/actor, integer time_ms, a
// known type, a "data" map (or nil/absent) in any key order, payload fields
// of the expected msgpack kinds (read by the payload table's codecs, nested
// maps included), and unknown keys (at most a few per map)
// whose values are scalars, strings or arrays of those. Everything else
// (v1 events needing upcasts, floats where integers are expected, nested
// maps or extension values under unknown keys, any malformed input, any
// validation failure) falls back.

// unknownKeys remembers the unknown keys of one map, for the duplicate check
// the generic parser does on every key.
type unknownKeys struct {
	n    int
	keys [4][]byte
}

// add reports false for a duplicate or when too many keys are unknown.
func (u *unknownKeys) add(k []byte) bool {
	for _, x := range u.keys[:u.n] {
		if string(x) == string(k) {
			return false
		}
	}
	if u.n == len(u.keys) {
		return false
	}
	u.keys[u.n] = k
	u.n++
	return true
}

// typeOf returns the known Type spelled by b, without allocating.
func typeOf(b []byte) (Type, bool) {
	for _, t := range allTypes {
		if string(t) == string(b) {
			return t, true
		}
	}
	return "", false
}

// Bits of the envelope keys seen; the first four are those of headerKeys.
const (
	seenID = 1 << iota
	seenSession
	seenChannel
	seenActor
	seenTime
	seenVersion
	seenType
	seenData
)

// headerKeys are the envelope's string keys.
var headerKeys = [...]string{keyID, keySession, keyChannel, keyActor}

// headerText returns the index of k in headerKeys, -1 if it is not one.
func headerText(k []byte) int {
	for i, h := range headerKeys {
		if h == string(k) {
			return i
		}
	}
	return -1
}

var fastReaders = sync.Pool{New: func() any { return new(fastReader) }}

// decodeFast is the fast path; see the comment at the top of the file.
func decodeFast(b []byte) (Envelope, bool) {
	if len(b) > MaxEventBytes {
		return Envelope{}, false
	}
	// The reader is pooled: the payload codecs take it through function
	// values, which would move it to the heap.
	r := fastReaders.Get().(*fastReader)
	*r = fastReader{b: b}
	defer func() {
		*r = fastReader{}
		fastReaders.Put(r)
	}()
	n, ok := r.mapLen()
	if !ok {
		return Envelope{}, false
	}
	var (
		env      Envelope
		seen     uint
		unknown  unknownKeys
		typ      Type
		dataAt   = -1 // offset of a data map read before the type
		dataDone bool
	)
	// The envelope's strings, in the order of headerKeys.
	texts := [...]*string{&env.ID, &env.Session, &env.Channel, &env.Actor}
	for range n {
		k, ok := r.key()
		if !ok {
			return Envelope{}, false
		}
		var bit uint
		switch string(k) {
		case keyTime:
			bit = seenTime
			var big bool
			env.TimeMs, _, big, ok = r.int()
			ok = ok && !big
		case keyVersion:
			bit = seenVersion
			var v int64
			var big bool
			v, _, big, ok = r.int()
			ok = ok && !big && v == SchemaVersion
		case keyType:
			bit = seenType
			var t []byte
			if t, ok = r.str(); ok {
				typ, ok = typeOf(t)
			}
		case keyData:
			bit = seenData
			if r.isNil() {
				break
			}
			if typ != "" {
				env.Payload, ok = r.payload(typ)
				dataDone = true
			} else {
				dataAt = r.i
				ok = r.skipDataMap()
			}
		default:
			if h := headerText(k); h >= 0 {
				// Channel and actor (seenChannel, seenActor) may be nil.
				bit = 1 << h
				ok = r.text(texts[h], bit&(seenChannel|seenActor) != 0)
			} else {
				ok = unknown.add(k) && r.skipUnknown()
			}
		}
		if !ok || seen&bit != 0 {
			return Envelope{}, false
		}
		seen |= bit
	}
	const required = seenID | seenSession | seenTime | seenVersion | seenType
	if r.i != len(b) || seen&required != required {
		return Envelope{}, false
	}
	switch {
	case dataDone:
	case dataAt >= 0: // a data map before the type
		r.i = dataAt
		if env.Payload, ok = r.payload(typ); !ok {
			return Envelope{}, false
		}
	default: // no data: the payload of an empty map
		if env.Payload, ok = payloadByType[typ].fast(r, 0); !ok {
			return Envelope{}, false
		}
	}
	env.Version = SchemaVersion
	env.Type = typ
	if env.Validate() != nil {
		return Envelope{}, false
	}
	return env, true
}

// payload reads a data map for type t.
func (r *fastReader) payload(t Type) (Payload, bool) {
	n, ok := r.mapLen()
	if !ok {
		return nil, false
	}
	return payloadByType[t].fast(r, n)
}

func (r *fastReader) boolPtr(dst **bool) bool {
	if r.i >= len(r.b) {
		return false
	}
	switch r.b[r.i] {
	case 0xc0:
		*dst = nil
	case 0xc2:
		v := false
		*dst = &v
	case 0xc3:
		v := true
		*dst = &v
	default:
		return false
	}
	r.i++
	return true
}

// strs reads a list of at most MaxListLen names as strsField does.
func (r *fastReader) strs(dst *[]string) bool {
	return fastArray(r, MaxListLen, dst, func(s *string) bool { return r.text(s, false) })
}

// fastArray reads an array of at most max entries, each with read: nil
// stays nil, an empty array is an empty non-nil slice (as listField).
func fastArray[E any](r *fastReader, max int, dst *[]E, read func(*E) bool) bool {
	if r.isNil() {
		*dst = nil
		return true
	}
	n, ok := r.arrayLen()
	if !ok || n > max || n > len(r.b)-r.i {
		return false
	}
	out := make([]E, n)
	for i := range out {
		if !read(&out[i]) {
			return false
		}
	}
	*dst = out
	return true
}
