package events

import (
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
	str2     []byte // registry_version, scope
	str3     []byte // tool
	names    []string
	turn     uint64
	contract []ContractEntry
	// checkpoint is a TurnEnded's checkpoint, nil when absent.
	checkpoint *fastPayload
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
	sb.Grow(len(id) + len(session) + len(chann) + len(actor) + len(data.str1) + len(data.str2) + len(data.str3))
	sb.Write(id)
	sb.Write(session)
	sb.Write(chann)
	sb.Write(actor)
	sb.Write(data.str1)
	sb.Write(data.str2)
	sb.Write(data.str3)
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
	str3 := cut(len(data.str3))
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
	case TypeDeferredEvicted:
		env.Payload = DeferredEvicted{Names: data.names, Turn: data.turn, Reason: str1}
	case TypeTurnStarted:
		env.Payload = TurnStarted{Turn: data.turn}
	case TypeTurnEnded:
		te := TurnEnded{Turn: data.turn}
		if c := data.checkpoint; c != nil {
			te.Checkpoint = &CheckpointRecorded{Loaded: c.names, ContractHash: string(c.str1), RegistryVersion: string(c.str2), Turn: c.turn, Contract: c.contract}
		}
		env.Payload = te
	case TypeSessionDeleted:
		env.Payload = SessionDeleted{Reason: str1}
	case TypePermissionGranted:
		env.Payload = PermissionGranted{By: str1, Scope: str2, Tool: str3, Turn: data.turn}
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
	seenStr3
	seenCheckpoint
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
			string(k) == "contract_hash" && t == TypeCheckpointRecorded,
			string(k) == "reason" && (t == TypeDeferredEvicted || t == TypeSessionDeleted):
			bit = seenStr1
			var isNil bool
			p.str1, isNil, ok = r.strOrNil()
			if isNil && t != TypePresetChosen && t != TypeCheckpointRecorded && t != TypeDeferredEvicted && t != TypeSessionDeleted {
				ok = false // name is required: nil is "missing"
			}
		case string(k) == "registry_version" && t == TypeCheckpointRecorded:
			bit = seenStr2
			p.str2, _, ok = r.strOrNil()
		case string(k) == "by" && t == TypePermissionGranted:
			bit = seenStr1
			var isNil bool
			p.str1, isNil, ok = r.strOrNil()
			ok = ok && !isNil // required
		case string(k) == "scope" && t == TypePermissionGranted:
			bit = seenStr2
			var isNil bool
			p.str2, isNil, ok = r.strOrNil()
			ok = ok && !isNil
		case string(k) == "tool" && t == TypePermissionGranted:
			bit = seenStr3
			var isNil bool
			p.str3, isNil, ok = r.strOrNil()
			ok = ok && !isNil
		case string(k) == "names" && (t == TypeToolsPicked || t == TypeDeferredLoaded || t == TypeDeferredEvicted),
			string(k) == "loaded_deferred_tools" && t == TypeCheckpointRecorded:
			bit = seenNames
			p.names, ok = r.strs()
		case t == TypeTurnStarted && string(k) != "turn":
			// A recorded request: the generic decoder reads it.
			return false
		case string(k) == "checkpoint" && t == TypeTurnEnded:
			// A turn end's checkpoint, a CheckpointRecorded's data
			// map (nil: none).
			bit = seenCheckpoint
			if !r.isNil() {
				p.checkpoint = new(fastPayload)
				ok = r.payload(TypeCheckpointRecorded, p.checkpoint)
			}
		case string(k) == "turn" && (t == TypePermissionGranted || t == TypeDeferredLoaded || t == TypeDeferredEvicted || t == TypeTurnStarted || t == TypeTurnEnded || t == TypeCheckpointRecorded):
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
	if t == TypePermissionGranted && seen&(seenStr1|seenStr2|seenStr3) != seenStr1|seenStr2|seenStr3 {
		return false // by, scope and tool are required
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
