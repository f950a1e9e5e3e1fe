package api

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
)

func TestDecodeCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want events.Payload
	}{
		{`{"type":"ToolsToggled","enabled":true}`, events.ToolsToggled{Enabled: ptr(true)}},
		{`{"type":"ToolsToggled","enabled":false}`, events.ToolsToggled{Enabled: ptr(false)}},
		{`{"enabled":null,"type":"ToolsToggled"}`, events.ToolsToggled{}},
		{`{"type":"WebSearchSet","enabled":true}`, events.WebSearchSet{Enabled: ptr(true)}},
		{`{"type":"PresetChosen","preset":"research"}`, events.PresetChosen{Preset: "research"}},
		{`{"type":"PresetChosen","preset":null}`, events.PresetChosen{}},
		{`{"type":"ToolDisabled","name":"bash"}`, events.ToolDisabled{Name: "bash"}},
		{`{"type":"ToolEnabled","name":"bash"}`, events.ToolEnabled{Name: "bash"}},
		{`{"type":"ToolsPicked","names":["grep","read_file"]}`, events.ToolsPicked{Names: []string{"grep", "read_file"}}},
		{`{"type":"ToolsPicked","names":null}`, events.ToolsPicked{}},
		{`{"type":"ToolsPicked","names":[]}`, events.ToolsPicked{Names: []string{}}},
		{`{"type":"DeferredLoaded","names":["send_message"],"turn":3}`, events.DeferredLoaded{Names: []string{"send_message"}, Turn: 3}},
		{`{"type":"TurnStarted"}`, events.TurnStarted{}},
		{`{"type":"TurnEnded","turn":1e1}`, events.TurnEnded{Turn: 10}},
		{`{"type":"CheckpointRecorded","contract_hash":"h","registry_version":"v","contract":[{"name":"a","hash":"x"}]}`,
			events.CheckpointRecorded{ContractHash: "h", RegistryVersion: "v", Contract: []events.ContractEntry{{Name: "a", Hash: "x"}}}},
	} {
		got, err := service.DecodeCommand([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.in, got, tc.want)
		}
		enc, err := service.EncodeCommand(got)
		if err != nil {
			t.Fatal(err)
		}
		again, err := service.DecodeCommand(enc)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%s: round trip through %s gives %#v, %v", tc.in, enc, again, err)
		}
	}
}

func TestDecodeCommandErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"Nope"}`, `unknown command type "Nope": use one of ToolsToggled, WebSearchSet, PresetChosen, ToolDisabled, ToolEnabled, ToolsPicked, DeferredLoaded, DeferredEvicted, TurnStarted, TurnEnded, CheckpointRecorded, PermissionGranted`},
		{`{"enabled":true}`, `command has no "type"`},
		{`{"type":3}`, `field "type" must be a string`},
		{`{"type":"ToolsToggled"}`, `command ToolsToggled: field "enabled" is required`},
		{`{"type":"ToolsToggled","enabled":1}`, `field "enabled" must be true, false or null, got 1`},
		{`{"type":"ToolsToggled","enabled":true,"enabled":false}`, `field "enabled" appears twice`},
		{`{"type":"ToolsToggled","enabled":true,"x":1}`, `command ToolsToggled: unknown field "x": its fields are enabled`},
		{`{"type":"ToolDisabled","name":["bash"]}`, `field "name" must be a string, got ["bash"]`},
		{`{"type":"ToolsPicked","names":"bash"}`, `field "names" must be an array of strings or null`},
		{`{"type":"ToolsPicked","names":["a",2]}`, `field "names"[1] must be a string, got 2`},
		{`{"type":"TurnStarted","turn":-1}`, `field "turn" must be a non-negative integer, got -1`},
		{`{"type":"TurnStarted","turn":1.5}`, `field "turn" must be a non-negative integer, got 1.5`},
		{`{"type":"CheckpointRecorded","contract_hash":"h","registry_version":"v","contract":[{"name":"a"}]}`, `field "contract"[0]: field "hash" is required`},
		{`["ToolsToggled"]`, `want a JSON object`},
		{`{"type":"ToolsToggled","enabled":true} x`, `unexpected data after the object`},
		{`{"type":"ToolsToggled",`, `not valid JSON`},
	} {
		_, err := service.DecodeCommand([]byte(tc.in))
		if err == nil {
			t.Errorf("%s: no error", tc.in)
			continue
		}
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v does not match ErrBadRequest", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, err, tc.want)
		}
	}
}

func TestEncodeCommandEveryType(t *testing.T) {
	for _, typ := range events.CommandTypes() {
		if _, ok := events.CommandFields(typ); !ok {
			t.Errorf("event type %s has no command fields", typ)
		}
	}
	// A compaction snapshot is written by the engine, never sent as
	// a command.
	if _, err := service.DecodeCommand([]byte(`{"type":"SessionCompacted"}`)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("SessionCompacted decoded as a command: %v", err)
	}
	if _, err := service.EncodeCommand(nil); err == nil {
		t.Error("EncodeCommand(nil) succeeded")
	}
	b, _ := service.EncodeCommand(&events.ToolDisabled{Name: "bash"})
	if string(b) != `{"type":"ToolDisabled","name":"bash"}` {
		t.Errorf("pointer payload encodes as %s", b)
	}
	b, _ = service.EncodeCommand(events.TurnStarted{Turn: 2})
	if string(b) != `{"type":"TurnStarted","turn":2}` {
		t.Errorf("TurnStarted encodes as %s", b)
	}
}

// The command decoder never panics, refuses with ErrBadRequest and a
// message, and what it accepts encodes back to the same payload.
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range []string{
		`{"type":"ToolsToggled","enabled":true}`,
		`{"type":"ToolsPicked","names":["read_file","grep"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := service.DecodeCommand(data)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) || err.Error() == "" {
				t.Fatalf("error %v does not match ErrBadRequest", err)
			}
			return
		}
		if _, ok := events.PayloadValue(p); !ok {
			t.Fatalf("decoded %T is not a payload", p)
		}
		enc, err := service.EncodeCommand(p)
		if err != nil {
			t.Fatalf("encode %#v: %v", p, err)
		}
		if !json.Valid(enc) {
			t.Fatalf("encoding %q is not JSON", enc)
		}
		again, err := service.DecodeCommand(enc)
		if err != nil {
			t.Fatalf("decode own encoding %s: %v", enc, err)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip: %#v -> %s -> %#v", p, enc, again)
		}
	})
}

// The seed corpus is in testdata/fuzz/FuzzDecodeCommand; every seed that
// names a valid command must decode.
func TestFuzzSeedsPresent(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecodeCommand/*")
	if err != nil || len(files) < 10 {
		t.Fatalf("seed corpus: %d files, %v", len(files), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.HasPrefix(string(b), "go test fuzz v1\n") {
			t.Errorf("%s is not a fuzz corpus file: %v", f, err)
		}
	}
}
