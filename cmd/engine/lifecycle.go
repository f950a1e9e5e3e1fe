package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/toolintent/engine/client"
)

// deleteCmd is `engine delete SESSION`.
type deleteCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id to delete."`
	Reason  string `name:"reason" help:"Why, recorded on the SessionDeleted event (optional; never a person's name or data)."`
}

// Help is the long help of engine delete.
func (c *deleteCmd) Help() string {
	return "Deletes SESSION for good: a SessionDeleted event closes it. Afterwards every read of it answers " +
		"410 deleted (never the defaults of a new session), every write is refused, engine sessions no longer " +
		"lists it, and the id never starts a new session. Its events stay in the log (history still shows them, " +
		"explain explains points before the delete with --until); engine erase removes them. Needs a write right (a read-only token is refused)."
}

func (c *deleteCmd) Run(ctx context.Context) error {
	return show(ctx, c.clientFlags, (*client.Client).SessionDelete, client.DeleteRequest{Session: c.Session, Reason: c.Reason}, func(w io.Writer, r client.DeleteReply) {
		fmt.Fprintf(w, "deleted\t%s (SessionDeleted at seq %d)\n", r.Session, r.Seq)
	})
}

// eraseCmd is `engine erase SESSION`.
type eraseCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id to erase."`
	Reason  string `name:"reason" help:"Why, recorded on the SessionDeleted event until the purge removes it (optional)."`
}

// Help is the long help of engine erase.
func (c *eraseCmd) Help() string {
	return "Erases SESSION: deletes it (when not deleted yet), forgets its idempotency keys and purges all its " +
		"events from the event stream through the engine's admin connection, then writes an audit record to the " +
		"audit stream (<PREFIX>_AUDIT, subject <prefix>.audit.erase.SESSION) with the time, the session and the " +
		"purged sequence range, and no actor or other personal data. Only the erase channel may erase " +
		"(serve --erase-channel, default ops; with --http-tokens, a token of that channel). The id stays refused " +
		"for good. --channel defaults to ops here. A stream created with deny_purge (by an older engine) cannot be erased (the error says how to fix it). " +
		"The purged bytes leave the disk when JetStream compacts the blocks."
}

func (c *eraseCmd) Run(ctx context.Context) error {
	return show(ctx, c.asEraseChannel(), (*client.Client).SessionDelete, client.DeleteRequest{Session: c.Session, Reason: c.Reason, Erase: true}, func(w io.Writer, r client.DeleteReply) {
		fmt.Fprintf(w, "erased\t%s\n", r.Session)
		if r.Seq > 0 {
			fmt.Fprintf(w, "deleted\tSessionDeleted at seq %d\n", r.Seq)
		}
		fmt.Fprintf(w, "purged\t%d events, seq %d..%d\n", r.Purged, r.FirstSeq, r.LastSeq)
		fmt.Fprintf(w, "audit\tseq %d\n", r.AuditSeq)
	})
}

// compactCmd is `engine compact SESSION`.
type compactCmd struct {
	clientFlags
	Session string `arg:"" help:"Session id to compact."`
	Reason  string `name:"reason" help:"Why, recorded on the SessionCompacted event (optional; never a person's name or data)."`
}

// Help is the long help of engine compact.
func (c *compactCmd) Help() string {
	return "Compacts SESSION: one SessionCompacted event that folds to the same state (intent, loaded tools, last " +
		"checkpoint, permission answers) replaces its events, which are then purged below it through the engine's " +
		"admin connection, with an audit record (<prefix>.audit.compact.SESSION) that names the session, the " +
		"replaced range and the time, and no personal data. A cold load then reads one message and the tail. " +
		"History starts at the compaction; points before it answer that they were compacted. Refused during an " +
		"open turn and after a delete; a concurrent write wins (compact again). Only the erase channel may compact " +
		"(serve --erase-channel, default ops); --channel defaults to ops here."
}

func (c *compactCmd) Run(ctx context.Context) error {
	return show(ctx, c.asEraseChannel(), (*client.Client).SessionCompact, client.CompactRequest{Session: c.Session, Reason: c.Reason}, func(w io.Writer, r client.CompactReply) {
		if r.Already {
			fmt.Fprintf(w, "compact\t%s already (SessionCompacted at seq %d)\n", r.Session, r.Seq)
			return
		}
		fmt.Fprintf(w, "compacted\t%s (SessionCompacted at seq %d)\n", r.Session, r.Seq)
		fmt.Fprintf(w, "replaced\t%d events, seq %d..%d, written %s to %s\n", r.Count, r.FirstSeq, r.LastSeq,
			r.FirstTime.Format(time.RFC3339), r.LastTime.Format(time.RFC3339))
		fmt.Fprintf(w, "purged\t%d\n", r.Purged)
	})
}

// asEraseChannel is f with --channel's default (cli) replaced by ops:
// erase and compact ask as the erase channel unless told otherwise.
func (f clientFlags) asEraseChannel() clientFlags {
	if f.Channel == "cli" {
		f.Channel = "ops"
	}
	return f
}
