package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/server"
)

type migrateCmd struct {
	storeFlags
	Partitions int           `name:"partitions" help:"Spread new sessions over this many event streams (2 or more), as engine serve --partitions K then serves them." xor:"what"`
	Abort      bool          `name:"abort" help:"Undo a migration that started and did not finish: the store is one stream again, as before it." xor:"what"`
	Settle     time.Duration `name:"settle" default:"10s" help:"How long the one stream must take no event, after the migration is recorded as under way (engines still serving the store see it and stop), before its sessions are listed."`
}

// Help is kong's long help of the subcommand.
func (c *migrateCmd) Help() string {
	return "Migrates a store of one event stream on a --nats cluster to --partitions K event streams without moving an event: " +
		"every session the one stream holds stays there (its events and sequences unchanged; reads and writes go on there), " +
		"and every new session is created in its partition. Stop every engine first: migrate refuses while an engine's projection runs, " +
		"records that a migration is under way (an engine still serving stops when it sees it, and none starts), waits --settle, " +
		"lists the one stream's sessions once it has taken no event for a whole --settle, creates the partition streams and records the migrated layout. " +
		"Then start the engines with engine serve --nats URL --partitions K. Run it as a NATS user that may create streams, " +
		"write the layout bucket and create the <PREFIX>_LAYOUT_SESSIONS object store (the admin user of deploy/). " +
		"A migration interrupted part way is finished by running migrate again, or undone with --abort. See docs/scaling.md."
}

func (c *migrateCmd) Run(ctx context.Context, log zerolog.Logger) error {
	if !c.Abort && c.Partitions < 2 {
		return usage(fmt.Errorf("--partitions %d: give the number of partition streams, 2 or more (or --abort to undo a migration under way)", c.Partitions))
	}
	m := jetstream.Migration{Partitions: c.Partitions, Settle: c.Settle, Progress: func(step string) {
		fmt.Fprintln(os.Stderr, "engine migrate:", step)
	}}
	if c.Abort {
		m.Partitions = 1
	}
	rep, err := server.Migrate(ctx, log, c.store("", "interval"), m)
	if err != nil {
		return err
	}
	out := map[string]any{"partitions": rep.Partitions, "one_stream": rep.OneStream, "one_stream_last_seq": rep.LastSeq,
		"kept_sessions": rep.Sessions, "streams": strings.Join(rep.Streams, ",")}
	if rep.Aborted {
		out = map[string]any{"aborted": true, "one_stream": rep.OneStream}
	}
	data, _ := json.Marshal(out)
	fmt.Println(string(data))
	return nil
}
