package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// Record is one stored event as read back from the log. When the payload
// cannot be decoded (R26), Err says why and Envelope holds what could be
// read of the header; the record is still returned so the caller can
// report and skip it.
type Record struct {
	Seq     uint64
	Subject string
	Session string
	Time    time.Time
	// MsgID is the message's Nats-Msg-Id header as stored, "" when it has
	// none; the fold checks it against the envelope id (R28).
	MsgID    string
	Data     []byte
	Envelope events.Envelope
	Err      error
	// First reports that the server stored the message on the condition
	// that its subject held no earlier message (Nats-Expected-Last-
	// Subject-Sequence: 0, as the engine appends a new session's first
	// event or batch): the session had no events before it, so a
	// projection need not read a view it cannot have (#28 item 1).
	First bool
	// Held reports that the feed did not decode the record because its
	// FeedConfig.Held said the consumer already holds the event (a writer
	// of the same process handed it over, #28): Envelope is zero and Err
	// nil. Log.Decode decodes it when the consumer needs it after all.
	Held bool
}

// Decode returns r decoded when the feed left it undecoded (Held); any
// other record is returned as it is.
func (l *Log) Decode(r Record) Record {
	if !r.Held {
		return r
	}
	d := l.record(r.Seq, r.Subject, r.Time, r.MsgID, r.Data)
	d.First = r.First
	return d
}

// firstOfSubject reports whether h made the message's store conditional
// on its own subject being empty.
func firstOfSubject(h nats.Header) bool {
	return h.Get(headerExpectedSeq) == "0" && h.Get(jetstream.ExpectedLastSubjSeqSubjHeader) == ""
}

func (l *Log) record(seq uint64, subject string, t time.Time, msgID string, data []byte) Record {
	r := Record{Seq: seq, Subject: subject, Session: l.SessionOf(subject), Time: t, MsgID: msgID, Data: data}
	r.Envelope, r.Err = events.Decode(data)
	if r.Err == nil && r.Envelope.Session != r.Session {
		r.Err = fmt.Errorf("event %s names session %q but was stored on subject %s: %w", r.Envelope.ID, r.Envelope.Session, subject, events.ErrMalformed)
	}
	return r
}

// readBatch is how many messages one direct-get request asks for.
const readBatch = 256

// ReadSession returns the session's events with stream sequence in
// [from, upTo] (upTo 0: to the end), in order, using batched direct gets
// (no consumer is created).
func (l *Log) ReadSession(ctx context.Context, session string, from, upTo uint64) ([]Record, error) {
	var out []Record
	err := l.ScanSession(ctx, session, from, upTo, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

type directGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	UpTo    uint64 `json:"up_to_seq,omitempty"`
}

// ScanSession calls fn for each of the session's events with sequence in
// [from, upTo] (upTo 0: to the end at the time of the call), in order.
func (l *Log) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(Record) error) error {
	if err := events.ValidateSessionID(session); err != nil {
		return fmt.Errorf("read session %q: %w", session, err)
	}
	if err := l.scan(ctx, l.Subject(session), from, upTo, fn); err != nil {
		return fmt.Errorf("read session %q: %w", session, err)
	}
	return nil
}

// ScanRange calls fn for every event of the stream with sequence in
// [from, upTo] (upTo 0: to the end), in order, using batched direct gets.
func (l *Log) ScanRange(ctx context.Context, from, upTo uint64, fn func(Record) error) error {
	if err := l.scan(ctx, l.subjBase+"*", from, upTo, fn); err != nil {
		return fmt.Errorf("read events %d..%d: %w", from, upTo, err)
	}
	return nil
}

