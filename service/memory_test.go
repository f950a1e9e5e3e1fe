package service

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// BenchmarkOpenTurnMemory measures the engine's memory per open turn held
// in its turn cache (bounded, measured memory per session): n
// sessions each with an open turn frozen as BeginTurn freezes it (the
// default registry, the defaults with one deferred tool loaded, the
// native rendering cached), and each with a last-dispatch mark. It
// reports heap bytes per open turn; it asserts nothing about time.
//
//	go test -run '^$' -bench OpenTurnMemory -benchtime 1x ./service/
func BenchmarkOpenTurnMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("turns=%d", n), func(b *testing.B) {
			for range b.N {
				b.ReportMetric(openTurnBytes(b, n), "bytes/turn")
			}
		})
	}
}

func openTurnBytes(tb testing.TB, n int) float64 {
	reg := resolver.Default()
	idx := deferral.IndexFor(reg)
	e := &Engine{ts: newTurnState(n), clock: time.Now}
	ts := &e.ts
	e.reg.Store(reg)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		session := fmt.Sprintf("session-%07d", i)
		en := i%2 == 0
		res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: &en}})
		if err != nil {
			tb.Fatal(err)
		}
		turn := deferral.FreezeIndexed(uint64(i%7+1), res, []string{"send_message"}, idx)
		turn.Load("playwright_browser")
		ot := &openTurn{turn: turn, res: res, seq: uint64(i), applied: uint64(i)}
		ts.turns.Put(session, ot)
		v := e.viewOf(stateOf(session), res, turn.Request(), ProviderAnthropic, ot)
		v.Turn, v.Frozen, v.Loaded = turn.Number(), true, turn.Loaded()
		e.markDispatch(v) // the last dispatch's classification
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if ts.turns.Len() != n {
		tb.Fatalf("cache holds %d turns, want %d", ts.turns.Len(), n)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	tb.Logf("%d open turns: %.0f heap bytes per open turn (%.1f MiB in all)", n, per, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
	runtime.KeepAlive(e)
	return per
}

func stateOf(session string) aggregate.State { return aggregate.State{Session: session} }
