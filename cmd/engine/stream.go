package main

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
)

type streamCmd struct {
	Repair streamRepairCmd `cmd:"" help:"Restore the event stream's configuration (limits, deny delete/purge, ...) that someone changed, of every partition's stream on a partitioned store; needs the admin user."`
}

type streamRepairCmd struct {
	storeFlags
}

// Help is kong's long help of the subcommand.
func (c *streamRepairCmd) Help() string {
	return "Only an admin may update the event stream. With the embedded server's data directory (engine stopped) or --nats with " +
		"no user given, this connects as the admin of " + "<data>/nats-users.json; otherwise give the admin's --nats-user/--nats-password."
}

func (c *streamRepairCmd) Run(ctx context.Context, log zerolog.Logger) error {
	logs, closeLog, err := c.openStreams(ctx, log, true)
	if err != nil {
		return err
	}
	defer closeLog()
	for _, jlog := range logs {
		drift := jlog.CheckStream(ctx)
		if drift == nil {
			fmt.Printf("stream %s: configuration as the engine needs it, nothing to repair\n", jlog.StreamName())
			continue
		}
		fmt.Printf("stream %s: %v\n", jlog.StreamName(), drift)
		if err := jlog.RepairStream(ctx); err != nil {
			return err
		}
		fmt.Printf("stream %s: repaired\n", jlog.StreamName())
	}
	return nil
}
