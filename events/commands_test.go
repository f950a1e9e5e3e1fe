package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The command table is derived from the payload structs'
// json tags; this is the field list the API documented and decoded by
// hand before (api/command.go's commandFields), so the derivation changes
// no command's fields, order, kind or required flag.
func TestCommandFieldsFromPayloads(t *testing.T) {
	type f = CommandField
	want := map[Type][]f{
		TypeToolsToggled:    {{Name: "enabled", Kind: FieldNullableBool, Required: true}},
		TypeWebSearchSet:    {{Name: "enabled", Kind: FieldNullableBool, Required: true}},
		TypePresetChosen:    {{Name: "preset", Kind: FieldNullableString, Required: true}},
		TypeToolDisabled:    {{Name: "name", Kind: FieldString, Required: true}},
		TypeToolEnabled:     {{Name: "name", Kind: FieldString, Required: true}},
		TypeToolsPicked:     {{Name: "names", Kind: FieldNames, Required: true}},
		TypeDeferredLoaded:  {{Name: "names", Kind: FieldNames, Required: true}, {Name: "turn", Kind: FieldUint}},
		TypeDeferredEvicted: {{Name: "names", Kind: FieldNames, Required: true}, {Name: "turn", Kind: FieldUint}, {Name: "reason", Kind: FieldString}},
		TypeTurnStarted: {{Name: "turn", Kind: FieldUint}, {Name: "intent", Kind: FieldIntent}, {Name: "profile", Kind: FieldString},
			{Name: "override", Kind: FieldOverride}, {Name: "registry_version", Kind: FieldString}, {Name: "contract_hash", Kind: FieldString}, {Name: "provider", Kind: FieldString}},
		// The engine's turn end carries its checkpoint.
		TypeTurnEnded: {{Name: "turn", Kind: FieldUint}, {Name: "checkpoint", Kind: FieldCheckpoint}},
		TypeCheckpointRecorded: {{Name: "loaded_deferred_tools", Kind: FieldNames}, {Name: "contract_hash", Kind: FieldString, Required: true},
			{Name: "registry_version", Kind: FieldString, Required: true}, {Name: "turn", Kind: FieldUint}, {Name: "contract", Kind: FieldContract}},
		// The user's answer to an ask.
		TypePermissionGranted: {{Name: "by", Kind: FieldString, Required: true}, {Name: "scope", Kind: FieldString, Required: true},
			{Name: "tool", Kind: FieldString, Required: true}, {Name: "turn", Kind: FieldUint}},
		// Delete closes the session; reason is optional.
		TypeSessionDeleted: {{Name: "reason", Kind: FieldString}},
	}
	if len(CommandTypes()) != len(want) {
		t.Errorf("command types %v, want the %d of the table", CommandTypes(), len(want))
	}
	for typ, fs := range want {
		got, ok := CommandFields(typ)
		if !ok {
			t.Errorf("%s is not a command", typ)
			continue
		}
		strip := func(xs []CommandField) string {
			out := ""
			for _, x := range xs {
				out += fmt.Sprintf("%s:%d:%v ", x.Name, x.Kind, x.Required)
			}
			return out
		}
		if strip(got) != strip(fs) {
			t.Errorf("%s fields %s, want %s", typ, strip(got), strip(fs))
		}
	}
}

// The intent and override kinds list the fields of intent.Intent and
// TurnOverride, as the API reference shows them.
func TestFieldKindWantNamesStructFields(t *testing.T) {
	if got := FieldIntent.Want(); got != `an intent object {"enabled","web_search","preset","disabled","picked"} or null` {
		t.Error(got)
	}
	if got := FieldOverride.Want(); got != `an override object {"kind","intent","allowed","names"} or null` {
		t.Error(got)
	}
}

