// Package openapi derives JSON Schemas and the OpenAPI 3.1 document of the
// engine's HTTP API from Go types by reflection: the transports (package
// api) pass in their operation table, so that the document, the schemas
// `nats micro info` shows and docs/api.md all come from one source.
// It holds no transport: it writes maps that encode as JSON.
package openapi

import (
	"encoding"
	"encoding/json"
	"fmt"
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
// as a date-time, wire.Until as a sequence or a time, events.Payload as an
// event payload (PayloadSchema), and the types of special as given.
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
		return PayloadSchema()
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

// PayloadSchema is an event's payload as history entries and live events
// show it: a command object (CommandSchema) or, for an event type that no
// append takes (SessionCompacted, written by compaction), an object of
// that payload's fields and its type.
func PayloadSchema() Schema {
	one := CommandSchema()["oneOf"].([]any)
	for _, t := range events.Types() {
		if _, ok := events.CommandFields(t); ok {
			continue
		}
		rt, ok := nonCommandPayloads[t]
		if !ok {
			panic("openapi: event type " + string(t) + " is neither a command nor in nonCommandPayloads")
		}
		s := nullableArrays(SchemaOf(rt, nil))
		props := s["properties"].(Schema)
		props["type"] = Schema{"const": string(t)}
		req, _ := s["required"].([]string)
		s["required"] = append([]string{"type"}, req...)
		s["additionalProperties"] = false // as a command object's
		one = append(one, s)
	}
	return Schema{"oneOf": one}
}

// nonCommandPayloads are the payload types of the event types that are
// not commands.
var nonCommandPayloads = map[events.Type]reflect.Type{
	events.TypeSessionCompacted: reflect.TypeFor[events.SessionCompacted](),
}

// nullableArrays lets every array of s (and of the objects within it) be
// null as well: a payload's nil list encodes as null, as a command's
// names do.
func nullableArrays(s Schema) Schema {
	if s["type"] == "array" {
		s["type"] = []string{"array", "null"}
	}
	if items, ok := s["items"].(Schema); ok {
		nullableArrays(items)
	}
	if props, ok := s["properties"].(Schema); ok {
		for _, p := range props {
			if ps, ok := p.(Schema); ok {
				nullableArrays(ps)
			}
		}
	}
	return s
}

// FieldRules are the bounds that request fields of the same name share
// in every operation.
type FieldRules struct {
	// Providers are the provider values; DefaultProvider is the one a
	// request without provider gets.
	Providers       []string
	DefaultProvider string
}

// Apply sets the shared bounds on the fields of s, a request's schema: a
// session id follows the session-id rule, a history limit is 0 (the
// default page) to wire.MaxHistoryPage, a provider is one of r's. It
// returns s.
func (r FieldRules) Apply(s Schema) Schema {
	props, _ := s["properties"].(Schema)
	if props == nil {
		return s
	}
	if props["session"] != nil {
		props["session"] = SessionIDSchema()
	}
	if props["limit"] != nil {
		props["limit"] = Schema{"type": "integer", "minimum": 0, "maximum": wire.MaxHistoryPage,
			"description": fmt.Sprintf("the most entries of the page: 0 or absent for %d, at most %d", wire.DefaultHistoryPage, wire.MaxHistoryPage)}
	}
	if props["provider"] != nil && len(r.Providers) > 0 {
		props["provider"] = Schema{"type": "string", "enum": slices.Clone(r.Providers),
			"description": fmt.Sprintf("the provider rendering (absent: %s)", r.DefaultProvider)}
	}
	return s
}

// SessionIDPattern is the session-id rule (events.ValidateSessionID) as
// a JSON Schema pattern.
var SessionIDPattern = fmt.Sprintf("^[A-Za-z0-9_-]{1,%d}$", events.MaxSessionLen)

// SessionIDSchema is the schema of a session id.
func SessionIDSchema() Schema {
	return Schema{"type": "string", "pattern": SessionIDPattern, "maxLength": events.MaxSessionLen, "minLength": 1,
		"description": fmt.Sprintf("a session id: 1 to %d characters of A-Z a-z 0-9 _ - (one NATS subject token)", events.MaxSessionLen)}
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
	case events.FieldCheckpoint: // a TurnEnded's checkpoint: a CheckpointRecorded's fields
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
