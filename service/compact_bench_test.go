package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
)

// The cold load of a long session (a log read of every event and its
// fold, what an engine without the session's view does) against the same
// session compacted (the snapshot and a 10-event tail). msgs/op is what
// the log read, whatever the machine's speed.
func BenchmarkColdLoadCompacted(b *testing.B) {
	e, log := benchStack(b)
	ctx := context.Background()
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	e.SetEraser(x)
	const n = 5000
	for _, s := range []string{"long", "compact"} {
		for i := 0; i < n; i += 1000 {
			cmds := make([]events.Payload, 1000)
			for j := range cmds {
				name := fmt.Sprintf("t%d", (i+j)%50)
				if (i+j)%3 == 0 {
					cmds[j] = events.ToolEnabled{Name: name}
				} else {
					cmds[j] = events.ToolDisabled{Name: name}
				}
			}
			appendAged(b, log, s, time.Now(), cmds...)
		}
	}
	if _, err := e.Compact(ctx, "compact", compactor, "bench"); err != nil {
		b.Fatal(err)
	}
	tail := make([]events.Payload, 10)
	for i := range tail {
		tail[i] = events.ToolDisabled{Name: fmt.Sprintf("u%d", i)}
	}
	appendAged(b, log, "compact", time.Now(), tail...)
	for _, s := range []string{"long", "compact"} {
		b.Run(s, func(b *testing.B) {
			var st aggregate.State
			before := log.MessagesRead()
			for b.Loop() {
				recs, err := log.ReadSession(ctx, s, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				st = aggregate.Fold(s, storedOf(recs))
			}
			b.ReportMetric(float64(log.MessagesRead()-before)/float64(b.N), "msgs/op")
			if len(st.Intent.Disabled) == 0 {
				b.Fatal("nothing folded")
			}
		})
	}
}
