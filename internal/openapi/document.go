package openapi

import (
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/toolintent/engine/wire"
)

// Op is one operation of the document: its route and the Go types of its
// request and reply.
type Op struct {
	wire.Operation
	Request, Reply reflect.Type
}

// Spec is what the document is generated from: the transports' operation
// table and where the document itself is served.
type Spec struct {
	// Version is the API version (info.version).
	Version string
	// Path is where the document is served (GET).
	Path string
	// Ops are the operations, in order.
	Ops []Op
	// Live are the streaming operations (Server-Sent Events); LiveEvent
	// is the type of one event's data.
	Live      []wire.Operation
	LiveEvent reflect.Type
	// Types are passed to SchemaOf.
	Types Types
	// Fields bound the request fields every operation shares.
	Fields FieldRules
}

// Document returns the OpenAPI 3.1 document of the HTTP API of s: the
// routes, bodies (JSON or msgpack), parameters and error envelope the
// engine serves, from the operation table and the JSON Schemas of its
// request and reply types.
func Document(s Spec) map[string]any {
	paths := map[string]any{}
	for _, op := range s.Ops {
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[op.Path] = item
		}
		for _, m := range op.Methods {
			item[strings.ToLower(m)] = s.operation(op, m)
		}
	}
	for _, o := range s.Live {
		paths[o.Path] = map[string]any{"get": s.live(o)}
	}
	paths[s.Path] = map[string]any{"get": map[string]any{
		"operationId": "openapi",
		"summary":     "This document.",
		"responses": map[string]any{
			"200":     map[string]any{"description": "the OpenAPI 3.1 document", "content": map[string]any{wire.MIMEJSON: map[string]any{"schema": Schema{"type": "object"}}}},
			"default": errorResponseRef,
		},
	}}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "Tool-configuration engine API",
			"version": s.Version,
			"description": "The HTTP side of the engine's API (docs/api.md); the same operations are NATS micro endpoints " +
				"<prefix>.<channel>.<subject> (x-nats-subject) with the same JSON bodies, the path fields in the body. " +
				"Request bodies may also be application/msgpack, and replies are msgpack when Accept names it.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": map[string]any{"Error": errorSchema()},
			"responses": map[string]any{"Error": map[string]any{
				"description": "an error reply: the code is stable, the message names the bad value; 429 and 503 carry Retry-After",
				"headers": map[string]any{wire.HeaderRetryAfter: map[string]any{
					"description": "seconds to wait before retrying (429 and 503 only)", "schema": Schema{"type": "integer", "minimum": 0}}},
				"content": bodies(Schema{"$ref": "#/components/schemas/Error"}),
			}},
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "a token of the engine's --http-tokens file; without that file the API takes no token (loopback only)"}},
		},
		"security": []any{map[string]any{"bearer": []string{}}, map[string]any{}},
	}
}

var errorResponseRef = map[string]any{"$ref": "#/components/responses/Error"}

// errorSchema is the error envelope of every error reply.
func errorSchema() Schema {
	return Schema{
		"type":     "object",
		"required": []string{"error"},
		"properties": Schema{"error": Schema{
			"type":     "object",
			"required": []string{"code", "message"},
			"properties": Schema{
				"code":     Schema{"type": "string", "enum": slices.Clone(wire.Codes)},
				"message":  Schema{"type": "string"},
				"expected": Schema{"type": "integer", "minimum": 0, "description": "conflict only: the sequence the request expected"},
				"actual":   Schema{"type": "integer", "minimum": 0, "description": "conflict only: the session's sequence"},
			},
			"additionalProperties": false,
		}},
		"additionalProperties": false,
	}
}

