package events

// The command table: a command is an event payload written
// as one JSON object, {"type":<Type>, <field>: <value>, ...}. Its fields
// are the payload's own: the names come from the payload struct's json
// tags and the kinds from the Go field types, so a new command is one
// payload type and one row of the payload table (payloadTable).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
)

// ErrInvalidCommand reports a command object DecodeCommand refuses; the
// message names the type or field and what is accepted.
var ErrInvalidCommand = errors.New("invalid command")

// commandError is a DecodeCommand error: its text is the whole message
// (no sentinel suffix), and it matches ErrInvalidCommand.
type commandError struct{ msg string }

func (e *commandError) Error() string        { return e.msg }
func (e *commandError) Is(target error) bool { return target == ErrInvalidCommand }

func invalidCommand(format string, args ...any) error {
	return &commandError{msg: fmt.Sprintf(format, args...)}
}

// FieldKind is the JSON form a command field takes, from its Go type.
type FieldKind uint8

// The field kinds.
const (
	// FieldNullableBool is a *bool: true, false or null.
	FieldNullableBool FieldKind = iota
	// FieldString is a string.
	FieldString
	// FieldNullableString is a string where null means "" (unset).
	FieldNullableString
	// FieldNames is a []string: an array of strings or null.
	FieldNames
	// FieldUint is a uint64: a non-negative integer.
	FieldUint
	// FieldContract is a []ContractEntry: [{"name","hash"}] or null.
	FieldContract
	// FieldIntent is an *intent.Intent object or null.
	FieldIntent
	// FieldOverride is a *TurnOverride object or null.
	FieldOverride
	// FieldCheckpoint is a *CheckpointRecorded: an object with the fields
	// of a CheckpointRecorded command (no "type"), or null.
	FieldCheckpoint
)

// Want says what a value of kind k must be, for error messages and the
// API reference.
func (k FieldKind) Want() string {
	switch k {
	case FieldNullableBool:
		return "true, false or null"
	case FieldString:
		return "a string"
	case FieldNullableString:
		return "a string or null"
	case FieldNames:
		return "an array of strings or null"
	case FieldUint:
		return "a non-negative integer"
	case FieldContract:
		return `an array of {"name":string,"hash":string} or null`
	case FieldIntent:
		return "an intent object {" + jsonNames(reflect.TypeFor[intent.Intent]()) + "} or null"
	case FieldOverride:
		return "an override object {" + jsonNames(reflect.TypeFor[TurnOverride]()) + "} or null"
	case FieldCheckpoint:
		return "a checkpoint object {" + jsonNames(reflect.TypeFor[CheckpointRecorded]()) + "} or null"
	}
	return "?"
}

// jsonNames lists the json names of struct type t's fields, quoted, in
// order: the intent fields an intent object takes come from intent.Intent.
func jsonNames(t reflect.Type) string {
	var out []string
	for i := range t.NumField() {
		if tag, ok := t.Field(i).Tag.Lookup("json"); ok && tag != "-" {
			name, _, _ := strings.Cut(tag, ",")
			out = append(out, strconv.Quote(name))
		}
	}
	return strings.Join(out, ",")
}

// CommandField is one field of a command: its JSON name (the payload's
// json tag), its kind and whether a command must carry it.
type CommandField struct {
	Name     string
	Kind     FieldKind
	Required bool
	index    int
}

// commandSpec is a command type: its payload type and its fields. By
// default a field is required unless its json tag says omitempty or it is
// a uint64 (a turn: 0 is next/current); the payload table's command
// options name the exceptions.
type commandSpec struct {
	typ    reflect.Type
	fields []CommandField
}

var (
	commandSpecs = map[Type]commandSpec{}
	commandOrder []Type
)

var fieldKinds = map[reflect.Type]FieldKind{
	reflect.TypeFor[*bool]():           FieldNullableBool,
	reflect.TypeFor[string]():          FieldString,
	reflect.TypeFor[[]string]():        FieldNames,
	reflect.TypeFor[uint64]():          FieldUint,
	reflect.TypeFor[[]ContractEntry](): FieldContract,
	reflect.TypeFor[*intent.Intent]():  FieldIntent,
	reflect.TypeFor[*TurnOverride]():   FieldOverride,

	reflect.TypeFor[*CheckpointRecorded](): FieldCheckpoint,
}

