package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/internal/tick"
	"github.com/toolintent/engine/jetstream"
)

// diskChecks are the readiness checks of the embedded server's disk
// : free space above --min-free, and JetStream running.
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
	full, restart, unanswered := false, false, false
	check := func() {
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
			return
		}
		if free, ferr := jetstream.StatfsFree(disk.Dir); ferr != nil || free < room {
			return
		}
		if rerr := srv.ReenableJetStream(); rerr != nil {
			if !errors.Is(rerr, jetstream.ErrJetStreamSettling) {
				log.Error().Err(rerr).Str("fault", fault).Msg("the store failed a write (out of space?): cannot restart JetStream")
			}
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, serr := jlog.LastStreamSeq(cctx)
		cancel()
		switch {
		case serr == nil:
			restart, unanswered = false, false
			log.Warn().Str("fault", fault).Msg("the store had failed a write (out of space?): JetStream restarted, appends accepted again")
		case errors.Is(serr, natsjs.ErrStreamNotFound):
			// The stream did not load: start JetStream again, once it
			// has settled (a shutdown right after a start crashes
			// the server: jetStreamSettle in jetstream/server.go).
			log.Error().Err(serr).Msg("JetStream restarted after a write fault without the event stream: restarting it again")
			if rerr := srv.RestartJetStream(); rerr != nil && !errors.Is(rerr, jetstream.ErrJetStreamSettling) {
				log.Error().Err(rerr).Msg("cannot restart JetStream")
			}
		default:
			// Slow, not gone (CPU load): ask again at the next tick.
			if !unanswered {
				log.Warn().Err(serr).Msg("JetStream restarted after a write fault but the event stream does not answer yet: asking again")
			}
			unanswered = true
		}
	}
	go tick.Every(ctx, time.Second, func() bool { check(); return true })
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
