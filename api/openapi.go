package api

import (
	"encoding/json"
	"net/http"
	"reflect"

	"github.com/toolintent/engine/internal/openapi"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Schema is a JSON Schema of a request or a reply (openapi.Schema),
// derived from the Go types of the operation table: what `nats micro info`
// shows in each endpoint's metadata (request_schema, response_schema) and
// what docs/api.md lists, so that neither can drift from the code.
type Schema = openapi.Schema

// schemaTypes are the types that encode themselves: an event's payload as
// a reply carries it (a command object, or a SessionCompacted's fields)
// and an append's commands.
var schemaTypes = openapi.Types{
	reflect.TypeFor[service.Command](): openapi.PayloadSchema,
	reflect.TypeFor[service.Commands](): func() Schema {
		return Schema{"type": "array", "items": openapi.CommandSchema(), "minItems": 1, "maxItems": wire.MaxCommands}
	},
}

// schemaOf is the JSON Schema of a request or reply type.
func schemaOf(t reflect.Type) Schema { return openapi.SchemaOf(t, schemaTypes) }

// RequestSchema returns the JSON Schema of an operation's request, or nil
// when the operation is unknown, with the shared field bounds
// (fieldRules: the session-id rule, the history page limit, the provider
// values).
func RequestSchema(op string) Schema {
	o, ok := opsByName[op]
	if !ok {
		return nil
	}
	return fieldRules.Apply(schemaOf(o.ReqType))
}

// fieldRules bound the request fields every operation shares.
var fieldRules = openapi.FieldRules{Providers: service.Providers, DefaultProvider: service.ProviderAnthropic}

// ResponseSchema returns the JSON Schema of an operation's reply, or nil
// when the operation is unknown.
func ResponseSchema(op string) Schema {
	o, ok := opsByName[op]
	if !ok {
		return nil
	}
	return schemaOf(o.RespType)
}

// PathOpenAPI is where the HTTP gateway serves OpenAPI(): the same
// authentication as the read operations (with a tokens file, any of its
// tokens, read-only ones included; without one, none).
const PathOpenAPI = "/v1/openapi.json"

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API
// (openapi.Document of the operation table), so that any language's
// generator gets the routes, bodies, parameters and error envelope the
// engine serves. A test validates every documented operation's real
// requests and replies, success and error, against it.
func OpenAPI() map[string]any {
	spec := openapi.Spec{Version: Version, Path: PathOpenAPI, Live: wire.LiveOperations(),
		LiveEvent: reflect.TypeFor[service.LiveEvent](), Types: schemaTypes, Fields: fieldRules}
	for _, op := range operations {
		spec.Ops = append(spec.Ops, openapi.Op{Operation: op.Operation, Request: op.ReqType, Reply: op.RespType})
	}
	return openapi.Document(spec)
}

// openAPIJSON is OpenAPI() encoded once.
var openAPIJSON = func() []byte {
	b, err := json.MarshalIndent(OpenAPI(), "", "  ")
	if err != nil {
		panic("api: OpenAPI document: " + err.Error())
	}
	return append(b, '\n')
}()

// serveOpenAPI answers GET PathOpenAPI with the read operations'
// authentication.
func (a *API) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	mp := wire.WantsMsgpack(r.Header.Get("Accept"))
	if _, err := a.authenticate(opsByName[wire.OpSessions.Name], r); err != nil {
		e := errorOf(err)
		if e.Code == wire.CodeUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="engine"`)
		}
		a.writeError(w, mp, e)
		return
	}
	w.Header().Set("Content-Type", MIMEJSON)
	_, _ = w.Write(openAPIJSON)
}
