package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/projection"
)

type rebuildCmd struct {
	storeFlags
}

// Help is kong's long help of the subcommand.
func (c *rebuildCmd) Help() string {
	return "Deletes the projection's durable feed and folds the whole log into the session views again, from the first event, then exits. " +
		"Views are only ever derived from the log, so this is safe; run it with no engine serving the same data directory " +
		"(the embedded server's store is locked) or, against --nats, with the engines' projections stopped. Progress is shown on a terminal."
}

func (c *rebuildCmd) Run(ctx context.Context, log zerolog.Logger) error {
	jlog, _, closeLog, err := c.openLog(ctx, log, "127.0.0.1:0", "interval")
	if err != nil {
		return err
	}
	defer closeLog()
	last, err := jlog.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	cfg := projection.Config{Logger: log.With().Str("component", "projection").Logger()}
	if err := jlog.ResetFeed(ctx, projection.DefaultDurable); err != nil {
		return err
	}
	prog := newProgress()
	start := time.Now()
	var p *projection.Projection
	cfg.OnBatch = func(int, time.Duration, uint64) {
		done := p.Folded()
		rate := float64(done) / time.Since(start).Seconds()
		prog.Update("rebuild: %d/%d events folded (%.0f/s)", done, last, rate)
	}
	p, err = projection.Open(ctx, jlog, cfg)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(runCtx) }()
	waitErr := p.WaitApplied(ctx, last)
	cancel()
	if err := <-errc; err != nil {
		return err
	}
	if waitErr != nil {
		return fmt.Errorf("rebuild stopped at sequence %d of %d: %w", p.Applied(), last, waitErr)
	}
	el := time.Since(start)
	prog.Done("rebuild: %d events folded in %s", p.Folded(), el.Round(time.Millisecond))
	fmt.Printf("rebuilt views from %d events (stream sequence %d) in %s; %d undecodable events skipped, %d events rejected (see docs/semantics.md#events-the-engine-does-not-apply)\n", p.Folded(), last, el.Round(time.Millisecond), p.Skipped(), p.Rejected())
	return nil
}
