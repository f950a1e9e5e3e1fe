package jetstream

// The durable feed: a consumer over every event for projections, with a
// standing pull or paced pulls.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// FeedConfig configures a durable feed.
type FeedConfig struct {
	// Durable is the consumer name. Required.
	Durable string
	// MaxAckPending bounds unacknowledged events. Default 400,000: above
	// a projection's catch-up window (300,000 events), whose events are
	// acknowledged only after its views are written.
	MaxAckPending int
	// AckWait is how long before unacknowledged events are redelivered.
	// Default 30s.
	AckWait time.Duration
	// Held, when set, is asked for each delivered event (its session,
	// stream sequence and Nats-Msg-Id header) before it is decoded: when
	// it returns true the record is delivered undecoded, with Held set.
	// It runs on the feed's goroutine and must be cheap.
	Held func(session string, seq uint64, msgID string) bool
	// Pace, when positive, replaces the standing pull (every event sent
	// alone as it is stored, one delivery per event) by no-wait pulls of
	// what the stream holds, one every Pace while the feed is caught up
	// and back to back while it is behind: events arrive in batches, at most
	// about Pace after they were stored, and a writer of the same process
	// does not compete with one delivery per event. Zero: a standing pull.
	Pace time.Duration
	// StartAfter, when above the consumer's acknowledged position, moves
	// the consumer on to deliver StartAfter+1 next (a consumer reset,
	// which acknowledges everything up to it) before the feed starts: a
	// projection that folded the backlog with CatchUp starts its feed
	// past it. A server that refuses the reset leaves the consumer
	// where it was (the events are delivered again).
	StartAfter uint64
	// Skip, when set on a paced feed, is asked before each pull with the
	// stream sequence the consumer delivers next. It returns the
	// records of the run of sequences from there on that need no delivery
	// (a writer of this process handed them over: Held, without Data),
	// which it gives up, and, when the run is empty, the lowest such
	// sequence above from (0: none, or not worth pulling up to: the feed
	// pulls a whole batch). The feed hands the run to the
	// consumer as if delivered and moves the consumer past it (a consumer
	// reset, which also acknowledges it), and pulls only the sequences in
	// between: an event of this process costs no delivery. The reset
	// acknowledges the run before its views are written, so a consumer
	// that sets Skip must not trust the acknowledged position alone on
	// its next start (the projection starts from its watermark). It runs
	// on the feed's pull goroutine and must be cheap.
	Skip func(from uint64, limit int) (run []logport.Record, next uint64)
	// DownAfter is how long a feed whose consumer answers its pulls only
	// with "no responders" (503) or a conflict (409), or stops its
	// heartbeats, waits before it fails with ErrFeedDown (the consumer
	// lost its leader for good, or was deleted): its owner opens it again,
	// which creates the consumer anew. Default 10 s.
	DownAfter time.Duration
}

// ErrFeedDown is matched by a feed's error when its consumer stopped
// answering (FeedConfig.DownAfter).
var ErrFeedDown = errors.New("the feed's consumer stopped answering")

// pacedBatch is how many events one pull of a paced feed asks for.
const pacedBatch = 4096

// pacedIdleShift bounds how far an idle paced feed stretches its pace: at
// most pace<<pacedIdleShift between pulls.
const pacedIdleShift = 3

// Feed is a durable, at-least-once stream of every event, for projections.
// Position survives restarts: the consumer resumes after the last
// acknowledged event.
//
// Acknowledgement is cumulative (AckAll): acknowledging a batch also
// acknowledges every earlier event, including events delivered to an
// earlier feed that stopped before processing them, and deliveries lost in
// a consumer leader change. Event sequences are contiguous, so a consumer
// detects such a gap by sequence and reads it with ScanRange before it
// acknowledges (the projection does).
type Feed struct {
	log  *Log
	cons jetstream.Consumer
	cc   jetstream.ConsumeContext
	ch   chan feedMsg
	done chan struct{}
	once sync.Once
	held func(session string, seq uint64, msgID string) bool
	// carry is the rest of a skipped run a batch had no room for; only
	// NextWithin's caller uses it.
	carry feedMsg
	// skipped counts the events handed over by Skip without delivery.
	skipped atomic.Uint64
	// downOnce fails the feed once (down).
	downOnce sync.Once
}