func init() {
	for i := range payloadTable {
		r := &payloadTable[i]
		if r.command == nil {
			continue
		}
		rt := reflect.TypeOf(r.zero)
		spec := commandSpec{typ: rt}
		for i := range rt.NumField() {
			sf := rt.Field(i)
			tag, ok := sf.Tag.Lookup("json")
			if !ok || tag == "-" || !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			kind, ok := fieldKinds[sf.Type]
			if !ok {
				panic(fmt.Sprintf("events: command %s field %s has type %s, which no FieldKind decodes", r.zero.EventType(), sf.Name, sf.Type))
			}
			if kind == FieldString && contains(r.command.nullable, name) {
				kind = FieldNullableString
			}
			required := !strings.Contains(opts, "omitempty") && kind != FieldUint && !contains(r.command.optional, name)
			spec.fields = append(spec.fields, CommandField{Name: name, Kind: kind, Required: required, index: i})
		}
		commandSpecs[r.zero.EventType()] = spec
		commandOrder = append(commandOrder, r.zero.EventType())
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// CommandTypes returns the command types in a fixed order (a fresh slice).
func CommandTypes() []Type { return append([]Type(nil), commandOrder...) }

// CommandFields returns the fields of command type t in wire order (a
// fresh slice), or false when t is not a command.
func CommandFields(t Type) ([]CommandField, bool) {
	s, ok := commandSpecs[t]
	return append([]CommandField(nil), s.fields...), ok
}

func commandTypeList() string {
	out := make([]string, len(commandOrder))
	for i, t := range commandOrder {
		out[i] = string(t)
	}
	return strings.Join(out, ", ")
}

func fieldNames(fs []CommandField) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return strings.Join(out, ", ")
}

// DecodeCommand decodes one command object into its payload, in value
// form. Decoding is strict: an unknown or missing type, an unknown,
// duplicated or missing field and a value of the wrong JSON type are
// errors that name the type or field (and list what is accepted); they
// match ErrInvalidCommand. Whether the command makes sense for the
// session (known preset, known tool) is decided when it is appended.
func DecodeCommand(data []byte) (Payload, error) {
	obj, keys, err := readObject(data)
	if err != nil {
		return nil, invalidCommand("command: %v", err)
	}
	rawType, ok := obj["type"]
	if !ok {
		return nil, invalidCommand(`command has no "type": use one of %s`, commandTypeList())
	}
	var typ string
	if err := json.Unmarshal(rawType, &typ); err != nil || rawType[0] != '"' {
		return nil, invalidCommand(`command field "type" must be a string naming one of %s, got %s`, commandTypeList(), clip.Raw(rawType))
	}
	t := Type(typ)
	spec, ok := commandSpecs[t]
	if !ok {
		return nil, invalidCommand("unknown command type %q: use one of %s", clip.String(typ, clip.Max), commandTypeList())
	}
	return decodeFields(t, spec, obj, keys)
}

// decodeFields decodes the fields of a command object of type t (obj and
// its keys, "type" skipped) into its payload.
func decodeFields(t Type, spec commandSpec, obj map[string]json.RawMessage, keys []string) (Payload, error) {
	for _, k := range keys {
		if k == "type" {
			continue
		}
		if !hasField(spec.fields, k) {
			return nil, invalidCommand("command %s: unknown field %q: its fields are %s", t, clip.String(k, clip.Max), fieldNames(spec.fields))
		}
	}
	v := reflect.New(spec.typ).Elem()
	for _, f := range spec.fields {
		raw, ok := obj[f.Name]
		if !ok {
			if f.Required {
				return nil, invalidCommand("command %s: field %q is required (%s)", t, f.Name, f.Kind.Want())
			}
			continue
		}
		if err := setField(t, f, v.Field(f.index), raw); err != nil {
			return nil, err
		}
	}
	return v.Interface().(Payload), nil
}

func hasField(fs []CommandField, name string) bool {
	for _, f := range fs {
		if f.Name == name {
			return true
		}
	}
	return false
}

// setField decodes raw, the value of field f of a command of type t,
// into dst.
func setField(t Type, f CommandField, dst reflect.Value, raw json.RawMessage) error {
	bad := func() error {
		return invalidCommand("command %s: field %q must be %s, got %s", t, f.Name, f.Kind.Want(), clip.Raw(raw))
	}
	null := string(raw) == "null"
	switch f.Kind {
	case FieldNullableBool:
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
		dst.Set(reflect.ValueOf(b))
	case FieldString, FieldNullableString:
		s := ""
		if !(null && f.Kind == FieldNullableString) {
			if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
				return bad()
			}
		}
		dst.SetString(s)
	case FieldNames:
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
					return invalidCommand("command %s: field %q[%d] must be a string, got %s", t, f.Name, i, clip.Raw(it))
				}
				list = append(list, s)
			}
		}
		dst.Set(reflect.ValueOf(list))
	case FieldUint:
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
		dst.SetUint(n)
	case FieldIntent, FieldOverride:
		if null {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		p := reflect.New(dst.Type().Elem())
		if err := dec.Decode(p.Interface()); err != nil || raw[0] != '{' {
			return bad()
		}
		dst.Set(p)
	case FieldCheckpoint:
		if null {
			return nil
		}
		obj, keys, err := readObject(raw)
		if err != nil {
			return bad()
		}
		if _, ok := obj["type"]; ok {
			return invalidCommand("command %s: field %q is a checkpoint object without \"type\"", t, f.Name)
		}
		p, err := decodeFields(TypeCheckpointRecorded, commandSpecs[TypeCheckpointRecorded], obj, keys)
		if err != nil {
			return fmt.Errorf("command %s: field %q: %w", t, f.Name, err)
		}
		cp := p.(CheckpointRecorded)
		dst.Set(reflect.ValueOf(&cp))
	case FieldContract:
		if null {
			return nil
		}
		items, err := readArray(raw)
		if err != nil {
			return bad()
		}
		contract := make([]ContractEntry, 0, len(items))
		for i, it := range items {
			e, err := decodeContractEntry(it)
			if err != nil {
				return invalidCommand("command %s: field %q[%d]: %v", t, f.Name, i, err)
			}
			contract = append(contract, e)
		}
		dst.Set(reflect.ValueOf(contract))
	}
	return nil
}

