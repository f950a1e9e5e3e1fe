package events

import (
	"math"
	"strings"
)

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
// of the expected msgpack kinds, and unknown keys (at most a few per map)
// whose values are scalars, strings or arrays of those. Everything else
// (v1 events needing upcasts, floats where integers are expected, nested
// maps or extension values under unknown keys, any malformed input, any
// validation failure) falls back.

// fastReader reads msgpack from b at i. Every method returns ok == false
// (and leaves i unspecified) on input it does not handle.
type fastReader struct {
	b []byte
	i int
}

// mapLen reads a map header.
func (r *fastReader) mapLen() (int, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	switch {
	case c >= 0x80 && c <= 0x8f:
		r.i++
		return int(c & 0x0f), true
	case c == 0xde:
		return r.len16()
	case c == 0xdf:
		return r.len32()
	}
	return 0, false
}

// arrayLen reads an array header.
func (r *fastReader) arrayLen() (int, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	switch {
	case c >= 0x90 && c <= 0x9f:
		r.i++
		return int(c & 0x0f), true
	case c == 0xdc:
		return r.len16()
	case c == 0xdd:
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

// strOrNil reads a string or nil (nil gives a nil slice, isNil true).
func (r *fastReader) strOrNil() (s []byte, isNil, ok bool) {
	if r.isNil() {
		return nil, true, true
	}
	s, ok = r.str()
	return s, false, ok
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

// uintOrNil reads a non-negative integer or nil (0), as uintField does.
func (r *fastReader) uintOrNil() (uint64, bool) {
	if r.isNil() {
		return 0, true
	}
	v, u, big, ok := r.int()
	if !ok {
		return 0, false
	}
	if big {
		return u, true
	}
	if v < 0 {
		return 0, false
	}
	return uint64(v), true
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
	if n, ok := r.arrayLen(); ok {
		if n > len(r.b)-r.i {
			return false
		}
		for range n {
			if !r.skipScalar() {
				return false
			}
		}
		return true
	}
	return r.skipScalar()
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
		if m, ok := r.arrayLen(); ok {
			if m > len(r.b)-r.i {
				return false
			}
			for range m {
				if !r.skipScalarMap() {
					return false
				}
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

// fastPayload is the typed payload as read, strings still aliasing input.
type fastPayload struct {
	enabled  *bool
	str1     []byte // preset, name, contract_hash
	str2     []byte // registry_version
	names    []string
	turn     uint64
	contract []ContractEntry
}

// Bits of the envelope keys seen.
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

// decodeFast is the fast path; see the comment at the top of the file.
func decodeFast(b []byte) (Envelope, bool) {
	if len(b) > MaxEventBytes {
		return Envelope{}, false
	}
	r := fastReader{b: b}
	n, ok := r.mapLen()
	if !ok {
		return Envelope{}, false
	}
	var (
		env                       Envelope
		id, session, chann, actor []byte
		seen                      uint
		unknown                   unknownKeys
		typ                       Type
		data                      fastPayload
		dataAt                    = -1 // offset of a data map read before the type
		dataDone                  bool
	)
	for range n {
		k, ok := r.key()
		if !ok {
			return Envelope{}, false
		}
		var bit uint
		switch string(k) {
		case keyID:
			bit = seenID
			id, ok = r.str()
		case keySession:
			bit = seenSession
			session, ok = r.str()
		case keyChannel:
			bit = seenChannel
			chann, _, ok = r.strOrNil()
		case keyActor:
			bit = seenActor
			actor, _, ok = r.strOrNil()
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
				ok = r.payload(typ, &data)
				dataDone = true
			} else {
				dataAt = r.i
				ok = r.skipDataMap()
			}
		default:
			ok = unknown.add(k) && r.skipUnknown()
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
	if !dataDone {
		// A data map before the type, or no data (an empty map).
		if dataAt >= 0 {
			r.i = dataAt
			if !r.payload(typ, &data) {
				return Envelope{}, false
			}
		} else {
			r.i = len(b) // nothing to read: payload of an empty map
			if !r.fields(typ, 0, &data) {
				return Envelope{}, false
			}
		}
	}

	// One allocation for every header and scalar payload string.
	var sb strings.Builder
	sb.Grow(len(id) + len(session) + len(chann) + len(actor) + len(data.str1) + len(data.str2))
	sb.Write(id)
	sb.Write(session)
	sb.Write(chann)
	sb.Write(actor)
	sb.Write(data.str1)
	sb.Write(data.str2)
	s := sb.String()
	cut := func(n int) string {
		x := s[:n]
		s = s[n:]
		return x
	}
	env.ID = cut(len(id))
	env.Session = cut(len(session))
	env.Channel = cut(len(chann))
	env.Actor = cut(len(actor))
	str1 := cut(len(data.str1))
	str2 := cut(len(data.str2))
	env.Version = SchemaVersion
	env.Type = typ
	switch typ {
	case TypeToolsToggled:
		env.Payload = ToolsToggled{Enabled: data.enabled}
	case TypeWebSearchSet:
		env.Payload = WebSearchSet{Enabled: data.enabled}
	case TypePresetChosen:
		env.Payload = PresetChosen{Preset: str1}
	case TypeToolDisabled:
		env.Payload = ToolDisabled{Name: str1}
	case TypeToolEnabled:
		env.Payload = ToolEnabled{Name: str1}
	case TypeToolsPicked:
		env.Payload = ToolsPicked{Names: data.names}
	case TypeDeferredLoaded:
		env.Payload = DeferredLoaded{Names: data.names, Turn: data.turn}
	case TypeTurnStarted:
		env.Payload = TurnStarted{Turn: data.turn}
	case TypeTurnEnded:
		env.Payload = TurnEnded{Turn: data.turn}
	case TypeCheckpointRecorded:
		env.Payload = CheckpointRecorded{Loaded: data.names, ContractHash: str1, RegistryVersion: str2, Turn: data.turn, Contract: data.contract}
	default:
		return Envelope{}, false
	}
	if env.Validate() != nil {
		return Envelope{}, false
	}
	return env, true
}

// payload reads a data map for type t into p.
func (r *fastReader) payload(t Type, p *fastPayload) bool {
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	return r.fields(t, n, p)
}

// Bits of the payload keys seen.
const (
	seenEnabled = 1 << iota
	seenStr1
	seenStr2
	seenNames
	seenTurn
	seenContract
)

// fields reads the n entries of a data map for type t, as decodePayload
// reads them from the generic map.
func (r *fastReader) fields(t Type, n int, p *fastPayload) bool {
	var (
		seen    uint
		unknown unknownKeys
	)
	for range n {
		k, ok := r.key()
		if !ok {
			return false
		}
		var bit uint
		switch {
		case string(k) == "enabled" && (t == TypeToolsToggled || t == TypeWebSearchSet):
			bit = seenEnabled
			ok = r.boolPtr(&p.enabled)
		case string(k) == "preset" && t == TypePresetChosen,
			string(k) == "name" && (t == TypeToolDisabled || t == TypeToolEnabled),
			string(k) == "contract_hash" && t == TypeCheckpointRecorded:
			bit = seenStr1
			var isNil bool
			p.str1, isNil, ok = r.strOrNil()
			if isNil && t != TypePresetChosen && t != TypeCheckpointRecorded {
				ok = false // name is required: nil is "missing"
			}
		case string(k) == "registry_version" && t == TypeCheckpointRecorded:
			bit = seenStr2
			p.str2, _, ok = r.strOrNil()
		case string(k) == "names" && (t == TypeToolsPicked || t == TypeDeferredLoaded),
			string(k) == "loaded_deferred_tools" && t == TypeCheckpointRecorded:
			bit = seenNames
			p.names, ok = r.strs()
		case t == TypeTurnStarted && string(k) != "turn":
			// A recorded request (R31): the generic decoder reads it.
			return false
		case string(k) == "turn" && (t == TypeDeferredLoaded || t == TypeTurnStarted || t == TypeTurnEnded || t == TypeCheckpointRecorded):
			bit = seenTurn
			p.turn, ok = r.uintOrNil()
		case string(k) == "contract" && t == TypeCheckpointRecorded:
			bit = seenContract
			p.contract, ok = r.contract()
		default:
			ok = unknown.add(k) && r.skipUnknown()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	if (t == TypeToolDisabled || t == TypeToolEnabled) && seen&seenStr1 == 0 {
		return false // name is required
	}
	return true
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

// strs reads a list of names as strsField does: nil stays nil, an empty
// array is an empty non-nil slice. The names share one allocation.
func (r *fastReader) strs() ([]string, bool) {
	if r.isNil() {
		return nil, true
	}
	n, ok := r.arrayLen()
	if !ok || n > MaxListLen || n > len(r.b)-r.i {
		return nil, false
	}
	// First pass: check and measure; second pass: cut one string.
	start, total := r.i, 0
	for range n {
		s, ok := r.str()
		if !ok {
			return nil, false
		}
		total += len(s)
	}
	end := r.i
	out := make([]string, n)
	if total == 0 {
		return out, true
	}
	var sb strings.Builder
	sb.Grow(total)
	r.i = start
	for range n {
		s, _ := r.str()
		sb.Write(s)
	}
	all := sb.String()
	r.i = start
	for i := range out {
		s, _ := r.str()
		out[i] = all[:len(s)]
		all = all[len(s):]
	}
	r.i = end
	return out, true
}

// contract reads CheckpointRecorded.contract as contractField does.
func (r *fastReader) contract() ([]ContractEntry, bool) {
	if r.isNil() {
		return nil, true
	}
	n, ok := r.arrayLen()
	if !ok || n > MaxContractLen || n > len(r.b)-r.i {
		return nil, false
	}
	out := make([]ContractEntry, n)
	for i := range out {
		m, ok := r.mapLen()
		if !ok || m > len(r.b)-r.i {
			return nil, false
		}
		var (
			seen    uint
			unknown unknownKeys
			name    []byte
			hash    []byte
		)
		for range m {
			k, ok := r.key()
			if !ok {
				return nil, false
			}
			var bit uint
			switch string(k) {
			case "name":
				bit = 1
				name, ok = r.str() // required, nil is "missing"
			case "hash":
				bit = 2
				hash, _, ok = r.strOrNil()
			default:
				ok = unknown.add(k) && r.skipUnknown()
			}
			if !ok || seen&bit != 0 {
				return nil, false
			}
			seen |= bit
		}
		if seen&1 == 0 {
			return nil, false
		}
		var sb strings.Builder
		sb.Grow(len(name) + len(hash))
		sb.Write(name)
		sb.Write(hash)
		s := sb.String()
		out[i] = ContractEntry{Name: s[:len(name)], Hash: s[len(name):]}
	}
	return out, true
}
