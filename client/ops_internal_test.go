package client

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/api"
)

// #17 item 4: the client's operation table is the engine's (subjects,
// methods, paths), so the light client cannot drift from the API.
func TestOperationsMatchEngine(t *testing.T) {
	ops := api.Operations()
	if len(ops) != len(allOps) {
		t.Fatalf("engine has %d operations, client %d", len(ops), len(allOps))
	}
	for _, e := range ops {
		i := slices.IndexFunc(allOps, func(o op) bool { return o.name == e.Name })
		if i < 0 {
			t.Errorf("client has no operation %s", e.Name)
			continue
		}
		o := allOps[i]
		if o.subject != e.Subject || o.path != e.Path || !slices.Contains(e.Methods, o.method) {
			t.Errorf("%s: client %s %s %s, engine %s %v %s", e.Name, o.subject, o.method, o.path, e.Subject, e.Methods, e.Path)
		}
	}
}

// #17 item 4: every request and reply type has exactly the fields of the
// engine's JSON Schema of that operation (the schema nats micro info
// shows), at every depth.
func TestTypesMatchSchemas(t *testing.T) {
	types := map[string][2]reflect.Type{
		"append":          {reflect.TypeFor[AppendRequest](), reflect.TypeFor[AppendReply]()},
		"intent":          {reflect.TypeFor[IntentRequest](), reflect.TypeFor[Session]()},
		"resolve":         {reflect.TypeFor[ResolveRequest](), reflect.TypeFor[TurnView]()},
		"history":         {reflect.TypeFor[HistoryRequest](), reflect.TypeFor[History]()},
		"explain":         {reflect.TypeFor[ExplainRequest](), reflect.TypeFor[Explanation]()},
		"resume":          {reflect.TypeFor[ResumeRequest](), reflect.TypeFor[ResumeReply]()},
		"turn-begin":      {reflect.TypeFor[BeginTurnRequest](), reflect.TypeFor[TurnView]()},
		"turn-discover":   {reflect.TypeFor[DiscoverRequest](), reflect.TypeFor[DiscoverReply]()},
		"turn-dispatch":   {reflect.TypeFor[DispatchRequest](), reflect.TypeFor[TurnView]()},
		"turn-inspect":    {reflect.TypeFor[TurnRequest](), reflect.TypeFor[DispatchRecord]()},
		"turn-checkpoint": {reflect.TypeFor[TurnRequest](), reflect.TypeFor[CheckpointReply]()},
		"turn-end":        {reflect.TypeFor[TurnRequest](), reflect.TypeFor[CheckpointReply]()},
		"sessions":        {reflect.TypeFor[struct{}](), reflect.TypeFor[SessionList]()},
		"registry":        {reflect.TypeFor[struct{}](), reflect.TypeFor[RegistryInfo]()},
		"budget":          {reflect.TypeFor[struct{}](), reflect.TypeFor[BudgetTable]()},
	}
	for _, o := range allOps {
		ts, ok := types[o.name]
		if !ok {
			t.Errorf("no types listed for %s", o.name)
			continue
		}
		compareSchema(t, o.name+" request", api.RequestSchema(o.name), ts[0])
		compareSchema(t, o.name+" reply", api.ResponseSchema(o.name), ts[1])
	}
}

var (
	rawType     = reflect.TypeFor[json.RawMessage]()
	commandType = reflect.TypeFor[Command]()
)

func compareSchema(t *testing.T, where string, s api.Schema, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == rawType || typ == commandType {
		return // any JSON, or a command object
	}
	switch typ.Kind() {
	case reflect.Slice:
		if items, ok := s["items"].(api.Schema); ok {
			compareSchema(t, where+"[]", items, typ.Elem())
		}
		return
	case reflect.Map:
		if ap, ok := s["additionalProperties"].(api.Schema); ok {
			compareSchema(t, where+"{}", ap, typ.Elem())
		}
		return
	case reflect.Struct:
	default:
		return
	}
	props, _ := s["properties"].(api.Schema)
	if props == nil && typ.NumField() > 0 && typ.String() != "time.Time" {
		t.Errorf("%s: engine schema has no object here (%v), client has %s", where, s, typ)
		return
	}
	if typ.String() == "time.Time" {
		return
	}
	have := map[string]reflect.Type{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name != "" && name != "-" {
				have[name] = f.Type
			}
		}
	}
	walk(typ)
	for name, ps := range props {
		ft, ok := have[name]
		if !ok {
			t.Errorf("%s: field %q of the engine is missing in the client's %s", where, name, typ)
			continue
		}
		compareSchema(t, where+"."+name, ps.(api.Schema), ft)
	}
	for name := range have {
		if _, ok := props[name]; !ok {
			t.Errorf("%s: the client's %s has field %q, which the engine does not send or take", where, typ, name)
		}
	}
}
