package projection_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// BenchmarkReplay is a fresh projection (new durable and bucket) folding
// a stream of 20,000 events over 1,000 sessions until WaitApplied; one op is one event. allocs/event and B/event count
// every allocation of the process (the embedded server's too) during the
// replay.
func BenchmarkReplay(b *testing.B) {
	const sessions, per = 1000, 20
	srv := natstest.Server(b)
	nc := natstest.Connect(b, srv.ClientURL())
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"bash", "grep", "read_file", "web_fetch"}
	var last uint64
	for round := range per {
		for s := range sessions {
			session := fmt.Sprintf("rp%04d", s)
			var p events.Payload = events.ToolDisabled{Name: names[round%len(names)]}
			if round%2 == 1 {
				p = events.ToolEnabled{Name: names[round%len(names)]}
			}
			ar, err := l.Append(ctx, session, lastOf(b, l, session), events.New(session, "web", "u", p))
			if err != nil {
				b.Fatal(err)
			}
			last = ar.Last
		}
	}
	run := 0
	replay := func() {
		run++
		replayInto(ctx, b, l, fmt.Sprintf("rb%03d", run), last, 2*time.Minute)
	}
	replay() // warm: the server's caches
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	n := 0
	for b.Loop() {
		replay()
		n++
	}
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	events := float64(n) * sessions * per
	b.ReportMetric(events/el.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/events, "cpu-µs/event")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/events, "allocs/event")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/events, "B/event")
}

// cpuTime is the process's CPU time (user + system: projection, client
// and embedded server), which a machine busy with other work hides less
// than elapsed time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func lastOf(b *testing.B, l *jetstream.Log, session string) uint64 {
	b.Helper()
	seq, err := l.LastSeq(context.Background(), session)
	if err != nil {
		b.Fatal(err)
	}
	return seq
}

// BenchmarkReplayWindows is BenchmarkReplay at the size of engine bench's
// replay step (170,000 events over 10,000 sessions, round-robin), where a
// replay spans several catch-up windows and each window writes every
// session's view once: its CPU per event shows what the window bounds
// cost. The events are published without the engine's conditions (a
// replay reads them the same way).
func BenchmarkReplayWindows(b *testing.B) {
	const sessions, per = 10_000, 17
	srv := natstest.Server(b)
	nc := natstest.Connect(b, srv.ClientURL())
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		b.Fatal(err)
	}
	js := l.JetStream()
	for round := range per {
		for s := range sessions {
			session := fmt.Sprintf("rw%05d", s)
			env := events.New(session, "web", "u", events.ToolDisabled{Name: fmt.Sprintf("t%02d", round)})
			data, err := events.Encode(env)
			if err != nil {
				b.Fatal(err)
			}
			m := nats.NewMsg(l.Subject(session))
			m.Data = data
			m.Header.Set("Nats-Msg-Id", env.ID)
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
			if s%1000 == 999 { // under the client's 4,000 outstanding
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					b.Fatal("publish did not complete")
				}
			}
		}
	}
	last, err := l.LastStreamSeq(ctx)
	if err != nil {
		b.Fatal(err)
	}
	run := 0
	replay := func() {
		run++
		replayInto(ctx, b, l, fmt.Sprintf("rw%03d", run), last, 5*time.Minute)
	}
	cpu0 := cpuTime()
	start := time.Now()
	n := 0
	for b.Loop() {
		replay()
		n++
	}
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	events := float64(n) * float64(last)
	b.ReportMetric(events/el.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/events, "cpu-µs/event")
}

// replayInto replays the whole stream of l into a fresh projection (its
// own durable consumer and views bucket, named after name) and waits up to
// wait for it to apply sequence last.
func replayInto(ctx context.Context, b *testing.B, l *jetstream.Log, name string, last uint64, wait time.Duration) {
	b.Helper()
	p, err := projection.Open(ctx, l, projection.Config{Durable: name, Bucket: strings.ToUpper(name)})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	wctx, wcancel := context.WithTimeout(ctx, wait)
	err = p.WaitApplied(wctx, last)
	wcancel()
	cancel()
	<-done
	if err != nil {
		b.Fatal(err)
	}
}