func decodeContractEntry(raw json.RawMessage) (ContractEntry, error) {
	obj, keys, err := readObject(raw)
	if err != nil {
		return ContractEntry{}, err
	}
	for _, k := range keys {
		if k != "name" && k != "hash" {
			return ContractEntry{}, fmt.Errorf("unknown field %q: its fields are name, hash", clip.String(k, clip.Max))
		}
	}
	var e ContractEntry
	for _, f := range []struct {
		name string
		dst  *string
	}{{"name", &e.Name}, {"hash", &e.Hash}} {
		raw, ok := obj[f.name]
		if !ok {
			return e, fmt.Errorf("field %q is required (a string)", f.name)
		}
		if raw[0] != '"' || json.Unmarshal(raw, f.dst) != nil {
			return e, fmt.Errorf("field %q must be a string, got %s", f.name, clip.Raw(raw))
		}
	}
	return e, nil
}

// EncodeCommand encodes a payload as a command object: "type" first, then
// every field of the payload in wire order (nil lists and unset switches
// as null), so that DecodeCommand gives the same payload back. A value
// that is not a payload of this package matches ErrInvalidCommand.
func EncodeCommand(p Payload) ([]byte, error) {
	v, ok := PayloadValue(p)
	if !ok {
		return nil, invalidCommand("encode command: %T is not an events payload: use one of %s", p, commandTypeList())
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

// readObject reads one JSON object and nothing after it, refusing
// duplicate keys. It returns the raw values and the keys in order.
func readObject(data []byte) (map[string]json.RawMessage, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("not valid JSON: %v", syntaxMessage(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("want a JSON object, got %s", clip.Raw(data))
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
