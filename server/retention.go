package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/service"
)

// ParseRetainDuration parses a retention duration: Go's units (h, m, s,
// ...) plus d for days of 24 hours, combinable ("90d", "36h", "1d12h",
// "30m"). It refuses an empty, zero or negative value.
func ParseRetainDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, fmt.Errorf("empty duration: want a positive duration such as 90d, 36h or 30m")
	}
	var days time.Duration
	if i := strings.IndexByte(in, 'd'); i >= 0 {
		n, err := strconv.ParseUint(in[:i], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q: want a positive duration such as 90d, 36h or 1d12h (a whole number of days before d; units d, h, m, s)", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		if days/(24*time.Hour) != time.Duration(n) || days < 0 {
			return 0, fmt.Errorf("%q: too many days (want a duration such as 90d)", s)
		}
		in = in[i+1:]
	}
	var rest time.Duration
	if in != "" {
		var err error
		if rest, err = time.ParseDuration(in); err != nil {
			return 0, fmt.Errorf("%q: want a positive duration such as 90d, 36h or 1d12h (units d, h, m, s)", s)
		}
	}
	d := days + rest
	if d <= 0 || d < days {
		return 0, fmt.Errorf("%q: want a positive duration such as 90d, 36h or 30m", s)
	}
	return d, nil
}

// startRetention starts the retention of idle sessions when
// cfg.RetainIdle is set: every cfg.RetainTick it examines at most
// cfg.RetainBatch sessions, on the engine that runs the projection
// (runner; one
// engine of a stream at a time; two at once during a hand-over are
// harmless, their deletes and compactions are conditional). An erase or
// compact action without an eraser is refused: the operator asked for
// data to be purged. The
// returned channel closes when the loop has stopped (after ctx ends).
func startRetention(ctx context.Context, cfg Config, eng *service.Engine, runner func() bool, m *metrics.Metrics, log zerolog.Logger) (<-chan struct{}, error) {
	done := make(chan struct{})
	if cfg.RetainIdle <= 0 {
		close(done)
		return done, nil
	}
	r, err := eng.NewRetention(service.RetentionConfig{
		Idle: cfg.RetainIdle, Action: service.RetentionAction(cfg.RetainAction), Batch: cfg.RetainBatch,
		Observe: m.ObserveRetention,
	})
	if err != nil {
		close(done)
		return done, fmt.Errorf("start retention: %w", err)
	}
	if cfg.NoProjection {
		log.Warn().Msg("retention: --retain-idle is set but --no-projection: retention runs on the engine that runs the projection, not here")
		close(done)
		return done, nil
	}
	rc := r.Config()
	log.Info().Str("idle", rc.Idle.String()).Str("action", string(rc.Action)).Int("batch", rc.Batch).
		Str("tick", cfg.RetainTick.String()).Msg("retention of idle sessions on")
	go func() { defer close(done); r.Run(ctx, cfg.RetainTick, runner) }()
	return done, nil
}
