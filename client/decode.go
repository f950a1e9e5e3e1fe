package client

import gojson "github.com/goccy/go-json"

// DecodeReply decodes a JSON reply of the engine into out, as
// encoding/json.Unmarshal would (the same values, an error for the same
// malformed input), with github.com/goccy/go-json: a turn view's 40 KB
// rendering (a json.RawMessage) took encoding/json 500 µs to scan, half
// of an HTTP turn/begin as a Go client sees it; go-json decodes the whole
// reply in 35 µs (#28). Both transports of Client decode with it.
// TestAPIDoc holds the two to the same result on every operation's real
// reply over both transports, FuzzDecodeReply on any input.
func DecodeReply(data []byte, out any) error {
	return gojson.Unmarshal(data, out)
}