// scan reads the messages on filter with sequence in [from, upTo] by
// batched direct gets. Errors returned by fn are returned as they are.
func (l *Log) scan(ctx context.Context, filter string, from, upTo uint64, fn func(Record) error) error {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	if from == 0 {
		from = 1
	}
	var sub *nats.Subscription
	defer func() {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}()
	// nats.go's stream API gets one message per request; the batched
	// direct get (batch, up_to_seq) is built here, on the log's API
	// prefix or domain like every other request.
	apiSubj := l.cfg.apiPrefix() + "DIRECT.GET." + l.name
	var seen uint64 // the last sequence handed to fn
	for {
		// A fresh inbox per request: the replies of a request given up
		// on (see below) cannot mix with the next one's.
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		inbox := l.nc.NewRespInbox()
		// One batch's replies at most arrive on this inbox (readBatch
		// messages and the end-of-batch status): a channel that holds
		// them all, not SubscribeSync's 64k-slot one (512 KiB per read,
		// allocated twice for a write to a new session: at 24 writers
		// the heap's churn held ~4 KB of RSS per session, #24).
		msgs := make(chan *nats.Msg, readBatch+1)
		var err error
		if sub, err = l.nc.ChanSubscribe(inbox, msgs); err != nil {
			return err
		}
		rc := l.reconnected()
		req, _ := json.Marshal(directGetRequest{Seq: from, NextFor: filter, Batch: readBatch, UpTo: upTo})
		if err := l.nc.PublishRequest(apiSubj, inbox, req); err != nil {
			return err
		}
		got := 0
		var last uint64
		done, again := false, false
		w := newBatchWait(ctx, rc)
		for {
			m, err := w.next(msgs)
			if errors.Is(err, errReadAgain) {
				again = true // the replica or the connection went away mid-batch
				break
			}
			if err != nil {
				return fmt.Errorf("from %d: %w", from, err)
			}
			if len(m.Data) == 0 && m.Header.Get("Status") != "" {
				// 204 EOB ends a batch; 404 means nothing (more) to read.
				if st := m.Header.Get("Status"); st != "204" && st != "404" {
					return fmt.Errorf("direct get status %s %s", st, m.Header.Get("Description"))
				}
				break
			}
			seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil {
				return fmt.Errorf("direct get reply without sequence: %w", err)
			}
			if upTo != 0 && seq > upTo {
				// The server's up_to_seq does not bound next_by_subj
				// batches: drain the rest of this batch unread.
				done = true
				continue
			}
			got++
			last = seq
			if seq <= seen {
				continue // handed over already
			}
			seen = seq
			l.msgsRead.Add(1)
			t, _ := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
			// A direct get reply carries the stored message's own headers
			// (Nats-Msg-Id among them) beside the Nats-Stream ones.
			r := l.record(seq, m.Header.Get(jetstream.SubjectHeader), t, m.Header.Get(headerMsgID), m.Data)
			r.First = firstOfSubject(m.Header)
			if err := fn(r); err != nil {
				return err
			}
		}
		w.stop()
		if again {
			if last > 0 {
				from = last + 1
			}
			continue
		}
		if done || got < readBatch || (upTo != 0 && last >= upTo) {
			return nil
		}
		from = last + 1
	}
}

// errReadAgain: a direct-get batch stopped arriving; ask again.
var errReadAgain = errors.New("direct get batch interrupted")

// readIdle is how long a direct-get batch may go without a reply before
// it is asked again: a replica that dies mid-batch never finishes it.
const readIdle = time.Second

// batchWait bounds the wait for one direct-get batch's replies: it ends
// (errReadAgain) when no reply came for readIdle or the connection
// reconnected (the request went out on the old connection).
type batchWait struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

func newBatchWait(ctx context.Context, rc <-chan struct{}) *batchWait {
	wctx, cancel := context.WithCancelCause(ctx)
	w := &batchWait{ctx: wctx, cancel: cancel}
	w.timer = time.AfterFunc(readIdle, func() { cancel(errReadAgain) })
	go func() {
		select {
		case <-rc:
			cancel(errReadAgain)
		case <-wctx.Done():
		}
	}()
	return w
}

// next waits for the next reply on msgs.
func (w *batchWait) next(msgs <-chan *nats.Msg) (*nats.Msg, error) {
	select {
	case m := <-msgs:
		w.timer.Reset(readIdle)
		return m, nil
	case <-w.ctx.Done():
		if errors.Is(context.Cause(w.ctx), errReadAgain) {
			return nil, errReadAgain
		}
		return nil, w.ctx.Err()
	}
}

