package jetstream_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/toolintent/engine/logport"
)

// (last paragraph: 100k sessions grew the engine by ~4.2 KB of RSS
// per session): every write to a session the engine has not cached reads
// the session's log, and each read subscribed with SubscribeSync, whose
// channel has nats.go's 65,536 slots (512 KiB) whatever the read returns.
// Two such reads per new session at 24 concurrent writers kept the heap
// far above its live size. A read now allocates what one direct-get batch
// can hold. The bound is on bytes allocated per read of a short session
// (not on time): far below one 64k-slot channel.
func TestScanSessionAllocatesPerBatchNotPerChannelDefault(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	if _, err := l.Append(ctx, "short", 0, toggled("short")); err != nil {
		t.Fatal(err)
	}
	const reads = 50
	for _, session := range []string{"short", "never-written"} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		n := 0
		for range reads {
			if err := l.ScanSession(ctx, session, 1, 0, func(logport.Record) error { n++; return nil }); err != nil {
				t.Fatalf("scan %s: %v", session, err)
			}
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / reads
		t.Logf("%s: %d bytes allocated per read (whole process, embedded server included), %d records", session, per, n)
		if want := map[string]int{"short": reads, "never-written": 0}[session]; n != want {
			t.Fatalf("%s: read %d records in %d reads, want %d", session, n, reads, want)
		}
		// A 64k-slot channel of pointers alone is 512 KiB.
		if limit := uint64(128 << 10); per >= limit {
			t.Fatalf("%s: a read allocates %d bytes, want < %d: its subscription should hold one direct-get batch, not nats.go's default 65,536 messages", session, per, limit)
		}
	}
}
