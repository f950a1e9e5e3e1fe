package jetstream_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// BenchmarkAppendOne is one synchronous append of one event to one
// session: the log's write path alone (its reconnect and fault
// watch), with the process's CPU time (client and embedded server) per
// append.
func BenchmarkAppendOne(b *testing.B) {
	srv := natstest.Server(b)
	nc := natstest.Connect(b, srv.ClientURL())
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Faults: srv.Faults})
	if err != nil {
		b.Fatal(err)
	}
	var last uint64
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := l.Append(ctx, "bench", last, toggled("bench"))
		if err != nil {
			b.Fatal(err)
		}
		last = res.Last
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
