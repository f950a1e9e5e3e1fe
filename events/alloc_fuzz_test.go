package events_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/toolintent/engine/events"
)

// Decoding untrusted bytes allocates at most a fixed
// multiple of the input plus a constant, whatever the bytes claim
// (lengths, counts, nesting). Seeds: the shapes that crashed the API's
// msgpack decoder.
func FuzzDecodeAllocBound(f *testing.F) {
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0x91}, 4096))
	f.Add(bytes.Repeat([]byte{'['}, 4096))
	f.Add([]byte(`{"version":"v","tools":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = events.Decode(data)
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(128*len(data)+256<<10); got > limit {
			t.Fatalf("decoding %d bytes allocated %d bytes, over %d", len(data), got, limit)
		}
	})
}
