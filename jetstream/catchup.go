package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/tick"
	"github.com/toolintent/engine/logport"
)

// catchUpBatch is how many events CatchUp hands on at most at a time and
// asks the server for per pull.
const catchUpBatch = 4096

// CatchUp reads every event from stream sequence from on with an ordered
// consumer (ephemeral, in memory, no acknowledgements, flow controlled),
// and calls fn with runs of up to 4,096 records in stream order and the
// number of events the stream held after each run, until a run leaves
// none (the stream's end at that moment). It returns the last sequence
// handed to fn (0: none, the stream held nothing from from on).
//
// A durable feed makes the server track and acknowledge every delivery;
// an ordered consumer does not (the consumer store's pending state,
// acknowledgement replies and redelivery tracking were the replay's extra
// server CPU). A projection that rebuilds its views from an empty start
// folds the backlog this way, then starts its durable feed past it
// (FeedConfig.StartAfter). Sequences the stream no longer holds (an
// erase's purge) are skipped as the consumer skips them.
func (l *Log) CatchUp(ctx context.Context, from uint64, fn func(recs []logport.Record, pending uint64) error) (uint64, error) {
	if from == 0 {
		from = 1
	}
	// An empty stream past from: nothing to wait for (Next would block).
	info, err := l.streamInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("catch up from %d: stream info %s: %w", from, l.name, err)
	}
	if info.State.LastSeq < from {
		return 0, nil
	}
	cons, err := l.js.OrderedConsumer(ctx, l.name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{l.subjBase + "*"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return 0, fmt.Errorf("catch up from %d: %w", from, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(catchUpBatch))
	if err != nil {
		return 0, fmt.Errorf("catch up from %d: %w", from, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	// A watchdog, not a timer per Next (8% of the replay's throughput):
	// it stops the iterator when no event came for catchUpIdle while the
	// loop waited for one.
	var (
		received atomic.Uint64
		handing  atomic.Bool // fn runs: not waiting for the server
		gaveUp   atomic.Bool
	)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		seen, idle := received.Load(), time.Duration(0)
		tick.Every(wctx, catchUpIdle/5, func() bool {
			if n := received.Load(); n != seen || handing.Load() {
				seen, idle = n, 0
				return true
			}
			if idle += catchUpIdle / 5; idle >= catchUpIdle {
				gaveUp.Store(true)
				it.Stop()
				return false
			}
			return true
		})
	}()
	var last uint64
	recs := make([]logport.Record, 0, catchUpBatch)
	for {
		recs = recs[:0]
		var pending uint64
		stalled := false
		for len(recs) < catchUpBatch {
			m, err := it.Next()
			if err != nil && gaveUp.Load() && ctx.Err() == nil {
				stalled = true
				break
			}
			received.Add(1)
			if err != nil {
				if ctx.Err() != nil {
					return last, ctx.Err()
				}
				return last, fmt.Errorf("catch up after %d: %w", last, err)
			}
			seq, p, ts, err := deliveryMeta(m)
			if err != nil {
				return last, fmt.Errorf("catch up after %d: %w", last, err)
			}
			h := m.Headers()
			r := l.record(seq, m.Subject(), ts, h.Get(headerMsgID), m.Data())
			r.First = firstOfSubject(h)
			recs = append(recs, r)
			pending = p
			if p == 0 {
				break
			}
		}
		if len(recs) > 0 {
			handing.Store(true)
			err := fn(recs, pending)
			handing.Store(false)
			if err != nil {
				return last, err
			}
			last = recs[len(recs)-1].Seq
		}
		if stalled {
			return last, fmt.Errorf("%w: no event for %s after sequence %d (%d pending)", ErrCatchUpStalled, catchUpIdle, last, pending)
		}
		if pending == 0 {
			return last, nil
		}
	}
}

// catchUpIdle is how long CatchUp waits for the next event while the
// server says more are pending before it gives up (ErrCatchUpStalled).
const catchUpIdle = 5 * time.Second

// ErrCatchUpStalled: CatchUp received nothing for catchUpIdle although
// events were pending (a store that cannot read them, say). What it
// handed on stands; the caller goes on by other means (the projection's
// durable feed, with its gap and damage handling).
var ErrCatchUpStalled = errors.New("catch-up stalled")

// startAfter moves a durable feed's consumer to deliver seq+1 next (a
// consumer reset, which also acknowledges everything up to seq), unless
// it is there or past it already. A server without consumer resets
// (before 2.14) or a user not allowed them answers ErrResetUnsupported:
// the feed then delivers from where it was, which a projection folds as
// repeats.
func (l *Log) startAfter(ctx context.Context, durable string, seq uint64) error {
	subj := l.apiPrefix() + "CONSUMER.RESET." + l.name + "." + durable
	// A user not allowed to reset gets no answer at all (the server drops
	// the request): do not hold the feed's start for the log's timeout.
	ctx, cancel := context.WithTimeout(ctx, startAfterWait)
	defer cancel()
	resp, err := l.nc.RequestWithContext(ctx, subj, fmt.Appendf(nil, `{"seq":%d}`, seq+1))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrResetUnsupported, err)
	}
	var r struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return fmt.Errorf("%w: reply %q: %w", ErrResetUnsupported, strings.TrimSpace(string(resp.Data)), err)
	}
	if r.Error != nil {
		return fmt.Errorf("%w: %w", ErrResetUnsupported, r.Error)
	}
	return nil
}

// startAfterWait bounds the wait for a consumer reset's answer.
const startAfterWait = 2 * time.Second

// ErrResetUnsupported: the server did not move a consumer (no consumer
// reset before nats-server 2.14, or the user may not reset).
var ErrResetUnsupported = errors.New("consumer reset refused or unsupported")

// deliveryMeta reads a consumer delivery's stream sequence, pending count
// and timestamp from its acknowledgement subject without allocating
// (ackMeta), or else from the client library's Metadata.
func deliveryMeta(m interface {
	Reply() string
	Metadata() (*jetstream.MsgMetadata, error)
}) (seq, pending uint64, ts time.Time, err error) {
	if seq, pending, ts, ok := ackMeta(m.Reply()); ok {
		return seq, pending, ts, nil
	}
	md, err := m.Metadata()
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	return md.Sequence.Stream, md.NumPending, md.Timestamp, nil
}