// operation is one method of an operation's path.
func (s Spec) operation(op Op, method string) map[string]any {
	id := op.Name
	if method != op.Method() {
		id += "-" + strings.ToLower(method) // resolve: GET and POST, the client sends POST
	}
	path := PathNames(op.Path)
	var params []any
	for _, n := range path {
		params = append(params, pathParam(n))
	}
	params = append(params,
		map[string]any{"name": wire.HeaderChannel, "in": "header", "required": false, "schema": Schema{"type": "string"},
			"description": "the writing channel (without tokens; with them it must be the token's channel or absent)"},
		map[string]any{"name": wire.HeaderActor, "in": "header", "required": false, "schema": Schema{"type": "string"},
			"description": "the writing actor; wins over the body's actor"})
	if op.Name == wire.OpAppend.Name {
		params = append(params, map[string]any{"name": wire.HeaderIdempotencyKey, "in": "header", "required": false,
			"schema":      Schema{"type": "string", "minLength": 1, "maxLength": wire.MaxIdempotencyKey},
			"description": "an idempotency key: any string of 1 to 255 bytes (a UUID, say), case-sensitive; as the body's event_id"})
	}
	req := s.requestBody(op, path)
	o := map[string]any{
		"operationId":    id,
		"summary":        op.Summary,
		"x-nats-subject": op.Subject,
		"responses": map[string]any{
			"200":     map[string]any{"description": "the reply (msgpack with the same keys when Accept names application/msgpack)", "content": bodies(SchemaOf(op.Reply, s.Types))},
			"default": errorResponseRef,
		},
	}
	if method == http.MethodGet || method == http.MethodDelete {
		props, _ := req["properties"].(Schema)
		required, _ := req["required"].([]string)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			s := props[n].(Schema)
			p := map[string]any{"name": n, "in": "query", "required": slices.Contains(required, n)}
			if scalar(s) {
				p["schema"] = s
			} else { // a structured value is JSON in the parameter
				p["content"] = map[string]any{wire.MIMEJSON: map[string]any{"schema": s}}
			}
			params = append(params, p)
		}
	} else {
		o["requestBody"] = map[string]any{"required": false, "content": bodies(req)}
	}
	o["parameters"] = params
	return o
}

// requestBody is the request's schema without its path fields, which
// travel in the path over HTTP; unknown fields are refused.
func (s Spec) requestBody(op Op, path []string) Schema {
	sc := s.Fields.Apply(SchemaOf(op.Request, s.Types))
	if props, ok := sc["properties"].(Schema); ok {
		props = copyOf(props)
		for _, n := range path {
			delete(props, n)
		}
		sc["properties"] = props
	}
	if req, ok := sc["required"].([]string); ok {
		req = slices.DeleteFunc(slices.Clone(req), func(n string) bool { return slices.Contains(path, n) })
		if len(req) == 0 {
			delete(sc, "required")
		} else {
			sc["required"] = req
		}
	}
	sc["additionalProperties"] = false
	return sc
}

func copyOf(m Schema) Schema {
	out := make(Schema, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// scalar reports a schema whose values are one string, number or boolean.
func scalar(s Schema) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "string" || t == "integer" || t == "number" || t == "boolean"
	case []string:
		return !slices.Contains(t, "object") && !slices.Contains(t, "array")
	}
	return false
}

// live is a live operation: a text/event-stream reply.
func (s Spec) live(o wire.Operation) map[string]any {
	params := []any{
		map[string]any{"name": "after_seq", "in": "query", "required": false, "schema": Schema{"type": "integer", "minimum": 0},
			"description": "start with the event after this stream sequence (default: the first event)"},
		map[string]any{"name": wire.LiveMessageParam, "in": "query", "required": false, "schema": Schema{"type": "boolean"},
			"description": "true: every event comes as the SSE default type message (no event: line), so that a browser EventSource's onmessage receives it; its type is data's type, and the end and error of the stream come as data {\"type\":\"end\"} and {\"type\":\"error\",\"error\":{...}}"},
		map[string]any{"name": wire.HeaderLastEventID, "in": "header", "required": false, "schema": Schema{"type": "string", "pattern": "^[0-9]+$"},
			"description": "the id (sequence) of the last event seen; wins over after_seq"},
	}
	if strings.Contains(o.Path, "{session}") {
		params = append([]any{pathParam("session")}, params...)
	}
	return map[string]any{
		"operationId":    o.Name,
		"summary":        o.Summary,
		"parameters":     params,
		"x-nats-subject": o.Subject,
		"responses": map[string]any{
			"200": map[string]any{
				"description": "Server-Sent Events: per event `id: <seq>`, `event: <type>`, `data: <LiveEvent JSON>` (with message=true no `event:` line); a `: heartbeat` comment every 15 s; `event: end` after a watched session's SessionDeleted; `event: error` (data: the error envelope) on a read failure",
				"content": map[string]any{wire.MIMEEventStream: map[string]any{
					"schema":       Schema{"type": "string"},
					"x-event-data": SchemaOf(s.LiveEvent, s.Types),
				}},
			},
			"default": errorResponseRef,
		},
	}
}

// pathParam is the path parameter n: a session id follows the session-id
// rule.
func pathParam(n string) map[string]any {
	sc := Schema{"type": "string"}
	if n == "session" {
		sc = SessionIDSchema()
	}
	return map[string]any{"name": n, "in": "path", "required": true, "schema": sc}
}

// bodies is a body's content: JSON, or msgpack with the same fields.
func bodies(s Schema) map[string]any {
	return map[string]any{wire.MIMEJSON: map[string]any{"schema": s}, wire.MIMEMsgpack: map[string]any{"schema": s}}
}

// PathNames are the {wildcards} of a route pattern.
func PathNames(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(seg, "{"), "}"))
		}
	}
	return out
}
