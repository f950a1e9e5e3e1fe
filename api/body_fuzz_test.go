package api

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/internal/msgpackjson"
	"github.com/toolintent/engine/wire"
)

// bodyAllocOracle bounds what decoding a request body may allocate: a
// fixed multiple of the body plus a constant.
func bodyAllocOracle(n int) uint64 { return uint64(96*n + 256<<10) }

// The msgpack (and JSON) request body decoder of both
// transports never panics, refuses what it cannot decode with
// ErrBadRequest, and allocates at most bodyAllocOracle of its input, for
// every request type.
func FuzzDecodeBody(f *testing.F) {
	seed := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed(map[string]any{"session": "s1", "commands": []any{map[string]any{"type": "ToolsToggled", "enabled": true}}}), true, uint8(0))
	f.Add(seed(map[string]any{"session": "s1", "override": map[string]any{"kind": "names", "names": []any{"grep"}}}), true, uint8(2))
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, true, uint8(0))
	f.Add(bytes.Repeat([]byte{0x91}, 4096), true, uint8(0))
	f.Add([]byte(`{"session":"s1","commands":[{"type":"ToolDisabled","name":"bash"}]}`), false, uint8(0))
	f.Add([]byte(`{"session":"s1"}`), false, uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, mp bool, opIndex uint8) {
		op := operations[int(opIndex)%len(operations)]
		ct := MIMEJSON
		if mp {
			ct = wire.MIMEMsgpack
		}
		req := op.NewRequest()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := msgpackjson.DecodeBody(data, ct, req)
		runtime.ReadMemStats(&after)
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Fatalf("decode %x as %s for %s: error %v is not ErrBadRequest", data, ct, op.Name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > bodyAllocOracle(len(data)) {
			t.Fatalf("decoding %d bytes (%s, %s) allocated %d bytes, over the oracle %d", len(data), ct, op.Name, got, bodyAllocOracle(len(data)))
		}
	})
}

// The body shapes that crashed the engine are refused
// with a 400 naming the limit, and trailing bytes are an error.
func TestDecodeBodyHostileMsgpack(t *testing.T) {
	good, _ := msgpack.Marshal(map[string]any{"session": "s1"})
	for name, c := range map[string]struct {
		data    []byte
		mention string
	}{
		"array32 header of 4G elements": {[]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, "claims 4294967295 elements"},
		"1 MiB of nested arrays":        {bytes.Repeat([]byte{0x91}, 1<<20), "nesting deeper than 16"},
		"trailing bytes":                {append(append([]byte{}, good...), 0xc0), "trailing bytes"},
		"integer keys":                  {[]byte{0x81, 0x01, 0xc0}, "not a string"},
	} {
		var req wire.IntentRequest
		err := msgpackjson.DecodeBody(c.data, wire.MIMEMsgpack, &req)
		if !errors.Is(err, ErrBadRequest) || !bytes.Contains([]byte(err.Error()), []byte(c.mention)) {
			t.Errorf("%s: %v, want a bad request mentioning %q", name, err, c.mention)
		}
	}
	var req wire.IntentRequest
	if err := msgpackjson.DecodeBody(good, wire.MIMEMsgpack, &req); err != nil || req.Session != "s1" {
		t.Fatalf("good msgpack body: %+v, %v", req, err)
	}
}
