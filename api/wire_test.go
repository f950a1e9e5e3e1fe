package api_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/wire"
)

// The engine serves wire's operation table
// (subjects, methods, paths), the one the Go client calls.
func TestOperationsMatchEngine(t *testing.T) {
	ops := api.Operations()
	allOps := wire.Operations()
	if len(ops) != len(allOps) {
		t.Fatalf("engine has %d operations, wire %d", len(ops), len(allOps))
	}
	for _, e := range ops {
		i := slices.IndexFunc(allOps, func(o wire.Operation) bool { return o.Name == e.Name })
		if i < 0 {
			t.Errorf("client has no operation %s", e.Name)
			continue
		}
		o := allOps[i]
		if o.Subject != e.Subject || o.Path != e.Path || !slices.Contains(e.Methods, o.Method()) {
			t.Errorf("%s: wire %s %s %s, engine %s %v %s", e.Name, o.Subject, o.Method(), o.Path, e.Subject, e.Methods, e.Path)
		}
	}
}

// Every wire request and reply type (what the Go
// client sends and decodes) has exactly the fields of the engine's JSON
// Schema of that operation (the schema nats micro info shows), at every
// depth: where the engine still answers with a core type (a turn view, an
// explanation, a budget table), this keeps the wire type true to it.
func TestTypesMatchSchemas(t *testing.T) {
	types := map[string][2]reflect.Type{
		"append":          {reflect.TypeFor[wire.AppendRequest](), reflect.TypeFor[wire.AppendReply]()},
		"intent":          {reflect.TypeFor[wire.IntentRequest](), reflect.TypeFor[wire.Session]()},
		"resolve":         {reflect.TypeFor[wire.ResolveRequest](), reflect.TypeFor[wire.TurnView]()},
		"history":         {reflect.TypeFor[wire.HistoryRequest](), reflect.TypeFor[wire.History]()},
		"explain":         {reflect.TypeFor[wire.ExplainRequest](), reflect.TypeFor[wire.Explanation]()},
		"explain-batch":   {reflect.TypeFor[wire.ExplainBatchRequest](), reflect.TypeFor[wire.ExplainBatchReply]()},
		"resume":          {reflect.TypeFor[wire.ResumeRequest](), reflect.TypeFor[wire.ResumeReply]()},
		"turn-begin":      {reflect.TypeFor[wire.BeginTurnRequest](), reflect.TypeFor[wire.TurnView]()},
		"turn-discover":   {reflect.TypeFor[wire.DiscoverRequest](), reflect.TypeFor[wire.DiscoverReply]()},
		"turn-dispatch":   {reflect.TypeFor[wire.DispatchRequest](), reflect.TypeFor[wire.TurnView]()},
		"turn-inspect":    {reflect.TypeFor[wire.TurnRequest](), reflect.TypeFor[wire.DispatchRecord]()},
		"turn-call-check": {reflect.TypeFor[wire.CallCheckRequest](), reflect.TypeFor[wire.CallCheckReply]()},
		"turn-checkpoint": {reflect.TypeFor[wire.TurnRequest](), reflect.TypeFor[wire.CheckpointReply]()},
		"turn-end":        {reflect.TypeFor[wire.TurnRequest](), reflect.TypeFor[wire.CheckpointReply]()},
		"sessions":        {reflect.TypeFor[struct{}](), reflect.TypeFor[wire.SessionList]()},
		"registry":        {reflect.TypeFor[wire.RegistryRequest](), reflect.TypeFor[wire.RegistryInfo]()},
		"budget":          {reflect.TypeFor[struct{}](), reflect.TypeFor[wire.BudgetTable]()},
		"registry-diff":   {reflect.TypeFor[wire.RegistryDiffRequest](), reflect.TypeFor[wire.RegistryImpact]()},
		"session-delete":  {reflect.TypeFor[wire.DeleteRequest](), reflect.TypeFor[wire.DeleteReply]()},
		"session-compact": {reflect.TypeFor[wire.CompactRequest](), reflect.TypeFor[wire.CompactReply]()},
	}
	for _, o := range wire.Operations() {
		ts, ok := types[o.Name]
		if !ok {
			t.Errorf("no types listed for %s", o.Name)
			continue
		}
		compareSchema(t, o.Name+" request", api.RequestSchema(o.Name), ts[0])
		compareSchema(t, o.Name+" reply", api.ResponseSchema(o.Name), ts[1])
	}
}

var (
	rawType     = reflect.TypeFor[json.RawMessage]()
	commandType = reflect.TypeFor[wire.Command]()
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
