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

	"github.com/toolintent/engine/logport"
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
func (f *Feed) startPull(durable string, pace, downAfter time.Duration, skip func(uint64, int) ([]logport.Record, uint64), cursor uint64) error {
	nc := f.log.nc
	p := &pacedPull{
		f: f, nc: nc, skip: skip, durable: durable,
		inbox:     nc.NewInbox(),
		next:      f.log.apiPrefix() + "CONSUMER.MSG.NEXT." + f.log.name + "." + durable,
		resetSubj: f.log.apiPrefix() + "CONSUMER.RESET." + f.log.name + "." + durable,
		full:      []byte(fmt.Sprintf(`{"batch":%d,"no_wait":true}`, pacedBatch)),
		cursor:    cursor,
		sinceSkip: skipQuiet,
	}
	// An asynchronous subscription without pending limits: while the
	// consumer folds, deliveries wait in the subscription's queue (at most
	// the feed's MaxAckPending), never dropped as a full channel would
	// drop them (a dropped last delivery would wait for AckWait).
	sub, err := nc.Subscribe(p.inbox, p.deliver)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", p.inbox, err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribe %s: %w", p.inbox, err)
	}
	p.resetInbox = nc.NewInbox()
	rsub, err := nc.Subscribe(p.resetInbox, p.resetReply)
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribe %s: %w", p.resetInbox, err)
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
			wait, err := p.tick(pace, downAfter)
			if err != nil {
				f.down(err)
				return
			}
			t.Reset(wait)
		}
	}()
	return nil
}

// pacedPull is the state of a paced feed's pulls (see startPull). mu is
// held while a delivery or a skipped run is handed on, so that they reach
// the consumer in stream order; it guards the fields below it.
type pacedPull struct {
	f                 *Feed
	nc                *nats.Conn
	durable           string
	skip              func(uint64, int) ([]logport.Record, uint64)
	inbox, resetInbox string
	next, resetSubj   string // the consumer's pull and reset subjects
	full              []byte // the pull request for a whole batch
	noReset           atomic.Bool

	mu        sync.Mutex
	cursor    uint64    // the sequence the consumer delivers next
	credit    int       // events asked for and not received
	more      bool      // the last pull asked for a whole batch: ask again while behind
	recv      bool      // a message came since the last tick
	got       bool      // an event came (or was skipped) since the last tick
	idle      uint      // ticks in a row without an event (at most pacedIdleShift)
	stalled   uint64    // the cursor at the last tick that found it not handed over
	sinceSkip int       // ticks since the last skipped run (at most skipQuiet)
	resetTo   uint64    // the consumer is still to be moved past skipped runs, to here (0: it is)
	lastReset time.Time // when the last reset was sent
	downSince time.Time // the first of the pull replies since the last delivery that were 503 or 409
	downWhy   string    // the first such reply's status and description
	// unansweredAt is the first reset sent since the last reply (zero:
	// none).
	unansweredAt time.Time
}

// ask sends a no-wait pull for n events (mu held).
func (p *pacedPull) ask(n int) {
	req := p.full
	if n < pacedBatch {
		req = []byte(`{"batch":` + strconv.Itoa(n) + `,"no_wait":true}`)
	}
	if p.nc.PublishRequest(p.next, p.inbox, req) == nil {
		p.credit += n
		p.more = n == pacedBatch
	}
}

// deliver takes a reply to a pull: a delivery, handed on, or a status
// that ends the pull.
func (p *pacedPull) deliver(m *nats.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recv = true
	if st := statusOnly(m); st != "" {
		p.credit = 0 // a pull ended (no messages, or a warning)
		switch {
		case st != "503" && st != "409":
			p.downSince = time.Time{} // the consumer answered: no messages, or a timeout
		case p.downSince.IsZero():
			p.downSince, p.downWhy = time.Now(), strings.TrimSpace(st+" "+m.Header.Get("Description"))
		}
		return
	}
	p.downSince = time.Time{}
	p.credit = max(p.credit-1, 0)
	p.got = true
	if seq, pending, _, ok := ackMeta(m.Reply); ok {
		p.cursor = max(p.cursor, seq+1)
		switch {
		case pending == 0:
			p.credit = 0 // caught up: the no-wait pulls have ended
		case p.more && pending > uint64(p.credit) && p.credit < pacedBatch:
			p.ask(pacedBatch)
		}
	}
	select {
	case p.f.ch <- feedMsg{raw: m}:
	case <-p.f.done:
	}
}

