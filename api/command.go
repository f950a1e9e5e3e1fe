package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
)

type fieldKind uint8

const (
	kindNullableBool   fieldKind = iota // true, false or null
	kindString                          // a string
	kindNullableString                  // a string or null ("")
	kindNames                           // [string] or null
	kindUint                            // a non-negative integer
	kindContract                        // [{"name":string,"hash":string}] or null
	kindTurnIntent                      // an intent.Intent object or null
	kindTurnOverride                    // an events.TurnOverride object or null
)

func (k fieldKind) want() string {
	switch k {
	case kindNullableBool:
		return "true, false or null"
	case kindString:
		return "a string"
	case kindNullableString:
		return "a string or null"
	case kindNames:
		return "an array of strings or null"
	case kindUint:
		return "a non-negative integer"
	case kindContract:
		return `an array of {"name":string,"hash":string} or null`
	case kindTurnIntent:
		return `an intent object {"enabled","web_search","preset","disabled","picked"} or null`
	case kindTurnOverride:
		return `an override object {"kind","intent","allowed","names"} or null`
	}
	return "?"
}

type commandField struct {
	name     string
	kind     fieldKind
	required bool
}

// commandFields lists each type's fields in wire order.
var commandFields = map[events.Type][]commandField{
	events.TypeToolsToggled:   {{"enabled", kindNullableBool, true}},
	events.TypeWebSearchSet:   {{"enabled", kindNullableBool, true}},
	events.TypePresetChosen:   {{"preset", kindNullableString, true}},
	events.TypeToolDisabled:   {{"name", kindString, true}},
	events.TypeToolEnabled:    {{"name", kindString, true}},
	events.TypeToolsPicked:    {{"names", kindNames, true}},
	events.TypeDeferredLoaded: {{"names", kindNames, true}, {"turn", kindUint, false}},
	events.TypeTurnStarted: {
		{"turn", kindUint, false}, {"intent", kindTurnIntent, false}, {"profile", kindString, false},
		{"override", kindTurnOverride, false}, {"registry_version", kindString, false}, {"contract_hash", kindString, false},
	},
	events.TypeTurnEnded: {{"turn", kindUint, false}},
	events.TypeCheckpointRecorded: {
		{"loaded_deferred_tools", kindNames, false}, {"contract_hash", kindString, true},
		{"registry_version", kindString, true}, {"turn", kindUint, false}, {"contract", kindContract, false},
	},
}

func knownTypes() string {
	ts := events.Types()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return strings.Join(out, ", ")
}

func fieldNames(fs []commandField) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return strings.Join(out, ", ")
}

// DecodeCommand decodes one command object into its events.Payload, in
// value form. A command in JSON is one object with a "type" (an events.Type) and the
// fields of that payload, named as in the msgpack wire format:
//
//	{"type":"ToolsToggled","enabled":true}            enabled: true|false|null (null: follow profile)
//	{"type":"WebSearchSet","enabled":null}            enabled: true|false|null (null: unset)
//	{"type":"PresetChosen","preset":"research"}       preset: string, "" or null unsets
//	{"type":"ToolDisabled","name":"bash"}             name: string
//	{"type":"ToolEnabled","name":"bash"}              name: string
//	{"type":"ToolsPicked","names":["read_file"]}      names: [string] or null (null unsets)
//	{"type":"DeferredLoaded","names":["send_message"],"turn":3}   turn optional
//	{"type":"TurnStarted","turn":4}                   turn optional (0: next); the engine
//	                                                  records intent, profile, override,
//	                                                  registry_version, contract_hash (R31)
//	{"type":"TurnEnded","turn":4}                     turn optional (0: current)
//	{"type":"CheckpointRecorded","loaded_deferred_tools":[...],"contract_hash":"...",
//	 "registry_version":"...","turn":4,"contract":[{"name":"...","hash":"..."}]}
//
// Decoding is strict: an unknown or missing type, an unknown, duplicated or
// missing field and a value of the wrong JSON type are errors that name the
// type or field (and list what is accepted). Whether the command makes sense
// for the session (known preset, known tool, R2) is decided by the engine
// when it is appended.
//
// Errors match ErrBadRequest.
func DecodeCommand(data []byte) (events.Payload, error) {
	obj, keys, err := readObject(data)
	if err != nil {
		return nil, badRequest("command: %v", err)
	}
	rawType, ok := obj["type"]
	if !ok {
		return nil, badRequest(`command has no "type": use one of %s`, knownTypes())
	}
	var typ string
	if err := json.Unmarshal(rawType, &typ); err != nil || rawType[0] != '"' {
		return nil, badRequest(`command field "type" must be a string naming one of %s, got %s`, knownTypes(), clipRaw(rawType))
	}
	t := events.Type(typ)
	fields, ok := commandFields[t]
	if !ok {
		return nil, badRequest("unknown command type %q: use one of %s", clip.String(typ, clip.Max), knownTypes())
	}
	for _, k := range keys {
		if k == "type" {
			continue
		}
		if !hasField(fields, k) {
			return nil, badRequest("command %s: unknown field %q: its fields are %s", t, clip.String(k, clip.Max), fieldNames(fields))
		}
	}
	v := values{t: t}
	for _, f := range fields {
		raw, ok := obj[f.name]
		if !ok {
			if f.required {
				return nil, badRequest("command %s: field %q is required (%s)", t, f.name, f.kind.want())
			}
			continue
		}
		if err := v.set(f, raw); err != nil {
			return nil, err
		}
	}
	return v.payload(), nil
}

