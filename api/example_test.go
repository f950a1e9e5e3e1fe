package api_test

import (
	"fmt"

	"github.com/toolintent/engine/service"
)

// Commands in JSON decode strictly into event payloads.
func ExampleDecodeCommand() {
	p, err := service.DecodeCommand([]byte(`{"type":"ToolDisabled","name":"bash"}`))
	fmt.Printf("%#v %v\n", p, err)
	_, err = service.DecodeCommand([]byte(`{"type":"ToolzToggled","enabled":true}`))
	fmt.Println(err)
	_, err = service.DecodeCommand([]byte(`{"type":"ToolsToggled","enabled":"on"}`))
	fmt.Println(err)
	// Output:
	// events.ToolDisabled{Name:"bash"} <nil>
	// unknown command type "ToolzToggled": use one of ToolsToggled, WebSearchSet, PresetChosen, ToolDisabled, ToolEnabled, ToolsPicked, DeferredLoaded, DeferredEvicted, TurnStarted, TurnEnded, CheckpointRecorded, PermissionGranted, SessionDeleted
	// command ToolsToggled: field "enabled" must be true, false or null, got "on"
}
