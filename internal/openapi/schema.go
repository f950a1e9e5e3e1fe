// Package openapi derives JSON Schemas and the OpenAPI 3.1 document of the
// engine's HTTP API from Go types by reflection: the transports (package
// api) pass in their operation table, so that the document, the schemas
// `nats micro info` shows and docs/api.md all come from one source (#25).
// It holds no transport: it writes maps that encode as JSON.
package openapi

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// Schema is a JSON Schema (draft 2020-12 subset) of a request or a reply,
// derived from a Go type: what `nats micro info` shows in each endpoint's
// metadata (request_schema, response_schema) and what docs/api.md lists,
// so that neither can drift from the code.
type Schema = map[string]any

var (
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	timeType          = reflect.TypeFor[time.Time]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	untilType         = reflect.TypeFor[wire.Until]()
	payloadType       = reflect.TypeFor[events.Payload]()
)

// Types gives the schema of types whose JSON form their Go type does not
// show (a type with its own MarshalJSON): a command object, a list of
// them. Each call returns a fresh Schema.
type Types map[reflect.Type]func() Schema

// SchemaOf maps a Go type to its JSON form: struct fields by their json
// tags (omitempty ones optional), json.RawMessage as any value, time.Time
// as a date-time, wire.Until as a sequence or a time, events.Payload as a
// command object, and the types of special as given.
func SchemaOf(t reflect.Type, special Types) Schema {
	return schemaOf(t, special, nil)
}

// schemaOf is SchemaOf; seen breaks cycles.
func schemaOf(t reflect.Type, special Types, seen []reflect.Type) Schema {
	if f, ok := special[t]; ok {
		return f()
	}
	switch t {
	case rawMessageType:
		return Schema{"description": "any JSON value"}
	case timeType:
		return Schema{"type": "string", "format": "date-time"}
	case untilType:
		return Schema{"type": []string{"string", "integer"}, "description": "a stream sequence or an RFC 3339 time"}
	case payloadType:
		return CommandSchema()
	}
	if t.Kind() != reflect.Struct && t.Kind() != reflect.Pointer && t.Implements(textMarshalerType) {
		return Schema{"type": "string"} // a named kind encoded as its name (intent.OverrideKind)
	}
	if slices.Contains(seen, t) {
		return Schema{}
	}
	seen = append(seen, t)
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem(), special, seen)
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
		return Schema{"type": "array", "items": schemaOf(t.Elem(), special, seen)}
	case reflect.Map:
		return Schema{"type": "object", "additionalProperties": schemaOf(t.Elem(), special, seen)}
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
				props[name] = schemaOf(f.Type, special, seen)
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

// CommandSchema is the command object of events.DecodeCommand: one object
// per command type with that type's fields, from the events command
// table.
func CommandSchema() Schema {
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

// JSON is s encoded compactly ("{}" if it cannot be: a Schema holds only
// maps, slices, strings and numbers).
func JSON(s Schema) string {
	b, err := json.Marshal(s)
	if err != nil {
		return "{}"
	}
	return string(b)
}
