package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// probeDeps are what the readiness checks look at.
type probeDeps struct {
	nc         *nats.Conn
	log        *jetstream.Log
	proj       *projection.Projection
	projecting bool
	maxLag     uint64 // events the projection may be behind once caught up
	extra      []health.Check
}

// newProbes builds the checker behind /healthz and /readyz (issue 12,
// item 5): readiness is the NATS connection, the stream, the projection
// caught up (then within maxLag), plus the extra checks (log integrity,
// disk, ...), each named in the reply.
func newProbes(d probeDeps) *health.Checker {
	var caughtUp atomic.Bool
	checks := []health.Check{
		{Name: "nats", Fn: func(context.Context) error {
			if !d.nc.IsConnected() {
				return fmt.Errorf("NATS connection is %s", d.nc.Status())
			}
			return nil
		}},
		{Name: "stream", Fn: func(ctx context.Context) error {
			_, err := d.log.LastStreamSeq(ctx)
			return err
		}},
	}
	if d.projecting {
		checks = append(checks, health.Check{Name: "projection", Fn: func(ctx context.Context) error {
			if d.proj.CaughtUp() {
				caughtUp.Store(true)
				return nil
			}
			applied := d.proj.Applied()
			if !caughtUp.Load() {
				return fmt.Errorf("projection catching up: folded up to sequence %d", applied)
			}
			last, err := d.log.LastStreamSeq(ctx)
			if err != nil {
				return nil // the stream check says so
			}
			if last > applied && last-applied > d.maxLag {
				return fmt.Errorf("projection %d events behind the log (folded %d of %d), more than %d", last-applied, applied, last, d.maxLag)
			}
			return nil
		}})
	}
	return health.New(health.Config{}, append(checks, d.extra...)...)
}

// liveInfo is what /healthz shows besides ok: informational, it never
// makes liveness fail.
func liveInfo(nc *nats.Conn, proj *projection.Projection) func() map[string]any {
	return func() map[string]any {
		return map[string]any{"nats": nc.Status().String(), "applied_seq": proj.Applied()}
	}
}