func hasField(fs []commandField, name string) bool {
	for _, f := range fs {
		if f.name == name {
			return true
		}
	}
	return false
}

// values collects the decoded fields of one command.
type values struct {
	t        events.Type
	bools    map[string]*bool
	strs     map[string]string
	names    map[string][]string
	uints    map[string]uint64
	contract []events.ContractEntry
	intent   *intent.Intent
	override *events.TurnOverride
}

func (v *values) set(f commandField, raw json.RawMessage) error {
	bad := func() error {
		return badRequest("command %s: field %q must be %s, got %s", v.t, f.name, f.kind.want(), clipRaw(raw))
	}
	null := string(raw) == "null"
	switch f.kind {
	case kindNullableBool:
		var b *bool
		switch string(raw) {
		case "true":
			b = new(bool)
			*b = true
		case "false":
			b = new(bool)
		case "null":
		default:
			return bad()
		}
		if v.bools == nil {
			v.bools = map[string]*bool{}
		}
		v.bools[f.name] = b
	case kindString, kindNullableString:
		s := ""
		if !(null && f.kind == kindNullableString) {
			if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
				return bad()
			}
		}
		if v.strs == nil {
			v.strs = map[string]string{}
		}
		v.strs[f.name] = s
	case kindNames:
		var list []string
		if !null {
			items, err := readArray(raw)
			if err != nil {
				return bad()
			}
			list = make([]string, 0, len(items))
			for i, it := range items {
				var s string
				if it[0] != '"' || json.Unmarshal(it, &s) != nil {
					return badRequest("command %s: field %q[%d] must be a string, got %s", v.t, f.name, i, clipRaw(it))
				}
				list = append(list, s)
			}
		}
		if v.names == nil {
			v.names = map[string][]string{}
		}
		v.names[f.name] = list
	case kindUint:
		s := string(raw)
		if s == "" || s[0] < '0' || s[0] > '9' {
			return bad()
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			// 1e3 or 3.0 are integers written another way; accept them
			// only when they are exact.
			var f64 float64
			if json.Unmarshal(raw, &f64) != nil || f64 < 0 || f64 > 1<<53 || f64 != float64(uint64(f64)) {
				return bad()
			}
			n = uint64(f64)
		}
		if v.uints == nil {
			v.uints = map[string]uint64{}
		}
		v.uints[f.name] = n
	case kindTurnIntent, kindTurnOverride:
		if null {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var err error
		if f.kind == kindTurnIntent {
			v.intent = new(intent.Intent)
			err = dec.Decode(v.intent)
		} else {
			v.override = new(events.TurnOverride)
			err = dec.Decode(v.override)
		}
		if err != nil || raw[0] != '{' {
			return bad()
		}
	case kindContract:
		if null {
			return nil
		}
		items, err := readArray(raw)
		if err != nil {
			return bad()
		}
		v.contract = make([]events.ContractEntry, 0, len(items))
		for i, it := range items {
			e, err := decodeContractEntry(it)
			if err != nil {
				return badRequest("command %s: field %q[%d]: %v", v.t, f.name, i, err)
			}
			v.contract = append(v.contract, e)
		}
	}
	return nil
}

func decodeContractEntry(raw json.RawMessage) (events.ContractEntry, error) {
	obj, keys, err := readObject(raw)
	if err != nil {
		return events.ContractEntry{}, err
	}
	for _, k := range keys {
		if k != "name" && k != "hash" {
			return events.ContractEntry{}, fmt.Errorf("unknown field %q: its fields are name, hash", clip.String(k, clip.Max))
		}
	}
	var e events.ContractEntry
	for _, f := range []struct {
		name string
		dst  *string
	}{{"name", &e.Name}, {"hash", &e.Hash}} {
		raw, ok := obj[f.name]
		if !ok {
			return e, fmt.Errorf("field %q is required (a string)", f.name)
		}
		if raw[0] != '"' || json.Unmarshal(raw, f.dst) != nil {
			return e, fmt.Errorf("field %q must be a string, got %s", f.name, clipRaw(raw))
		}
	}
	return e, nil
}

