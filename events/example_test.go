package events_test

import (
	"errors"
	"fmt"

	"github.com/toolintent/engine/events"
)

// An event round trip through the wire format.
func ExampleEncode() {
	on := true
	e := events.Envelope{
		ID:      "01KDVDNA000000000000000001", // normally events.New or events.NewID
		Session: "sess_01",
		Channel: "web",
		Actor:   "user:alice",
		TimeMs:  1767225600000,
		Payload: events.ToolsToggled{Enabled: &on},
	}
	b, err := events.Encode(e)
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := events.Decode(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(b), "bytes")
	fmt.Println(d.ID, d.Session, d.Channel, d.Actor, d.Version, d.Type)
	fmt.Println(*d.Payload.(events.ToolsToggled).Enabled)
	// Output:
	// 129 bytes
	// 01KDVDNA000000000000000001 sess_01 web user:alice 2 ToolsToggled
	// true
}

// A version-1 event is upcast on read; an unknown type is
// reported with its header and skipped.
func ExampleDecode() {
	// {"id":..., "session":"sess_01", "time_ms":1767225600014, "v":1,
	//  "type":"PresetChosen", "data":{"toolset":"coding"}}
	v1 := []byte("\x86\xa2id\xba01KDVDNA000000000000000014\xa7session\xa7sess_01\xa7time_ms\xcf\x00\x00\x01\x9b\x76\xda\xa8\x0e\xa1v\x01\xa4type\xacPresetChosen\xa4data\x81\xa7toolset\xa6coding")
	e, err := events.Decode(v1)
	fmt.Printf("%v v%d %+v %q\n", err, e.Version, e.Payload, e.Channel)

	unknown := []byte("\x85\xa2id\xba01KDVDNA000000000000000017\xa7session\xa7sess_01\xa7time_ms\x01\xa1v\x02\xa4type\xa4Nope")
	_, err = events.Decode(unknown)
	var de *events.DecodeError
	if errors.As(err, &de) && errors.Is(err, events.ErrUnknownType) {
		fmt.Println("skip", de.ID, de.Session, de.Type)
	}
	// Output:
	// <nil> v2 {Preset:coding} ""
	// skip 01KDVDNA000000000000000017 sess_01 Nope
}
