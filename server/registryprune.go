package server

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/service"
)

// startRegistryPrune starts the pruning of the registry history
// when cfg.RegistryKeep is positive: once at start-up and after each
// registry change (the history stream grew; looked at every
// cfg.RegistryPruneTick), on the engine that runs the projection (runner), it
// keeps the newest cfg.RegistryKeep versions plus every version an open
// turn or a session's last checkpoint references, and purges the others
// through the privileged connection of erases. A history stream created
// with deny_purge (by an engine without erase) is kept whole, with a log line saying why.
// The returned channel closes when the loop has stopped (after ctx ends).
func (c *store) startRegistryPrune(ctx context.Context, cfg Config, url string, jlog *jetstream.Log, eng *service.Engine, runner func() bool, m *metrics.Metrics, log zerolog.Logger) <-chan struct{} {
	done := make(chan struct{})
	if cfg.RegistryKeep <= 0 {
		log.Debug().Msg("registry history: every version kept (--registry-keep 0)")
		close(done)
		return done
	}
	if cfg.NoProjection {
		log.Info().Msg("registry history: --registry-keep is set but --no-projection: the engine that runs the projection prunes, not this one")
		close(done)
		return done
	}
	hist, err := jlog.OpenRegistryHistory(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("registry history not pruned: it cannot be opened")
		close(done)
		return done
	}
	enc, closeEnc, err := c.eraserConn(ctx, cfg, url)
	if err != nil {
		log.Warn().Err(err).Msg("registry history not pruned: no privileged connection to purge it")
		close(done)
		return done
	}
	if enc == nil {
		log.Info().Msg("registry history: pruned through the engine's own connection (an external server without --nats-erase-user): if that user may not purge, each pass logs why; give --nats-erase-user a user allowed $JS.API.STREAM.PURGE." + hist.StreamName())
	}
	pruner, err := hist.NewPruner(ctx, enc)
	if err != nil {
		closeEnc()
		if errors.Is(err, jetstream.ErrRegistryPruneDenied) {
			log.Warn().Err(err).Msg("registry history not pruned: its stream denies purge (created by an older engine); every registry version is kept")
		} else {
			log.Warn().Err(err).Msg("registry history not pruned")
		}
		close(done)
		return done
	}
	rp, err := eng.NewRegistryPrune(pruner, service.RegistryPruneConfig{Keep: cfg.RegistryKeep, Observe: m.RegistryPruneObserver()})
	if err != nil {
		closeEnc()
		log.Warn().Err(err).Msg("registry history not pruned")
		close(done)
		return done
	}
	var seen atomic.Uint64
	changed := func() bool {
		last, err := hist.LastSeq(ctx)
		if err != nil {
			return false
		}
		return seen.Swap(last) != last
	}
	changed() // start-up: the first pass runs anyway
	log.Info().Int("keep", cfg.RegistryKeep).Str("tick", cfg.RegistryPruneTick.String()).Msg("registry history pruning on")
	go func() {
		defer close(done)
		defer closeEnc()
		rp.Run(ctx, cfg.RegistryPruneTick, changed, runner)
	}()
	return done
}