// A command decodes into its payload through the table and encodes back;
// refusals match ErrInvalidCommand and name the field.
func TestDecodeCommandThroughTable(t *testing.T) {
	p, err := DecodeCommand([]byte(`{"type":"DeferredLoaded","names":["a"],"turn":3}`))
	if err != nil || fmt.Sprint(p) != fmt.Sprint(DeferredLoaded{Names: []string{"a"}, Turn: 3}) {
		t.Fatalf("%#v %v", p, err)
	}
	b, err := EncodeCommand(p)
	if err != nil || string(b) != `{"type":"DeferredLoaded","names":["a"],"turn":3}` {
		t.Fatalf("%s %v", b, err)
	}
	_, err = DecodeCommand([]byte(`{"type":"ToolDisabled","name":3}`))
	if !errors.Is(err, ErrInvalidCommand) || err.Error() != `command ToolDisabled: field "name" must be a string, got 3` {
		t.Fatalf("%v", err)
	}
}

// A TurnEnded carries its checkpoint as an object with the fields of
// a CheckpointRecorded command; it round-trips through EncodeCommand (so
// history entries show it), a TurnEnded without one encodes as before,
// and a bad checkpoint object is refused naming the field.
func TestTurnEndedCheckpointCommand(t *testing.T) {
	cp := &CheckpointRecorded{Loaded: []string{"send_message"}, ContractHash: "h", RegistryVersion: "v", Turn: 2,
		Contract: []ContractEntry{{Name: "send_message", Hash: "x"}}}
	b, err := EncodeCommand(TurnEnded{Turn: 2, Checkpoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeCommand(b)
	if te, ok := p.(TurnEnded); err != nil || !ok || te.Checkpoint == nil || fmt.Sprint(*te.Checkpoint) != fmt.Sprint(*cp) || te.Turn != 2 {
		t.Fatalf("%s decoded to %#v, %v", b, p, err)
	}
	if b, err := EncodeCommand(TurnEnded{Turn: 2}); err != nil || string(b) != `{"type":"TurnEnded","turn":2}` {
		t.Fatalf("%s %v", b, err)
	}
	if p, err := DecodeCommand([]byte(`{"type":"TurnEnded","checkpoint":null}`)); err != nil || p.(TurnEnded).Checkpoint != nil {
		t.Fatalf("null checkpoint: %#v %v", p, err)
	}
	for in, want := range map[string]string{
		`{"type":"TurnEnded","checkpoint":3}`:                                                      `field "checkpoint" must be a checkpoint object`,
		`{"type":"TurnEnded","checkpoint":{"contract_hash":"h"}}`:                                  `field "registry_version" is required`,
		`{"type":"TurnEnded","checkpoint":{"contract_hash":"h","registry_version":"v","x":1}}`:     `unknown field "x"`,
		`{"type":"TurnEnded","checkpoint":{"type":"CheckpointRecorded","contract_hash":"h"}}`:      `without "type"`,
		`{"type":"TurnEnded","checkpoint":{"contract_hash":"h","registry_version":"v","turn":-1}}`: `field "turn" must be a non-negative integer`,
	} {
		_, err := DecodeCommand([]byte(in))
		if !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalidCommand naming %q", in, err, want)
		}
	}
}

// The engine re-decides after a conflict only blind writes of one intent
// field, set additions and deletes, and only in value form.
func TestRetrySafe(t *testing.T) {
	safe := map[Type]bool{TypeToolsToggled: true, TypeWebSearchSet: true, TypePresetChosen: true,
		TypeToolDisabled: true, TypeToolEnabled: true, TypeDeferredLoaded: true, TypeSessionDeleted: true}
	for i := range payloadTable {
		zero := payloadTable[i].zero
		if got := RetrySafe(zero); got != safe[zero.EventType()] {
			t.Errorf("RetrySafe(%s) = %v, want %v", zero.EventType(), got, !got)
		}
	}
	if RetrySafe(&ToolsToggled{}) || RetrySafe(nil) {
		t.Error("a pointer or nil payload is retry-safe")
	}
}