// resetReply takes the reply to a consumer reset. A failed reset leaves
// the consumer where it was: it delivers the skipped events again, which
// the consumer drops as folded, but its next pulls start behind the
// cursor, so the feed stops skipping (a server before 2.14 has no
// consumer reset, or the consumer is gone) and pulls whole batches again.
// A reply names the consumer's configuration: one reconfigured to send
// headers only fails the feed, as a headers-only delivery does (see
// NextWithin), since a feed that skips may deliver nothing for long. A
// reset that is never answered (a user not allowed to reset: the server
// drops the request) stops the skipping after resetTimeout.
func (p *pacedPull) resetReply(m *nats.Msg) {
	p.mu.Lock()
	p.unansweredAt = time.Time{}
	p.mu.Unlock()
	var r struct {
		Error  *jetstream.APIError `json:"error"`
		Config *struct {
			HeadersOnly bool `json:"headers_only"`
		} `json:"config"`
	}
	if len(m.Data) == 0 || json.Unmarshal(m.Data, &r) != nil || r.Error != nil {
		p.noReset.Store(true) // no responders, or refused
		return
	}
	if r.Config == nil || !r.Config.HeadersOnly {
		return
	}
	select {
	case p.f.ch <- feedMsg{err: fmt.Errorf("feed: the consumer was reconfigured headers_only: %w", ErrDrift)}:
	case <-p.f.done:
	}
}

// sendReset moves the consumer past the runs skipped since the last
// reset (mu held). A reset writes the consumer's state file in the
// server, in line with the connection's other requests, so it is sent
// before the next pull, or after resetEvery, not for each run.
func (p *pacedPull) sendReset() {
	if p.resetTo == 0 {
		return
	}
	_ = p.nc.PublishRequest(p.resetSubj, p.resetInbox, []byte(`{"seq":`+strconv.FormatUint(p.resetTo, 10)+`}`))
	p.resetTo, p.lastReset = 0, time.Now()
	if p.unansweredAt.IsZero() {
		p.unansweredAt = p.lastReset
	}
}

// pull hands on the run at the cursor that needs no delivery, or asks
// the consumer for events (mu held, no pull outstanding).
func (p *pacedPull) pull() {
	if p.skip == nil || p.noReset.Load() {
		p.ask(pacedBatch)
		return
	}
	run, above := p.skip(p.cursor, pacedBatch)
	if len(run) > 0 {
		last := run[len(run)-1].Seq
		p.resetTo = last + 1
		p.cursor = last + 1
		p.got, p.sinceSkip = true, 0
		p.f.skipped.Add(uint64(len(run)))
		select {
		// Pending 0: a run of this process's own events is not a
		// backlog. (An estimate from the last delivery, less the runs
		// skipped since, kept the projection in catch-up windows of
		// seconds while it was caught up: ack-to-view lags of 2-13 s
		// in engine bench's 64-session line.) The next delivery says
		// what the server holds.
		case p.f.ch <- feedMsg{skip: run}:
		case <-p.f.done:
		}
		return
	}
	if p.sinceSkip < skipQuiet && p.stalled != p.cursor {
		// A writer of this process handed events over lately: the
		// event at the cursor may be one whose acknowledgement has
		// not reached its writer yet. Look again at the next tick.
		p.stalled = p.cursor
		return
	}
	n := pacedBatch
	if above > p.cursor {
		n = int(min(above-p.cursor, pacedBatch))
	}
	p.sendReset() // first: the pull must start at the cursor
	p.ask(n)
}

// tick is one beat of the pacing: it pulls when no pull is outstanding
// and sends a reset that is due. It returns the wait until the next
// tick, or the error that fails the feed when its pulls have been
// answered "no leader" (503, 409) for downAfter.
func (p *pacedPull) tick(pace, downAfter time.Duration) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.recv {
		p.credit = 0 // nothing came: earlier no-wait pulls have ended
	}
	if p.credit == 0 {
		p.pull()
	}
	if p.resetTo != 0 && time.Since(p.lastReset) >= resetEvery {
		p.sendReset()
	}
	if !p.unansweredAt.IsZero() && time.Since(p.unansweredAt) > resetTimeout {
		p.noReset.Store(true)
	}
	down := !p.downSince.IsZero() && time.Since(p.downSince) > downAfter
	p.sinceSkip = min(p.sinceSkip+1, skipQuiet)
	// An idle feed asks less often: the wait doubles with each tick
	// without an event, up to pace<<pacedIdleShift (16 ms at the
	// projection's default 2 ms), and is pace again at the next event, so
	// an idle engine sends about 60 pulls a second, not 500.
	if p.got {
		p.idle = 0
	} else if p.idle < pacedIdleShift {
		p.idle++
	}
	p.recv, p.got = false, false
	if down {
		return 0, fmt.Errorf("feed %s: its pulls have been answered %q for %s (the consumer has no leader, or is gone): %w", p.durable, p.downWhy, downAfter, ErrFeedDown)
	}
	return pace << p.idle, nil
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
