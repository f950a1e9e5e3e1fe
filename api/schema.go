package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toolintent/engine/events"
)

// Schema is a JSON Schema (draft 2020-12 subset) of a request or a reply,
// derived from the Go types of the operation table: what `nats micro info`
// shows in each endpoint's metadata (request_schema, response_schema) and
// what docs/api.md lists, so that neither can drift from the code.
type Schema = map[string]any

// RequestSchema returns the JSON Schema of an operation's request, or nil
// when the operation is unknown.
func RequestSchema(op string) Schema {
	o, ok := opsByName[op]
	if !ok {
		return nil
	}
	return schemaOf(o.reqType, nil)
}

// ResponseSchema returns the JSON Schema of an operation's reply, or nil
// when the operation is unknown.
func ResponseSchema(op string) Schema {
	o, ok := opsByName[op]
	if !ok {
		return nil
	}
	return schemaOf(o.respType, nil)
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	untilType      = reflect.TypeFor[Until]()
	commandType    = reflect.TypeFor[Command]()
	commandsType   = reflect.TypeFor[Commands]()
	payloadType    = reflect.TypeFor[events.Payload]()
)

// schemaOf maps a Go type to its JSON form; seen breaks cycles.
func schemaOf(t reflect.Type, seen []reflect.Type) Schema {
	switch t {
	case rawMessageType:
		return Schema{"description": "any JSON value"}
	case timeType:
		return Schema{"type": "string", "format": "date-time"}
	case untilType:
		return Schema{"type": []string{"string", "integer"}, "description": "a stream sequence or an RFC 3339 time"}
	case commandType, payloadType:
		return commandSchema()
	case commandsType:
		return Schema{"type": "array", "items": commandSchema()}
	}
	if slices.Contains(seen, t) {
		return Schema{}
	}
	seen = append(seen, t)
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem(), seen)
	case reflect.Bool:
		return Schema{"type": "boolean"}
	case reflect.String:
		return Schema{"type": "string"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Schema{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Schema{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}
	case reflect.Slice, reflect.Array:
		return Schema{"type": "array", "items": schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return Schema{"type": "object", "additionalProperties": schemaOf(t.Elem(), seen)}
	case reflect.Struct:
		props := Schema{}
		var required []string
		var walk func(t reflect.Type)
		walk = func(t reflect.Type) {
			for f := range t.Fields() {
				name, omit, ok := jsonField(f)
				if !ok {
					continue
				}
				if f.Anonymous && name == "" {
					walk(f.Type)
					continue
				}
				if name == "" {
					name = f.Name
				}
				props[name] = schemaOf(f.Type, seen)
				if !omit {
					required = append(required, name)
				}
			}
		}
		walk(t)
		s := Schema{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return Schema{}
}

// jsonField reads a struct field's json tag: its name ("" for an
// embedded struct without a tag), whether it is omitempty, and whether it
// is encoded at all.
func jsonField(f reflect.StructField) (name string, omit, ok bool) {
	if !f.IsExported() && !f.Anonymous {
		return "", false, false
	}
	tag, has := f.Tag.Lookup("json")
	if tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	omit = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
	if !has && f.Anonymous {
		return "", false, true
	}
	return name, omit, true
}

// commandSchema is the command object of DecodeCommand: one object per
// command type with that type's fields.
func commandSchema() Schema {
	var one []any
	for _, t := range events.Types() {
		fields, ok := events.CommandFields(t)
		if !ok {
			continue
		}
		props := Schema{"type": Schema{"const": string(t)}}
		required := []string{"type"}
		for _, f := range fields {
			props[f.Name] = fieldKindSchema(f.Kind)
			if f.Required {
				required = append(required, f.Name)
			}
		}
		one = append(one, Schema{"type": "object", "properties": props, "required": required, "additionalProperties": false})
	}
	return Schema{"oneOf": one}
}

func fieldKindSchema(k events.FieldKind) Schema {
	switch k {
	case events.FieldNullableBool:
		return Schema{"type": []string{"boolean", "null"}}
	case events.FieldString:
		return Schema{"type": "string"}
	case events.FieldNullableString:
		return Schema{"type": []string{"string", "null"}}
	case events.FieldNames:
		return Schema{"type": []string{"array", "null"}, "items": Schema{"type": "string"}}
	case events.FieldUint:
		return Schema{"type": "integer", "minimum": 0}
	case events.FieldContract:
		return Schema{"type": []string{"array", "null"}, "items": Schema{"type": "object",
			"properties": Schema{"name": Schema{"type": "string"}, "hash": Schema{"type": "string"}}, "required": []string{"name", "hash"}}}
	case events.FieldCheckpoint: // a TurnEnded's checkpoint (#28): a CheckpointRecorded's fields
		return Schema{"type": []string{"object", "null"}, "properties": Schema{
			"loaded_deferred_tools": fieldKindSchema(events.FieldNames),
			"contract_hash":         Schema{"type": "string"},
			"registry_version":      Schema{"type": "string"},
			"turn":                  fieldKindSchema(events.FieldUint),
			"contract":              fieldKindSchema(events.FieldContract),
		}}
	}
	return Schema{}
}
