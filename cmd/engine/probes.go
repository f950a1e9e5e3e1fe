package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

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
	// Acknowledged events missing from the log (issue 12, item 3): what
	// this engine's projection found, or the runner recorded.
	checks = append(checks, health.Check{Name: "log_damage", Fn: d.proj.Damaged})
	if d.projecting {
		checks = append(checks, health.Check{Name: "projection", Fn: func(ctx context.Context) error {
			if !d.proj.Runner() {
				// Standing by (issue 12, item 7): ready while the runner,
				// in another engine, keeps the views within maxLag.
				w, _, err := d.proj.Meta().Watermark(ctx)
				if err != nil {
					return err
				}
				last, err := d.log.LastStreamSeq(ctx)
				if err != nil {
					return nil // the stream check says so
				}
				if last > w && last-w > d.maxLag {
					return fmt.Errorf("standing by: the projection runner has folded %d of %d events, more than %d behind (is a runner alive?)", w, last, d.maxLag)
				}
				return nil
			}
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
		return map[string]any{"nats": nc.Status().String(), "applied_seq": proj.Applied(), "projection_runner": proj.Runner()}
	}
}

// diskChecks are the readiness checks of the embedded server's disk
// (issue 12, item 4): free space above --min-free, and JetStream running.
// While the disk has space again and the server had disabled JetStream
// (a write that hit ENOSPC), a watcher enables it again: no restart.
func diskChecks(ctx context.Context, disk *jetstream.DiskGuard, srv *jetstream.Embedded, jlog *jetstream.Log, log zerolog.Logger) []health.Check {
	if disk == nil || srv == nil {
		return nil
	}
	// Restarting JetStream loads every stream from disk again: only with
	// room to do so (else a stream fails to load), and again until the
	// event stream answers.
	room := max(disk.MinFree, 16<<20)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		full, restart := false, false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := disk.Check()
			switch {
			case err != nil && !full:
				log.Error().Err(err).Msg("disk full: appends refused until space returns")
			case err == nil && full:
				log.Warn().Msg("disk has space again: appends accepted")
			}
			full = err != nil
			fault := srv.WriteFault()
			if fault != "" || !srv.JetStreamEnabled() {
				restart = true
			}
			if !restart {
				continue
			}
			if free, ferr := jetstream.StatfsFree(disk.Dir); ferr != nil || free < room {
				continue
			}
			if rerr := srv.ReenableJetStream(); rerr != nil {
				log.Error().Err(rerr).Str("fault", fault).Msg("the store failed a write (out of space?): cannot restart JetStream")
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, serr := jlog.LastStreamSeq(cctx)
			cancel()
			if serr == nil {
				restart = false
				log.Warn().Str("fault", fault).Msg("the store had failed a write (out of space?): JetStream restarted, appends accepted again")
			} else {
				log.Error().Err(serr).Msg("JetStream restarted after a write fault but the event stream does not answer yet: trying again")
				_ = srv.Server().ShutdownJetStream()
			}
		}
	}()
	return []health.Check{
		{Name: "disk", Fn: func(context.Context) error { return disk.Check() }},
		{Name: "jetstream", Fn: func(context.Context) error {
			if !srv.JetStreamEnabled() {
				return errors.New("JetStream is disabled on the embedded server (out of space or resources); the engine enables it again when the disk has space")
			}
			if f := srv.WriteFault(); f != "" {
				return fmt.Errorf("the store failed a write (%s): appends fail until the disk has space again, when the engine restarts JetStream", f)
			}
			return nil
		}},
	}
}

// parseBytes reads a size: a number with an optional B, KiB, MiB, GiB,
// KB, MB or GB suffix.
func parseBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := uint64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 64MiB, 1GiB, 0)", s)
	}
	return n * mult, nil
}
