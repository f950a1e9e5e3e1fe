package service_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// BenchmarkTurnCycle runs whole turns on one session in-process against a
// real embedded server: begin, a discovery every 4th turn, dispatch,
// end; for profiles (-cpuprofile, -memprofile) of the turn path. It
// asserts nothing about time; engine bench's turn-cycle lines are the
// measurement.
//
//	go test -run '^$' -bench TurnCycle -benchtime 2000x -cpuprofile /tmp/tc.pprof ./service/
func BenchmarkTurnCycle(b *testing.B) {
	ctx := context.Background()
	e, _ := stackOn(b, natstest.Server(b).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	origin := service.Origin{Channel: "web", Actor: "bench"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		v, err := e.BeginTurn(ctx, "tc", origin, service.ResolveRequest{})
		if err != nil {
			b.Fatal(err)
		}
		if i%4 == 0 {
			// The first deferred tool not loaded yet, else the first
			// deferred one again (a re-search: nothing to write).
			name := deferredTool(v, true)
			if name == "" {
				b.Fatal("the default registry defers no tool")
			}
			if _, err := e.Discover(ctx, "tc", origin, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{name}}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.Dispatch(ctx, "tc", ""); err != nil {
			b.Fatal(err)
		}
		if _, err := e.EndTurn(ctx, "tc", origin); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiscoverLoad measures a discovery that loads a deferred tool
// (one DeferredLoaded append and the turn's new view), on a fresh session
// per iteration so that every search loads; for profiles.
//
//	go test -run '^$' -bench DiscoverLoad -benchtime 2000x -cpuprofile /tmp/dl.pprof ./service/
func BenchmarkDiscoverLoad(b *testing.B) {
	ctx := context.Background()
	e, _ := stackOn(b, natstest.Server(b).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	origin := service.Origin{Channel: "web", Actor: "bench"}
	b.ReportAllocs()
	for i := range b.N {
		b.StopTimer()
		s := fmt.Sprintf("dl-%d", i)
		v, err := e.BeginTurn(ctx, s, origin, service.ResolveRequest{})
		if err != nil {
			b.Fatal(err)
		}
		name := deferredTool(v, false)
		b.StartTimer()
		d, err := e.Discover(ctx, s, origin, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{name}}})
		if err != nil || len(d.Loaded) != 1 {
			b.Fatalf("discover %s: %+v %v", name, d.Loaded, err)
		}
	}
}

// deferredTool returns the first deferred tool of v's classification, or
// with unloaded the first one not loaded yet if there is one; "" when v
// defers nothing.
func deferredTool(v wire.TurnView, unloaded bool) string {
	name := ""
	for _, c := range v.Classification {
		if !c.Deferred {
			continue
		}
		if name == "" {
			name = c.Name
		}
		if !unloaded {
			break
		}
		if !c.Loaded {
			return c.Name
		}
	}
	return name
}
