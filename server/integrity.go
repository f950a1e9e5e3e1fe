package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// watchIntegrity checks the event stream (and, when projecting, the
// projection's consumer, from the time the projection first caught up:
// before, its feed may not exist yet) now and every interval until ctx
// ends: a deleted or reconfigured stream or consumer is logged
// as an error and makes the returned readiness input fail, naming what
// changed.
func watchIntegrity(ctx context.Context, jlog *jetstream.Log, proj *projection.Projection, projecting bool, interval time.Duration, log zerolog.Logger) func() error {
	var last atomic.Pointer[error]
	var feedUp bool
	check := func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := jlog.CheckStream(cctx)
		feedUp = feedUp || (projecting && proj.CaughtUp())
		if err == nil && feedUp {
			err = jlog.CheckFeed(cctx, projection.DefaultDurable)
		}
		if err != nil && !errors.Is(err, jetstream.ErrDrift) {
			err = fmt.Errorf("cannot check the stream: %w", err)
		}
		prev := last.Swap(&err)
		switch {
		case err != nil && (prev == nil || *prev == nil || (*prev).Error() != err.Error()):
			log.Error().Err(err).Msg("log integrity: not ready")
		case err == nil && prev != nil && *prev != nil:
			log.Warn().Msg("log integrity: restored")
		}
	}
	check()
	every(ctx, interval, check)
	return func() error {
		if p := last.Load(); p != nil {
			return *p
		}
		return nil
	}
}
