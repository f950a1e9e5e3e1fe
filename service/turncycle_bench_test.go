package service_test

import (
	"context"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// BenchmarkTurnCycle runs whole turns on one session in-process against a
// real embedded server (#28): begin, a discovery every 4th turn, dispatch,
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
		if i%4 == 0 && len(v.Catalog) > 0 {
			if _, err := e.Discover(ctx, "tc", origin, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{v.Catalog[0]}}}); err != nil {
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
