package projection

// Gap filling: the sequences a feed did not deliver (writes the feed
// skipped, or records a replica had not yet stored) are read from the log,
// and a gap nobody can read is damage unless an erase purged it.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// fillGaps returns the records to fold from a delivered batch, in stream
// order from next on: redeliveries below next are dropped and missing
// sequences are read from the log.
func (p *Projection) fillGaps(ctx context.Context, next uint64, delivered []logport.Record) ([]logport.Record, error) {
	if len(delivered) > 0 && delivered[0].Seq == next && delivered[len(delivered)-1].Seq == next+uint64(len(delivered))-1 {
		return delivered, nil // contiguous from next, as almost always: no copy
	}
	out := make([]logport.Record, 0, len(delivered))
	for _, r := range delivered {
		if r.Seq < next {
			continue
		}
		if r.Seq > next {
			p.cfg.Logger.Info().Uint64("from", next).Uint64("to", r.Seq-1).Msg("projection: filling a delivery gap from the log")
			gap, err := p.readGap(ctx, next, r.Seq-1)
			if err != nil {
				return nil, err
			}
			for i := range gap {
				// A gap's events are delivered as much as the others: one
				// a writer handed over is taken as held (and a handoff
				// after it refused), as the feed's own check does.
				if g := &gap[i]; p.hand.held(g.Session, g.Seq, g.MsgID) {
					g.Held = true
				}
			}
			out = append(out, gap...)
		}
		out = append(out, r)
		next = r.Seq + 1
	}
	return out, nil
}

// readGap reads the events [from, to] the feed did not deliver. The
// stream's sequences are contiguous (deletes are denied), so a sequence
// that cannot be read is damage: reported (ErrDamagedLog), not skipped,
// unless AcceptGaps. A replica may lag a moment behind the leader: the
// read is tried again for about two seconds first.
func (p *Projection) readGap(ctx context.Context, from, to uint64) ([]logport.Record, error) {
	var out []logport.Record
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		out = out[:0]
		err := p.log.ScanRange(ctx, from, to, func(g logport.Record) error {
			out = append(out, g)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if uint64(len(out)) == to-from+1 {
			return out, nil
		}
		if p.erasedGap(ctx, from, to, out) {
			return out, nil // purged by an erase, not lost
		}
		if p.cfg.AcceptGaps {
			p.cfg.Logger.Warn().Uint64("from", from).Uint64("to", to).Int("readable", len(out)).Msg("damaged log: unreadable sequences skipped (rebuild accepts the loss)")
			return out, nil
		}
		if wait > time.Second {
			// Direct gets are answered by any replica, and one that lags
			// after a failover or a partition answers "nothing more" for
			// events the leader holds: ask the leader before calling them
			// lost (a 3-node cluster under load, a node healed from a
			// partition, read 256 of 1,426 for seconds).
			full, err := p.readGapLeader(ctx, from, to, out)
			if err == nil {
				return full, nil
			}
			if !errors.Is(err, jetstream.ErrNotStored) {
				return nil, err // no leader to ask now: the feed starts over, nothing is marked lost
			}
			return nil, p.setDamaged(ctx, fmt.Sprintf("sequences %d..%d cannot be read from the stream (%d of %d readable, and the stream leader lacks some too: %v): acknowledged events are gone from the store; restore the data directory from a backup or a replica, or accept the loss with engine rebuild", from, to, len(out), to-from+1, err))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// readGapLeader completes out (the records of [from, to] the direct gets
// read, in order) with the missing ones read from the stream's leader,
// and returns all of [from, to] in order; ErrNotStored (wrapped) when the
// leader lacks one too.
func (p *Projection) readGapLeader(ctx context.Context, from, to uint64, out []logport.Record) ([]logport.Record, error) {
	full := make([]logport.Record, 0, to-from+1)
	k := 0
	for seq := from; seq <= to; seq++ {
		for k < len(out) && out[k].Seq < seq {
			k++
		}
		if k < len(out) && out[k].Seq == seq {
			full = append(full, out[k])
			continue
		}
		r, err := p.log.ReadLeader(ctx, seq)
		if err != nil {
			return nil, err
		}
		full = append(full, r)
	}
	p.cfg.Logger.Info().Uint64("from", from).Uint64("to", to).Int("from_leader", len(full)-len(out)).Msg("projection: a replica's reads came up short; read the rest from the stream leader")
	return full, nil
}

// erasedGap reports whether every sequence of [from, to] missing from out
// was purged by an erase the audit stream records.
func (p *Projection) erasedGap(ctx context.Context, from, to uint64, out []logport.Record) bool {
	rs, err := p.log.ErasedRanges(ctx)
	if err != nil || len(rs) == 0 {
		return false
	}
	have := make([]uint64, len(out))
	for i, r := range out {
		have[i] = r.Seq
	}
	return jetstream.Covered(rs, from, to, have)
}
