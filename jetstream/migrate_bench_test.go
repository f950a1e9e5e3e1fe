package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// BenchmarkMigrate migrates a one-stream store of n sessions (one event
// each, published beforehand, untimed) to 3 partitions, Settle 1 ms, on
// an embedded server: "migrate" is the whole of Migrate, "listing" the
// baseline of the work no migration avoids, the server listing the same
// stream's subjects once (stream info with a subject filter). Each op
// populates a fresh server. It also reports the stored set's bytes, and
// the time OpenPartitions takes on the migrated store ("open-ms", the
// set loaded) and on a store of 3 partitions that started so
// ("fresh-open-ms"). go test -run '^$' -bench Migrate -benchtime 1x
// ./jetstream; -bench 'Migrate/sessions=1000000' for the million.
func BenchmarkMigrate(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("sessions=%d/migrate", n), func(b *testing.B) { benchMigrate(b, n, false) })
		b.Run(fmt.Sprintf("sessions=%d/listing", n), func(b *testing.B) { benchMigrate(b, n, true) })
	}
}

func benchMigrate(b *testing.B, n int, listingOnly bool) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		srv := natstest.Server(b)
		nc := natstest.Connect(b, srv.ClientURL())
		one, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
		if err != nil {
			b.Fatal(err)
		}
		js, err := njs.New(nc, njs.WithPublishAsyncMaxPending(4096))
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			s := fmt.Sprintf("sess-%07d", i)
			data, err := events.Encode(toggled(s))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.PublishAsync(one.Subject(s), data); err != nil {
				b.Fatal(err)
			}
			if i%2048 == 2047 || i == n-1 {
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					b.Fatal("publishing the sessions stalled for a minute")
				}
			}
		}
		stream, err := js.Stream(ctx, one.StreamName())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if listingOnly {
			lctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
			info, err := stream.Info(lctx, njs.WithSubjectFilter("tools.events.*"))
			cancel()
			if err != nil {
				b.Fatalf("listing: %v", err)
			}
			if len(info.State.Subjects) != n {
				b.Fatalf("listing: %d subjects, want %d", len(info.State.Subjects), n)
			}
			continue
		}
		rep, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3, Settle: time.Millisecond})
		if err != nil || rep.Sessions != n {
			b.Fatalf("migrate: %+v, %v, want %d sessions", rep, err, n)
		}
		b.StopTimer()
		b.ReportMetric(float64(8*n), "set-bytes")
		start := time.Now()
		if _, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1e3, "open-ms")
		start = time.Now()
		if _, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Prefix: "fresh", Partitions: 3}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1e3, "fresh-open-ms")
		b.StartTimer()
	}
}