// Feed creates (or resumes) a durable consumer over all events.
func (l *Log) Feed(ctx context.Context, cfg FeedConfig) (*Feed, error) {
	if !events.ValidToken(cfg.Durable) {
		return nil, fmt.Errorf("feed: durable name %q must be one token of [A-Za-z0-9_-]", cfg.Durable)
	}
	if cfg.MaxAckPending == 0 {
		cfg.MaxAckPending = 400_000
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = 10 * time.Second
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	cons, err := l.js.CreateOrUpdateConsumer(ctx, l.name, l.feedConsumerConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("feed %s: %w", cfg.Durable, err)
	}
	if cfg.StartAfter > cons.CachedInfo().AckFloor.Stream {
		if err := l.startAfter(ctx, cfg.Durable, cfg.StartAfter); err == nil {
			if _, err := cons.Info(ctx); err != nil { // the cursor below
				return nil, fmt.Errorf("feed %s: %w", cfg.Durable, err)
			}
		}
	}
	f := &Feed{log: l, cons: cons, ch: make(chan feedMsg, 8192), done: make(chan struct{}), held: cfg.Held}
	if cfg.Pace > 0 {
		if err := f.startPull(cfg.Durable, cfg.Pace, cfg.DownAfter, cfg.Skip, cons.CachedInfo().Delivered.Stream+1); err != nil {
			return nil, fmt.Errorf("feed %s: %w", cfg.Durable, err)
		}
		return f, nil
	}
	f.cc, err = cons.Consume(func(m jetstream.Msg) {
		select {
		case f.ch <- feedMsg{js: m}:
		case <-f.done:
		}
	},
		jetstream.PullMaxMessages(4096),
		jetstream.PullHeartbeat(min(max(cfg.DownAfter/2, 500*time.Millisecond), 15*time.Second)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// The client library goes on after these; a feed fails, so
			// that its owner opens it again, creating the consumer anew.
			if !errors.Is(err, jetstream.ErrConsumerDeleted) && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrNoHeartbeat) {
				return
			}
			f.down(fmt.Errorf("feed %s: %w: %w", cfg.Durable, ErrFeedDown, err))
		}))
	if err != nil {
		return nil, fmt.Errorf("feed %s: consume: %w", cfg.Durable, err)
	}
	return f, nil
}

// feedMsg is a delivered message: a jetstream.Msg of the standing pull,
// or the core message of a paced feed's own pulls, without the
// client library's per-message wrapper, fetch goroutine and timers. A
// value, so that a paced delivery costs no allocation of its own.
type feedMsg struct {
	js  jetstream.Msg
	raw *nats.Msg
	// skip is a run of records the feed's Skip gave up, handed on without
	// a delivery, with the estimate of the events pending after it.
	skip    []logport.Record
	pending uint64
	// err fails the feed when it comes.
	err error
}

func (m feedMsg) Subject() string {
	if m.raw != nil {
		return m.raw.Subject
	}
	return m.js.Subject()
}

func (m feedMsg) Reply() string {
	if m.raw != nil {
		return m.raw.Reply
	}
	return m.js.Reply()
}

func (m feedMsg) Headers() nats.Header {
	if m.raw != nil {
		return m.raw.Header
	}
	return m.js.Headers()
}

func (m feedMsg) Data() []byte {
	if m.raw != nil {
		return m.raw.Data
	}
	return m.js.Data()
}

// Metadata is asked only for a reply subject ackMeta cannot read.
func (m feedMsg) Metadata() (*jetstream.MsgMetadata, error) {
	if m.raw != nil {
		return nil, fmt.Errorf("delivery with reply subject %q: not a JetStream acknowledgement subject", m.raw.Reply)
	}
	return m.js.Metadata()
}

// Ack acknowledges the message (and, AckAll, every one before it). A
// skipped run was acknowledged by the reset that skipped it.
func (m feedMsg) Ack() error {
	if m.skip != nil {
		return nil
	}
	if m.raw != nil {
		return m.raw.Respond([]byte("+ACK"))
	}
	return m.js.Ack()
}

func (m feedMsg) none() bool { return m.raw == nil && m.js == nil && m.skip == nil }

// Skipped counts the events this feed handed on without a delivery,
// given up by FeedConfig.Skip.
func (f *Feed) Skipped() uint64 { return f.skipped.Load() }

