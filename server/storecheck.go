package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// errStoreRefused is matched (errors.Is) by checkStore's error when it
// refuses a damaged store.
var errStoreRefused = errors.New("refusing to load a damaged store")

// storeCheckProgress is how often a long store check says how far it is.
const storeCheckProgress = 2 * time.Second

// checkStore verifies the embedded server's store in --data before the
// server loads it, reading every block
// (CheckStore): nats-server trusts index.db and would serve a store that
// lost messages as if nothing happened, or, on a garbage sequence, fill a
// hole up to it in memory without bound. So the check runs before, not
// after, the load, and a damaged store is refused: the engine exits with
// the file, the offset or sequence, and what to do. Memory stays below one
// record whatever the files hold; time is one read of the store, with
// progress every 2 s on stderr.
//
// A damaged state file of the projection's own consumer is not refused:
// the consumer holds only the projection's delivery position, the views
// it feeds are derived from the log, and a new consumer starts with
// nothing acknowledged, which makes the projection fold every view again
// from the first event (what `engine rebuild` does). The damaged consumer
// is moved aside, and the engine says so at error level. A damaged state
// file of any other consumer is logged with its fix; it does not stop
// the engine.
func (c *store) checkStore(ctx context.Context, log zerolog.Logger) error {
	if dirs, err := jetstream.StreamDirs(c.Data); err != nil || len(dirs) == 0 {
		return err
	}
	// The check reads the files of a stopped store: not those of another
	// engine serving them (StartEmbedded then says who holds them).
	lock, err := jetstream.LockDataDir(c.Data, "engine store check")
	if errors.Is(err, jetstream.ErrDataDirInUse) {
		return nil
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	start, last := time.Now(), time.Now()
	rep, err := jetstream.CheckStore(ctx, c.Data, jetstream.StoreCheckConfig{Progress: func(done, total int64) {
		if time.Since(last) < storeCheckProgress {
			return
		}
		last = time.Now()
		log.Log().Str("level", "info").Int64("done_bytes", done).Int64("total_bytes", total).
			Msgf("store check: %d of %d MiB read (%.0f%%)", done>>20, total>>20, 100*float64(done)/float64(max(total, 1)))
	}})
	if err != nil {
		return fmt.Errorf("check the store in %s: %w", c.Data, err)
	}
	took := time.Since(start)
	for _, tt := range rep.TornTails {
		log.Warn().Str("where", tt).Msg("store check: the stream's last record was cut by an interrupted write (a crash or a full disk) before it was acknowledged; nats-server drops it at load")
	}
	for _, u := range rep.Unverified {
		log.Warn().Str("stream", u).Msg("store check: the stream's blocks are encrypted or compressed: not verified")
	}
	events := jetstream.EventStreamName(c.Prefix)
	var blocks, feed, other []jetstream.StoreDamage
	for _, d := range rep.Damage {
		switch {
		case d.Consumer == "":
			blocks = append(blocks, d)
		case d.Stream == events && d.Consumer == projection.DefaultDurable:
			feed = append(feed, d)
		default:
			other = append(other, d)
		}
	}
	ev := log.Debug()
	if took >= storeCheckProgress {
		ev = log.Log().Str("level", "info")
	}
	ev.Int("blocks", rep.Blocks).Uint64("records", rep.Records).Int64("bytes", rep.Bytes).Dur("took", took).Int("damaged", len(rep.Damage)).Msg("store check done")
	for _, d := range other {
		log.Error().Str("file", d.File).Str("consumer", d.Consumer).Str("stream", d.Stream).
			Msg("store check: " + d.String() + ": nats-server cannot load this consumer; its owner must create it again (start once with --accept-store-damage to move the damaged state aside)")
	}
	if len(blocks) > 0 && !c.AcceptStoreDamage {
		rep.Damage = blocks
		return fmt.Errorf("%w in %s: %w; restore the data directory from a backup or a replica, or start once with --accept-store-damage to drop only the damaged bytes and accept their loss (intact records are kept, copies of the damaged files are kept, and every dropped span is named), then run engine rebuild", errStoreRefused, c.Data, rep.Err())
	}
	accept := feed
	if c.AcceptStoreDamage {
		accept = rep.Damage
		// The views were folded from events the log no longer holds: the
		// projection folds them again from the log as it now is, and
		// stops at the first gap, naming it in /readyz, until engine
		// rebuild accepts it in the views too.
		for _, d := range blocks {
			if d.Stream != events || len(feed) > 0 {
				continue
			}
			odat := filepath.Join(filepath.Dir(filepath.Dir(d.File)), "obs", projection.DefaultDurable, "o.dat")
			if _, err := os.Stat(filepath.Dir(odat)); err == nil {
				feed = append(feed, jetstream.StoreDamage{Stream: events, Consumer: projection.DefaultDurable, File: odat, Offset: -1, What: "folded from events the store lost"})
				accept = append(accept, feed...)
			}
		}
	}
	if len(accept) == 0 {
		return nil
	}
	ar, err := jetstream.AcceptStoreDamage(ctx, c.Data, jetstream.StoreReport{Damage: accept}, time.Now())
	if err != nil {
		return err
	}
	for _, d := range feed {
		log.Error().Str("file", d.File).Str("moved_to", ar.Aside).
			Msg("store check: " + d.String() + ": the projection's consumer was moved aside; the projection folds every view again from the first event of the log")
	}
	for _, d := range ar.Dropped {
		ev := log.Error().Str("file", d.File).Int64("from_offset", d.Offset).Int64("to_offset", d.End).Str("copies", ar.Aside)
		if d.LostTo > 0 {
			ev = ev.Uint64("first_seq", d.LostFrom).Uint64("last_seq", d.LostTo)
		}
		if len(d.Subjects) > 0 {
			ev = ev.Strs("subjects", d.Subjects)
		}
		ev.Msg("store check: --accept-store-damage dropped damaged bytes: " + d.String())
	}
	for _, l := range ar.Accepted {
		log.Error().Str("stream", l.Stream).Uint64("first_seq", l.From).Uint64("last_seq", l.To).Str("accepted", jetstream.AcceptedLossFile).
			Msg("store check: --accept-store-damage accepted the loss of sequences no purge explains: " + l.What)
	}
	if c.AcceptStoreDamage && len(blocks) > 0 {
		log.Error().Str("copies", ar.Aside).Str("dropped", filepath.Join(ar.Aside, jetstream.DroppedFile)).
			Msg("store check: --accept-store-damage: accepted the loss of " + (jetstream.StoreReport{Damage: blocks}).Err().Error() + "; intact records are kept; run engine rebuild")
	}
	return nil
}
