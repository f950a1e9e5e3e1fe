package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/server"
)

type rebuildCmd struct {
	storeFlags
}

// Help is kong's long help of the subcommand.
func (c *rebuildCmd) Help() string {
	return "Deletes the projection's durable feed and folds the whole log into the session views again, from the first event, then exits. " +
		"Views are only ever derived from the log, so this is safe; run it with no engine serving the same data directory " +
		"(the data directory is locked: rebuild refuses while an engine serves it, and refuses a directory without the event stream) or, against --nats, with the engines' projections stopped. " +
		"On a store of several partitions it rebuilds each partition's views in turn. Progress is shown on a terminal."
}

func (c *rebuildCmd) Run(ctx context.Context, log zerolog.Logger) error {
	logs, closeLog, err := c.openStreams(ctx, log, false)
	if err != nil {
		return err
	}
	defer closeLog()
	// Every stream's runner lease is free before any feed is reset: an
	// engine still projecting one partition refuses the whole rebuild,
	// not the partitions after the others were rebuilt.
	for _, jlog := range logs {
		if err := c.leaseFree(ctx, jlog); err != nil {
			return err
		}
	}
	for _, jlog := range logs {
		if err := c.rebuild(ctx, jlog, log); err != nil {
			if len(logs) > 1 {
				err = fmt.Errorf("stream %s: %w", jlog.StreamName(), err)
			}
			return err
		}
	}
	return nil
}

// leaseFree reports whether jlog's projection runner lease can be taken
// now (jetstream.Log.RunnerLeaseFree), naming the fix when not.
func (c *rebuildCmd) leaseFree(ctx context.Context, jlog *jetstream.Log) error {
	err := jlog.RunnerLeaseFree(ctx, c.leaseOwner())
	if errors.Is(err, jetstream.ErrRunnerActive) {
		return fmt.Errorf("%w: stop the engines serving it, or their projections, then rebuild", err)
	}
	return err
}

// rebuild folds the whole of jlog's stream into its views again.
func (c *rebuildCmd) rebuild(ctx context.Context, jlog *jetstream.Log, log zerolog.Logger) error {
	last, err := jlog.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	// Rebuild folds the log as it now is: it accepts sequences a damaged
	// store lost (logging them) and forgets recorded damage.
	// It folds as the projection runner: it refuses
	// while an engine's projection holds the lease.
	cfg := projection.Config{Logger: log.With().Str("component", "projection").Logger(), AcceptGaps: true, Elect: true, Owner: c.leaseOwner()}
	prog := newProgress()
	start := time.Now()
	var p *projection.Projection
	name := jlog.StreamName()
	cfg.OnBatch = func(int, time.Duration, uint64) {
		done := p.Folded()
		rate := float64(done) / time.Since(start).Seconds()
		prog.Update("rebuild %s: %d/%d events folded (%.0f/s)", name, done, last, rate)
	}
	p, err = projection.Open(ctx, jlog, cfg)
	if err != nil {
		return err
	}
	if _, err := p.Meta().Acquire(ctx, p.Owner(), 5*time.Second); err != nil {
		return fmt.Errorf("a projection runner is active on stream %s (%w): stop the engines serving it, or their projections, then rebuild", name, err)
	}
	// However the rebuild ends, an engine started next folds at once.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = p.Meta().ReleaseOwner(rctx, p.Owner())
	}()
	if err := jlog.ResetFeed(ctx, projection.DefaultDurable); err != nil {
		return err
	}
	if err := p.Meta().ClearDamage(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(runCtx) }()
	waitErr := waitRebuilt(ctx, p, last, 10*time.Second)
	cancel()
	if err := <-errc; err != nil {
		return err
	}
	if waitErr != nil {
		return fmt.Errorf("rebuild stopped at sequence %d of %d: %w", p.Applied(), last, waitErr)
	}
	// Views of sessions whose events a damaged store lost claim sequences
	// the log no longer has: correct them.
	fixed, err := p.Reconcile(ctx)
	if err != nil {
		return err
	}
	if fixed > 0 {
		fmt.Printf("corrected %d views that were ahead of the log (events lost with the damaged store)\n", fixed)
	}
	if c.NATS == "" { // the embedded server's data directory
		// The operator accepts the log as it is: serve
		// compares the stream with this record from now on.
		before, now, err := server.AcceptWatermark(ctx, c.Data, jlog)
		if err != nil {
			return err
		}
		if before.LastSeq > now.LastSeq || before.Messages > now.Messages {
			fmt.Printf("accepted the loss: the engine had acknowledged up to sequence %d (%d messages); the log now ends at %d with %d messages (recorded in %s)\n",
				before.LastSeq, before.Messages, now.LastSeq, now.Messages, jetstream.WatermarkPath(c.Data))
		}
	}
	el := time.Since(start)
	prog.Done("rebuild %s: %d events folded in %s", name, p.Folded(), el.Round(time.Millisecond))
	fmt.Printf("rebuilt views from %d events (stream %s, sequence %d) in %s; %d undecodable events skipped, %d events rejected (see docs/semantics.md#events-the-engine-does-not-apply)\n", p.Folded(), name, last, el.Round(time.Millisecond), p.Skipped(), p.Rejected())
	return nil
}

// waitRebuilt waits until the projection has folded the stream as it was
// when the rebuild began: up to last, or until it has caught up with the
// feed (the stream's last sequences may be unreadable in a damaged
// store), or it has made no progress for stall. It always returns.
func waitRebuilt(ctx context.Context, p *projection.Projection, last uint64, stall time.Duration) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen, since := p.Applied(), time.Now()
	for {
		if p.Applied() >= last || (p.CaughtUp() && p.Folded() > 0) {
			return nil
		}
		if a := p.Applied(); a != seen {
			seen, since = a, time.Now()
		}
		if time.Since(since) > stall {
			return fmt.Errorf("no progress for %s: sequences after %d cannot be read (damaged log?)", stall, seen)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