// Batch is a run of records from a feed.
type Batch struct {
	Records []logport.Record
	// Pending is the number of events the server still holds for the feed
	// after this batch (0: caught up at the time of the last message).
	Pending uint64
	last    feedMsg
}

// Next waits for at least one event (or ctx), then returns up to max events
// already received, without waiting for more.
func (f *Feed) Next(ctx context.Context, max int) (Batch, error) {
	return f.NextWithin(ctx, max, -1)
}

// NextWithin is Next that waits at most wait for the first event (a
// negative wait waits for ever) and returns an empty batch when none came.
func (f *Feed) NextWithin(ctx context.Context, max int, wait time.Duration) (Batch, error) {
	var b Batch
	add := func(m feedMsg) error {
		if m.err != nil {
			return m.err
		}
		if m.skip != nil {
			take := m.skip
			room := max - len(b.Records)
			if room < 1 {
				room = 1
			}
			if len(take) > room {
				rest := take[room:]
				f.carry = feedMsg{skip: rest, pending: m.pending}
				m.pending += uint64(len(rest))
				take = take[:room]
			}
			if b.Records == nil {
				b.Records = make([]logport.Record, 0, min(max, len(take)+len(f.ch)))
			}
			b.Records = append(b.Records, take...)
			b.Pending = m.pending
			b.last = feedMsg{skip: take}
			return nil
		}
		seq, pending, ts, err := deliveryMeta(m)
		if err != nil {
			return fmt.Errorf("feed: %w", err)
		}
		h := m.Headers()
		if len(m.Data()) == 0 && h.Get(nats.MsgSize) != "" && f.headersOnly(ctx) {
			// A headers-only delivery: someone reconfigured the consumer.
			// Folding it would skip a real event; fail the feed instead,
			// and the next feed restores the consumer's configuration.
			return fmt.Errorf("feed: event %d arrived without its body (the consumer was reconfigured headers_only): %w", seq, ErrDrift)
		}
		var r logport.Record
		if session, id := f.log.SessionOf(m.Subject()), h.Get(headerMsgID); f.held != nil && f.held(session, seq, id) {
			r = logport.Record{Seq: seq, Subject: m.Subject(), Session: session, Time: ts, MsgID: id, Data: m.Data(), Held: true}
		} else {
			r = f.log.record(seq, m.Subject(), ts, id, m.Data())
		}
		r.First = firstOfSubject(h)
		if b.Records == nil {
			// One allocation for what is already received.
			b.Records = make([]logport.Record, 0, min(max, len(f.ch)+1))
		}
		b.Records = append(b.Records, r)
		b.Pending = pending
		b.last = m
		return nil
	}
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	if f.carry.skip != nil {
		m := f.carry
		f.carry = feedMsg{}
		if err := add(m); err != nil {
			return b, err
		}
	} else {
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-timeout:
			return b, nil
		case m := <-f.ch:
			if err := add(m); err != nil {
				return b, err
			}
		}
	}
	for len(b.Records) < max && f.carry.skip == nil {
		select {
		case m := <-f.ch:
			if err := add(m); err != nil {
				return b, err
			}
		default:
			return b, nil
		}
	}
	return b, nil
}