func (w *batchWait) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// Replay calls fn for every event of the stream with sequence >= from, in
// order, up to the last sequence at the time of the call, using an ordered
// consumer.
func (l *Log) Replay(ctx context.Context, from uint64, fn func(Record) error) error {
	last, err := l.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	if from == 0 {
		from = 1
	}
	if last < from {
		return nil
	}
	cons, err := l.js.OrderedConsumer(ctx, l.name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{l.subjBase + "*"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return fmt.Errorf("replay from %d: %w", from, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("replay from %d: %w", from, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("replay: %w", ctx.Err())
			}
			return fmt.Errorf("replay: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		r := l.record(md.Sequence.Stream, m.Subject(), md.Timestamp, m.Headers().Get(headerMsgID), m.Data())
		r.First = firstOfSubject(m.Headers())
		if err := fn(r); err != nil {
			return err
		}
		if md.Sequence.Stream >= last || md.NumPending == 0 {
			return nil
		}
	}
}

// FeedConfig configures a durable feed.
type FeedConfig struct {
	// Durable is the consumer name. Required.
	Durable string
	// MaxAckPending bounds unacknowledged events. Default 100,000.
	MaxAckPending int
	// AckWait is how long before unacknowledged events are redelivered.
	// Default 30s.
	AckWait time.Duration
	// Held, when set, is asked for each delivered event (its session,
	// stream sequence and Nats-Msg-Id header) before it is decoded: when
	// it returns true the record is delivered undecoded, with Held set
	// (#28). It runs on the feed's goroutine and must be cheap.
	Held func(session string, seq uint64, msgID string) bool
	// Pace, when positive, replaces the standing pull (every event sent
	// alone as it is stored, one delivery per event) by no-wait pulls of
	// what the stream holds, one every Pace while the feed is caught up
	// and back to back while it is behind (#28): events arrive in batches, at most
	// about Pace after they were stored, and a writer of the same process
	// does not compete with one delivery per event. Zero: a standing pull.
	Pace time.Duration
}

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
}

// Feed creates (or resumes) a durable consumer over all events.
func (l *Log) Feed(ctx context.Context, cfg FeedConfig) (*Feed, error) {
	if !events.ValidToken(cfg.Durable) {
		return nil, fmt.Errorf("feed: durable name %q must be one token of [A-Za-z0-9_-]", cfg.Durable)
	}
	if cfg.MaxAckPending == 0 {
		cfg.MaxAckPending = 100000
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	cons, err := l.js.CreateOrUpdateConsumer(ctx, l.name, l.feedConsumerConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("feed %s: %w", cfg.Durable, err)
	}
	f := &Feed{log: l, cons: cons, ch: make(chan feedMsg, 8192), done: make(chan struct{}), held: cfg.Held}
	if cfg.Pace > 0 {
		if err := f.startPull(cfg.Durable, cfg.Pace); err != nil {
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
		jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {}))
	if err != nil {
		return nil, fmt.Errorf("feed %s: consume: %w", cfg.Durable, err)
	}
	return f, nil
}

// feedMsg is a delivered message: a jetstream.Msg of the standing pull,
// or the core message of a paced feed's own pulls (#28), without the
// client library's per-message wrapper, fetch goroutine and timers. A
// value, so that a paced delivery costs no allocation of its own.
type feedMsg struct {
	js  jetstream.Msg
	raw *nats.Msg
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

// Ack acknowledges the message (and, AckAll, every one before it).
func (m feedMsg) Ack() error {
	if m.raw != nil {
		return m.raw.Respond([]byte("+ACK"))
	}
	return m.js.Ack()
}

func (m feedMsg) none() bool { return m.raw == nil && m.js == nil }

// apiPrefix is the JetStream API prefix of the log's requests.
func (l *Log) apiPrefix() string {
	o := l.js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return "$JS.API."
}

// startPull starts a paced feed: no-wait pull requests on one inbox,
// sent every pace, and at once while a delivery says more events are
// pending than are asked for (at most two pulls outstanding), so a feed
// that is behind gets batches back to back and one that is caught up
// asks once per pace. A lost request or delivery (a leader election) is
// asked again at the next tick; a lost delivery is a gap the consumer
// fills from the log (see Feed).
func (f *Feed) startPull(durable string, pace time.Duration) error {
	nc := f.log.nc
	inbox := nc.NewInbox()
	next := f.log.apiPrefix() + "CONSUMER.MSG.NEXT." + f.log.name + "." + durable
	req := []byte(fmt.Sprintf(`{"batch":%d,"no_wait":true}`, pacedBatch))
	var (
		mu     sync.Mutex
		credit int  // events asked for and not received
		recv   bool // a message came since the last tick
		got    bool // an event came since the last tick
		idle   uint // ticks in a row without an event (at most pacedIdleShift)
	)
	ask := func() { // mu held
		if nc.PublishRequest(next, inbox, req) == nil {
			credit += pacedBatch
		}
	}
	// An asynchronous subscription without pending limits: while the
	// consumer folds, deliveries wait in the subscription's queue (at most
	// the feed's MaxAckPending), never dropped as a full channel would
	// drop them (a dropped last delivery would wait for AckWait).
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		mu.Lock()
		recv = true
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			credit = 0 // a pull ended (no messages, or a warning)
			mu.Unlock()
			return
		}
		credit = max(credit-1, 0)
		got = true
		if _, pending, _, ok := ackMeta(m.Reply); ok {
			switch {
			case pending == 0:
				credit = 0 // caught up: the no-wait pulls have ended
			case pending > uint64(credit) && credit < pacedBatch:
				ask()
			}
		}
		mu.Unlock()
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
	go func() {
		defer sub.Unsubscribe() //nolint:errcheck // the feed is stopping
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
				ask()
			}
			// An idle feed asks less often: the wait doubles with each
			// tick without an event, up to pace<<pacedIdleShift (40 ms at
			// the default 5 ms), and is pace again at the next event, so
			// an idle engine sends 25 pulls a second, not 200.
			if got {
				idle = 0
			} else if idle < pacedIdleShift {
				idle++
			}
			recv, got = false, false
			mu.Unlock()
			t.Reset(pace << idle)
		}
	}()
	return nil
}

// Batch is a run of records from a feed.
type Batch struct {
	Records []Record
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
		seq, pending, ts, ok := ackMeta(m.Reply())
		if !ok {
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("feed: %w", err)
			}
			seq, pending, ts = md.Sequence.Stream, md.NumPending, md.Timestamp
		}
		h := m.Headers()
		if len(m.Data()) == 0 && h.Get(nats.MsgSize) != "" && f.headersOnly(ctx) {
			// A headers-only delivery: someone reconfigured the consumer.
			// Folding it would skip a real event; fail the feed instead,
			// and the next feed restores the consumer's configuration.
			return fmt.Errorf("feed: event %d arrived without its body (the consumer was reconfigured headers_only): %w", seq, ErrDrift)
		}
		var r Record
		if session, id := f.log.SessionOf(m.Subject()), h.Get(headerMsgID); f.held != nil && f.held(session, seq, id) {
			r = Record{Seq: seq, Subject: m.Subject(), Session: session, Time: ts, MsgID: id, Data: m.Data(), Held: true}
		} else {
			r = f.log.record(seq, m.Subject(), ts, id, m.Data())
		}
		r.First = firstOfSubject(h)
		if b.Records == nil {
			// One allocation for what is already received (#28).
			b.Records = make([]Record, 0, min(max, len(f.ch)+1))
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
	for len(b.Records) < max {
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
// timestamp from its acknowledgement subject without allocating (#28: the
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
	// AckedNone reports a feed that never acknowledged an event. Its
	// AckFloor is 0, or, on a stream whose first sequences were purged by
	// an erase (#30), the sequence before the stream's first.
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
	return FeedPosition{AckFloor: info.AckFloor.Stream, Delivered: info.Delivered.Stream, Undelivered: info.NumPending,
		AckedNone: info.AckFloor.Consumer == 0}, nil
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
