package jetstream

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startPull starts a paced feed: no-wait pull requests on one inbox,
// sent every pace, and at once while a delivery says more events are
// pending than are asked for (at most two pulls outstanding), so a feed
// that is behind gets batches back to back and one that is caught up
// asks once per pace. A lost request or delivery (a leader election) is
// asked again at the next tick; a lost delivery is a gap the consumer
// fills from the log (see Feed).
//
// With skip, each tick with no pull outstanding first asks skip for
// the run of sequences at the consumer's cursor that need no delivery,
// hands it on and resets the consumer past it; it pulls only when the
// sequence at the cursor is not handed over at two ticks in a row (the
// first may be a write of this process whose acknowledgement is still on
// its way to the writer), and then no more than the sequences up to the
// next handed-over one. cursor is the sequence the consumer delivers
// next.
func (f *Feed) startPull(durable string, pace, downAfter time.Duration, skip func(uint64, int) ([]Record, uint64), cursor uint64) error {
	nc := f.log.nc
	inbox := nc.NewInbox()
	next := f.log.apiPrefix() + "CONSUMER.MSG.NEXT." + f.log.name + "." + durable
	resetSubj := f.log.apiPrefix() + "CONSUMER.RESET." + f.log.name + "." + durable
	full := []byte(fmt.Sprintf(`{"batch":%d,"no_wait":true}`, pacedBatch))
	// mu is held while a delivery or a skipped run is handed on, so that
	// they reach the consumer in stream order.
	var (
		mu        sync.Mutex
		credit    int    // events asked for and not received
		more      bool   // the last pull asked for a whole batch: ask again while behind
		recv      bool   // a message came since the last tick
		got       bool   // an event came (or was skipped) since the last tick
		idle      uint   // ticks in a row without an event (at most pacedIdleShift)
		stalled   uint64 // the cursor at the last tick that found it not handed over
		sinceSkip = skipQuiet
		resetTo   uint64    // the consumer is still to be moved past skipped runs, to here (0: it is)
		lastReset time.Time // when the last reset was sent
		downSince time.Time // the first of the pull replies since the last delivery that were 503 or 409
		downWhy   string    // the first such reply's status and description
	)
	ask := func(n int) { // mu held
		req := full
		if n < pacedBatch {
			req = []byte(`{"batch":` + strconv.Itoa(n) + `,"no_wait":true}`)
		}
		if nc.PublishRequest(next, inbox, req) == nil {
			credit += n
			more = n == pacedBatch
		}
	}
	// An asynchronous subscription without pending limits: while the
	// consumer folds, deliveries wait in the subscription's queue (at most
	// the feed's MaxAckPending), never dropped as a full channel would
	// drop them (a dropped last delivery would wait for AckWait).
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		recv = true
		if st := statusOnly(m); st != "" {
			credit = 0 // a pull ended (no messages, or a warning)
			switch {
			case st != "503" && st != "409":
				downSince = time.Time{} // the consumer answered: no messages, or a timeout
			case downSince.IsZero():
				downSince, downWhy = time.Now(), strings.TrimSpace(st+" "+m.Header.Get("Description"))
			}
			return
		}
		downSince = time.Time{}
		credit = max(credit-1, 0)
		got = true
		if seq, p, _, ok := ackMeta(m.Reply); ok {
			cursor = max(cursor, seq+1)
			switch {
			case p == 0:
				credit = 0 // caught up: the no-wait pulls have ended
			case more && p > uint64(credit) && credit < pacedBatch:
				ask(pacedBatch)
			}
		}
		select {
		case f.ch <- feedMsg{raw: m}:
		case <-f.done:
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	// The resets' replies. A failed reset leaves the consumer where it
	// was: it delivers the skipped events again, which the consumer drops
	// as folded, but its next pulls start behind the cursor, so the feed
	// stops skipping (a server before 2.14 has no consumer reset, or the
	// consumer is gone) and pulls whole batches again. A reply names the
	// consumer's configuration: one reconfigured to send headers only
	// fails the feed, as a headers-only delivery does (see NextWithin),
	// since a feed that skips may deliver nothing for long.
	// A reset that is never answered (a user not allowed to reset: the
	// server drops the request) stops the skipping after resetTimeout.
	var (
		noReset      atomic.Bool
		unansweredAt time.Time // the first reset sent since the last reply (zero: none); under mu
	)
	resetInbox := nc.NewInbox()
	rsub, err := nc.Subscribe(resetInbox, func(m *nats.Msg) {
		mu.Lock()
		unansweredAt = time.Time{}
		mu.Unlock()
		var r struct {
			Error  *jetstream.APIError `json:"error"`
			Config *struct {
				HeadersOnly bool `json:"headers_only"`
			} `json:"config"`
		}
		if len(m.Data) == 0 || json.Unmarshal(m.Data, &r) != nil || r.Error != nil {
			noReset.Store(true) // no responders, or refused
			return
		}
		if r.Config == nil || !r.Config.HeadersOnly {
			return
		}
		select {
		case f.ch <- feedMsg{err: fmt.Errorf("feed: the consumer was reconfigured headers_only: %w", ErrDrift)}:
		case <-f.done:
		}
	})
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribe %s: %w", resetInbox, err)
	}
	// sendReset moves the consumer past the runs skipped since the last
	// reset (mu held). A reset writes the consumer's state file in the
	// server, in line with the connection's other requests, so it is sent
	// before the next pull, or after resetEvery, not for each run.
	sendReset := func() {
		if resetTo == 0 {
			return
		}
		_ = nc.PublishRequest(resetSubj, resetInbox, []byte(`{"seq":`+strconv.FormatUint(resetTo, 10)+`}`))
		resetTo, lastReset = 0, time.Now()
		if unansweredAt.IsZero() {
			unansweredAt = lastReset
		}
	}
	pull := func() { // mu held, no pull outstanding
		if skip == nil || noReset.Load() {
			ask(pacedBatch)
			return
		}
		run, above := skip(cursor, pacedBatch)
		if len(run) > 0 {
			last := run[len(run)-1].Seq
			resetTo = last + 1
			cursor = last + 1
			got, sinceSkip = true, 0
			f.skipped.Add(uint64(len(run)))
			select {
			// Pending 0: a run of this process's own events is not a
			// backlog. (An estimate from the last delivery, less the runs
			// skipped since, kept the projection in catch-up windows of
			// seconds while it was caught up: ack-to-view lags of 2-13 s
			// in engine bench's 64-session line.) The next delivery says
			// what the server holds.
			case f.ch <- feedMsg{skip: run}:
			case <-f.done:
			}
			return
		}
		if sinceSkip < skipQuiet && stalled != cursor {
			// A writer of this process handed events over lately: the
			// event at the cursor may be one whose acknowledgement has
			// not reached its writer yet. Look again at the next tick.
			stalled = cursor
			return
		}
		n := pacedBatch
		if above > cursor {
			n = int(min(above-cursor, pacedBatch))
		}
		sendReset() // first: the pull must start at the cursor
		ask(n)
	}
	go func() {
		defer sub.Unsubscribe()  //nolint:errcheck // the feed is stopping
		defer rsub.Unsubscribe() //nolint:errcheck // the feed is stopping
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-f.done:
				return
			case <-t.C:
			}
			mu.Lock()
			if !recv {
				credit = 0 // nothing came: earlier no-wait pulls have ended
			}
			if credit == 0 {
				pull()
			}
			if resetTo != 0 && time.Since(lastReset) >= resetEvery {
				sendReset()
			}
			if !unansweredAt.IsZero() && time.Since(unansweredAt) > resetTimeout {
				noReset.Store(true)
			}
			down := !downSince.IsZero() && time.Since(downSince) > downAfter
			why := downWhy
			sinceSkip = min(sinceSkip+1, skipQuiet)
			// An idle feed asks less often: the wait doubles with each
			// tick without an event, up to pace<<pacedIdleShift (16 ms at
			// the projection's default 2 ms), and is pace again at the next
			// event, so an idle engine sends about 60 pulls a second, not 500.
			if got {
				idle = 0
			} else if idle < pacedIdleShift {
				idle++
			}
			recv, got = false, false
			mu.Unlock()
			if down {
				f.down(fmt.Errorf("feed %s: its pulls have been answered %q for %s (the consumer has no leader, or is gone): %w", durable, why, downAfter, ErrFeedDown))
				return
			}
			t.Reset(pace << idle)
		}
	}()
	return nil
}

// down fails the feed with err, once: the next read returns it.
func (f *Feed) down(err error) {
	f.downOnce.Do(func() {
		select {
		case f.ch <- feedMsg{err: err}:
		case <-f.done:
		}
	})
}

// resetEvery is how often, at most, a paced feed that skips runs moves
// its consumer past them when it does not pull: the consumer's
// acknowledged position lags the skipped runs by about this much.
const resetEvery = 200 * time.Millisecond

// resetTimeout is how long a paced feed waits for the reply to a consumer
// reset before it stops skipping.
const resetTimeout = 5 * time.Second

// skipQuiet is how many ticks after the last skipped run a paced feed
// still waits a tick before it pulls a sequence not handed over.
const skipQuiet = 8