// ackMeta reads a delivery's stream sequence, pending count and
// timestamp from its acknowledgement subject without allocating (the
// client library's Metadata allocates a struct and strings per message):
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>, or
// with <domain>.<account hash> after ACK and a token at the end. ok is
// false for any other form.
func ackMeta(reply string) (seq, pending uint64, ts time.Time, ok bool) {
	rest, found := strings.CutPrefix(reply, "$JS.ACK.")
	if !found {
		return 0, 0, time.Time{}, false
	}
	var tok [10]string
	n := 0
	for n < len(tok) {
		var t string
		t, rest, found = strings.Cut(rest, ".")
		tok[n] = t
		n++
		if !found {
			break
		}
	}
	var at int // index of <sseq> in tok
	switch {
	case n == 7 && !found:
		at = 3 // stream, consumer, delivered, sseq, cseq, tm, pending
	case n >= 9:
		at = 5 // domain, account hash, stream, consumer, delivered, sseq, cseq, tm, pending, ...
	default:
		return 0, 0, time.Time{}, false
	}
	seq, err1 := strconv.ParseUint(tok[at], 10, 64)
	tm, err2 := strconv.ParseInt(tok[at+2], 10, 64)
	pending, err3 := strconv.ParseUint(tok[at+3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, time.Time{}, false
	}
	return seq, pending, time.Unix(0, tm), true
}

// headersOnly asks the server whether the feed's consumer sends headers
// only (a publisher may add a Nats-Msg-Size header to an empty event
// itself: that alone proves nothing).
func (f *Feed) headersOnly(ctx context.Context) bool {
	ctx, cancel := f.log.withTimeout(ctx)
	defer cancel()
	info, err := f.cons.Info(ctx)
	return err == nil && info.Config.HeadersOnly
}

// Ack acknowledges every event of the batch and all before it. It does
// not wait for the server: a lost acknowledgement only means the events
// are delivered again, which a consumer must tolerate anyway (at least
// once).
func (f *Feed) Ack(b Batch) error {
	if b.last.none() {
		return nil
	}
	if err := b.last.Ack(); err != nil {
		return fmt.Errorf("feed: ack through %d: %w", b.Records[len(b.Records)-1].Seq, err)
	}
	return nil
}

// Stop stops delivery. Unacknowledged events are redelivered to the next
// feed with the same durable name.
func (f *Feed) Stop() {
	f.once.Do(func() {
		close(f.done)
		if f.cc != nil {
			f.cc.Stop()
		}
	})
}

// FeedPosition is where a feed stands.
type FeedPosition struct {
	// AckFloor is the stream sequence up to which every event has been
	// acknowledged (0 for a new feed).
	AckFloor uint64
	// Delivered is the last stream sequence delivered to any feed of this
	// durable; events in (AckFloor, Delivered] that an earlier feed was
	// handed but did not acknowledge are redelivered only after AckWait.
	Delivered uint64
	// Undelivered counts events not yet delivered.
	Undelivered uint64
	// AckedNone reports a feed that acknowledged none of the events the
	// stream holds: it never acknowledged an event, and its AckFloor is
	// 0, or, on a stream whose first sequences were purged by an erase,
	// below the stream's first. (A consumer reset past skipped
	// events, FeedConfig.Skip, has acknowledged no delivery since, but
	// its AckFloor is a sequence the stream holds, or held before an
	// erase purged everything up to it.)
	AckedNone bool
}

// Position asks the server where the feed stands.
func (f *Feed) Position(ctx context.Context) (FeedPosition, error) {
	ctx, cancel := f.log.withTimeout(ctx)
	defer cancel()
	info, err := f.cons.Info(ctx)
	if err != nil {
		return FeedPosition{}, fmt.Errorf("feed info: %w", err)
	}
	return f.log.position(ctx, info)
}

// FeedPosition asks the server where the durable feed stands without
// creating it; found is false when it does not exist (a feed of that
// name would start from the first event).
func (l *Log) FeedPosition(ctx context.Context, durable string) (pos FeedPosition, found bool, err error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	c, err := l.js.Consumer(ctx, l.name, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return FeedPosition{AckedNone: true}, false, nil
	}
	if err != nil {
		return FeedPosition{}, false, fmt.Errorf("feed %s: %w", durable, err)
	}
	pos, err = l.position(ctx, c.CachedInfo())
	return pos, err == nil, err
}

func (l *Log) position(ctx context.Context, info *jetstream.ConsumerInfo) (FeedPosition, error) {
	pos := FeedPosition{AckFloor: info.AckFloor.Stream, Delivered: info.Delivered.Stream, Undelivered: info.NumPending}
	if info.AckFloor.Consumer == 0 {
		sinfo, err := l.streamInfo(ctx)
		if err != nil {
			return FeedPosition{}, fmt.Errorf("feed position: stream info %s: %w", l.name, err)
		}
		pos.AckedNone = pos.AckFloor == 0 || pos.AckFloor < sinfo.State.FirstSeq
	}
	return pos, nil
}

// ResetFeed deletes a durable feed, so that the next Feed with that name
// starts from the first event (a projection rebuild). Deleting a feed that
// does not exist is not an error.
func (l *Log) ResetFeed(ctx context.Context, durable string) error {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	err := l.js.DeleteConsumer(ctx, l.name, durable)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("reset feed %s: %w", durable, err)
	}
	return nil
}
