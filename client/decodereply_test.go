package client

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolintent/engine/wire"
)

// replyTypes are the reply shapes FuzzDecodeReply decodes into: the turn
// view (a raw rendering, nested lists and objects), the checkpoint reply,
// history entries, an error body and a generic value.
var replyTypes = []func() any{
	func() any { return new(wire.TurnView) },
	func() any { return new(wire.CheckpointReply) },
	func() any { return new([]wire.HistoryEntry) },
	func() any { return new(wire.Error) },
	func() any { return new(any) },
	func() any { return new(map[string]json.RawMessage) },
}

// DecodeReply (go-json) gives what encoding/json gives: the same
// value when encoding/json accepts the input, an error when it refuses it.
// TestAPIDoc holds it to the same on every operation's real reply.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"session":"s","seq":3,"rendering":[{"name":"a","input_schema":{"type":"object"}}],"tools":["a"],"budget":{"resident":3}}`))
	f.Add([]byte(`{"session":"s","checkpoint":{"loaded_deferred_tools":[],"contract":[{"name":"a","hash":"00"}]}}`))
	f.Add([]byte(`[{"seq":1,"type":"ToolEnabled","payload":{"name":"x"}},{"seq":2}]`))
	f.Add([]byte(`{"error":{"code":"conflict","message":"m","expected":1,"actual":2}}`))
	f.Add([]byte(`{"session":"\u00e9\ud83d\ude00","seq":-1}`))
	f.Add([]byte(`{"rendering":[1,2,}`))
	f.Add([]byte(`{"Session":"case","SEQ":2}`))
	f.Add([]byte(`{"session":"a","session":"b"}`))
	f.Add([]byte("{\"session\":\"\xff\"}"))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newOut := range replyTypes {
			want, got := newOut(), newOut()
			werr := json.Unmarshal(data, want)
			gerr := DecodeReply(data, got)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%T from %q: encoding/json error %v, DecodeReply error %v", want, data, werr, gerr)
			}
			if werr == nil && !reflect.DeepEqual(want, got) {
				t.Fatalf("%T from %q:\nencoding/json %#v\nDecodeReply   %#v", want, data, want, got)
			}
		}
	})
}