func (v *values) payload() events.Payload {
	switch v.t {
	case events.TypeToolsToggled:
		return events.ToolsToggled{Enabled: v.bools["enabled"]}
	case events.TypeWebSearchSet:
		return events.WebSearchSet{Enabled: v.bools["enabled"]}
	case events.TypePresetChosen:
		return events.PresetChosen{Preset: v.strs["preset"]}
	case events.TypeToolDisabled:
		return events.ToolDisabled{Name: v.strs["name"]}
	case events.TypeToolEnabled:
		return events.ToolEnabled{Name: v.strs["name"]}
	case events.TypeToolsPicked:
		return events.ToolsPicked{Names: v.names["names"]}
	case events.TypeDeferredLoaded:
		return events.DeferredLoaded{Names: v.names["names"], Turn: v.uints["turn"]}
	case events.TypeTurnStarted:
		return events.TurnStarted{Turn: v.uints["turn"], Intent: v.intent, Profile: v.strs["profile"], Override: v.override,
			RegistryVersion: v.strs["registry_version"], ContractHash: v.strs["contract_hash"]}
	case events.TypeTurnEnded:
		return events.TurnEnded{Turn: v.uints["turn"]}
	case events.TypeCheckpointRecorded:
		return events.CheckpointRecorded{
			Loaded: v.names["loaded_deferred_tools"], ContractHash: v.strs["contract_hash"],
			RegistryVersion: v.strs["registry_version"], Turn: v.uints["turn"], Contract: v.contract,
		}
	}
	return nil
}

// EncodeCommand encodes a payload as a command object: "type" first, then
// every field of the payload in wire order (nil lists and unset switches
// as null), so that DecodeCommand gives the same payload back.
func EncodeCommand(p events.Payload) ([]byte, error) {
	v, ok := events.PayloadValue(p)
	if !ok {
		return nil, badRequest("encode command: %T is not an events payload: use one of %s", p, knownTypes())
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode command %s: %w", v.EventType(), err)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	b.WriteString(strconv.Quote(string(v.EventType())))
	if len(body) > 2 { // more than {}
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

// Command is one command in a request or a history entry: an
// events.Payload that marshals as a command object (EncodeCommand,
// DecodeCommand).
type Command struct {
	events.Payload
}

// MarshalJSON implements json.Marshaler.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Payload == nil {
		return []byte("null"), nil
	}
	return EncodeCommand(c.Payload)
}

// UnmarshalJSON implements json.Unmarshaler with DecodeCommand.
func (c *Command) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		c.Payload = nil
		return nil
	}
	p, err := DecodeCommand(b)
	if err != nil {
		return err
	}
	c.Payload = p
	return nil
}

// Commands is a list of commands. It decodes strictly, naming the index of
// a bad command ("commands[2]: ...").
type Commands []events.Payload

// MarshalJSON implements json.Marshaler.
func (cs Commands) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, p := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		one, err := EncodeCommand(p)
		if err != nil {
			return nil, fmt.Errorf("commands[%d]: %w", i, err)
		}
		b.Write(one)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (cs *Commands) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*cs = nil
		return nil
	}
	items, err := readArray(b)
	if err != nil {
		return badRequest(`field "commands" must be an array of command objects, got %s`, clipRaw(b))
	}
	if len(items) > MaxCommands {
		return badRequest("field \"commands\" has %d commands, at most %d are accepted in one request", len(items), MaxCommands)
	}
	out := make(Commands, 0, len(items))
	for i, it := range items {
		p, err := DecodeCommand(it)
		if err != nil {
			return fmt.Errorf("commands[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	*cs = out
	return nil
}

// MaxCommands bounds the commands of one append request.
const MaxCommands = 100

// readObject reads one JSON object and nothing after it, refusing
// duplicate keys. It returns the raw values and the keys in order.
func readObject(data []byte) (map[string]json.RawMessage, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("not valid JSON: %v", syntaxMessage(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("want a JSON object, got %s", clipRaw(data))
	}
	obj := map[string]json.RawMessage{}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("not valid JSON: %v", syntaxMessage(err))
		}
		k, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("field %q: not valid JSON: %v", clip.String(k, clip.Max), syntaxMessage(err))
		}
		if _, dup := obj[k]; dup {
			return nil, nil, fmt.Errorf("field %q appears twice", clip.String(k, clip.Max))
		}
		obj[k] = raw
		keys = append(keys, k)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, fmt.Errorf("not valid JSON: %v", syntaxMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("unexpected data after the object")
	}
	return obj, keys, nil
}

// readArray splits one JSON array into its raw elements.
func readArray(data []byte) ([]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '[' {
		return nil, errors.New("not an array")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, err
	}
	return items, nil
}

func syntaxMessage(err error) string {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// clipRaw quotes a raw JSON value for an error message, shortened.
func clipRaw(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if s == "" {
		return "nothing"
	}
	return clip.String(s, 60)
}
