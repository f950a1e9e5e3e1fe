package jetstream_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/jetstream"
)

// BenchmarkViewsFlush is what a projection's catch-up window costs to
// store (the replay line): one op writes 10,000 views of 300 bytes
// into a fresh views bucket, beside the same messages published with no
// reply at all (the server's ingest alone: no acknowledgement to encode,
// send, route or decode), waited for by one acknowledged put after them.
// When the two are close, the cost of a flush is the bucket's store, not
// the acknowledgements. On the 2-core machine of 2026-12-05: 8.8-9.1 µs
// per view through PutAllSeq, 6.7-7.5 with no reply: the 10,000 views of
// engine bench's replay take 67 ms at least, beside a fold of its 100,000
// events that takes about what the raw consumer does (275 vs 257 ms).
//
//	go test -run '^$' -bench ViewsFlush -benchtime 20x -count 5 ./jetstream/
func BenchmarkViewsFlush(b *testing.B) {
	const views, size = 10_000, 300
	l, nc := openLog(b)
	ctx := context.Background()
	value := make([]byte, size)
	puts := make([]jetstream.Put, views)
	for i := range puts {
		puts[i] = jetstream.Put{Key: fmt.Sprintf("rep-%05d", i), Value: value}
	}
	bucket := 0
	fresh := func(b *testing.B) *jetstream.Views {
		b.StopTimer()
		defer b.StartTimer()
		bucket++
		v, err := l.OpenViews(ctx, fmt.Sprintf("F%04d", bucket))
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	stored := func(b *testing.B, v *jetstream.Views, want uint64) {
		b.StopTimer()
		defer b.StartTimer()
		if last, err := v.LastSeq(ctx); err != nil || last != want {
			b.Fatalf("views bucket holds %d messages (%v), want %d", last, err, want)
		}
	}
	report := func(b *testing.B, cpu0 float64) {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/views, "µs/view")
		b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(b.N)/views, "cpu-µs/view")
	}
	b.Run("PutAllSeq", func(b *testing.B) {
		cpu0 := cpuSeconds()
		for b.Loop() {
			v := fresh(b)
			if _, err := v.PutAllSeq(ctx, puts); err != nil {
				b.Fatal(err)
			}
			stored(b, v, views)
		}
		report(b, cpu0)
	})
	b.Run("no-reply", func(b *testing.B) {
		cpu0 := cpuSeconds()
		for b.Loop() {
			v := fresh(b)
			subj := "$KV." + v.Bucket() + "."
			for _, p := range puts[:views-1] {
				if err := nc.PublishMsg(&nats.Msg{Subject: subj + p.Key, Data: p.Value}); err != nil {
					b.Fatal(err)
				}
			}
			// One connection's messages reach the stream in order: the
			// last one's acknowledgement comes after every one before it
			// is stored.
			if _, err := v.PutAllSeq(ctx, puts[views-1:]); err != nil {
				b.Fatal(err)
			}
			stored(b, v, views)
		}
		report(b, cpu0)
	})
}

func cpuSeconds() float64 { return cpuTime().Seconds() }

// BenchmarkViewsGet is one view read (Views.Get: a direct get of the
// key's last message, asked again after a reconnect or a silent
// replica) beside the same direct get as one plain request on the
// connection (engine bench's remote session read line, without the
// view's decoding). On the 2-core machine of 2026-12-05 Views.Get took
// 45-46 µs and the plain request 52-54; the same get sent on the log's
// reply subscription (the appends' ackMux, no watcher goroutine) took
// 54 µs, and was not kept: elapsed time here is the wake-ups of the
// goroutines on both sides, not the client's CPU.
func BenchmarkViewsGet(b *testing.B) {
	l, nc := openLog(b)
	ctx := context.Background()
	v, err := l.OpenViews(ctx, "GET")
	if err != nil {
		b.Fatal(err)
	}
	if err := v.PutAll(ctx, []jetstream.Put{{Key: "s1", Value: make([]byte, 222)}}); err != nil {
		b.Fatal(err)
	}
	b.Run("Views.Get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if data, err := v.Get(ctx, "s1"); err != nil || len(data) != 222 {
				b.Fatalf("get: %d bytes, %v", len(data), err)
			}
		}
	})
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		subj := "$JS.API.DIRECT.GET.KV_" + v.Bucket() + ".$KV." + v.Bucket() + ".s1"
		for b.Loop() {
			if m, err := nc.RequestWithContext(ctx, subj, nil); err != nil || len(m.Data) != 222 {
				b.Fatalf("get: %v", err)
			}
		}
	})
}
