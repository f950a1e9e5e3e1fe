package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Decode returns r decoded when the feed left it undecoded (Held); any
// other record is returned as it is.
func (l *Log) Decode(r logport.Record) logport.Record {
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

func (l *Log) record(seq uint64, subject string, t time.Time, msgID string, data []byte) logport.Record {
	r := logport.Record{Seq: seq, Subject: subject, Session: l.SessionOf(subject), Time: t, MsgID: msgID, Data: data}
	r.Envelope, r.Err = events.Decode(data)
	if r.Err == nil && r.Envelope.Session != r.Session {
		r.Err = fmt.Errorf("event %s names session %q but was stored on subject %s: %w", r.Envelope.ID, r.Envelope.Session, subject, events.ErrMalformed)
	}
	if r.Err == nil && (l.cfg.Partitions > 1 || l.cfg.OneStreamSessions != nil) {
		// A publisher that picked the wrong partition's subject: the
		// session's events live in another stream, so this one is not
		// folded, on every engine alike.
		if err := l.checkSession(r.Session); err != nil {
			r.Err = fmt.Errorf("event %s stored on subject %s: %w", r.Envelope.ID, subject, err)
		}
	}
	return r
}

// readBatch is how many messages one direct-get request asks for.
const readBatch = 256

// ReadSession returns the session's events with stream sequence in
// [from, upTo] (upTo 0: to the end), in order, using batched direct gets
// (no consumer is created).
func (l *Log) ReadSession(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	return logport.Collect(func(fn func(logport.Record) error) error {
		return l.ScanSession(ctx, session, from, upTo, fn)
	})
}

type directGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	UpTo    uint64 `json:"up_to_seq,omitempty"`
}

// ScanSession calls fn for each of the session's events with sequence in
// [from, upTo] (upTo 0: to the end at the time of the call), in order.
func (l *Log) ScanSession(ctx context.Context, session string, from, upTo uint64, fn func(logport.Record) error) error {
	if err := l.checkSession(session); err != nil {
		return fmt.Errorf("read session %q: %w", session, err)
	}
	if err := l.scan(ctx, l.Subject(session), from, upTo, fn); err != nil {
		return fmt.Errorf("read session %q: %w", session, err)
	}
	return nil
}

// ScanRange calls fn for every event of the stream with sequence in
// [from, upTo] (upTo 0: to the end), in order, using batched direct gets.
func (l *Log) ScanRange(ctx context.Context, from, upTo uint64, fn func(logport.Record) error) error {
	if err := l.scan(ctx, l.subjBase+"*", from, upTo, fn); err != nil {
		return fmt.Errorf("read events %d..%d: %w", from, upTo, err)
	}
	return nil
}

// scan reads the messages on filter with sequence in [from, upTo] by
// batched direct gets. Errors returned by fn are returned as they are.
func (l *Log) scan(ctx context.Context, filter string, from, upTo uint64, fn func(logport.Record) error) error {
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
	idle := readIdle
	var unservedSince time.Time // the first "no responders" of a run of them
	backoff := noResponderBackoff
	for {
		// A context ended before a request fails the read: the select
		// below may otherwise take an already-arrived reply over a done
		// context and answer a cancelled call with events.
		if err := ctx.Err(); err != nil {
			return err
		}
		rc := l.reconnected()
		var msgs chan *nats.Msg
		var err error
		sub, msgs, err = l.requestBatch(sub, apiSubj, directGetRequest{Seq: from, NextFor: filter, Batch: readBatch, UpTo: upTo})
		if err != nil {
			return err
		}
		got := 0
		var last uint64
		done, again, unserved := false, false, false
		w := newBatchWait(ctx, rc, idle)
		for {
			m, err := w.next(msgs)
			if errors.Is(err, errReadAgain) {
				again = true // the replica or the connection went away mid-batch
				break
			}
			if err != nil {
				return fmt.Errorf("from %d: %w", from, err)
			}
			if st := statusOnly(m); st != "" {
				// 204 EOB ends a batch; 404 means nothing (more) to read;
				// 503 with no description is "no responders", asked
				// again for a while as ask does.
				if st == "503" && m.Header.Get("Description") == "" {
					if unservedSince.IsZero() {
						unservedSince = time.Now()
					}
					if time.Since(unservedSince) < noResponderWait {
						unserved = true
						break
					}
					return fmt.Errorf("from %d: %w", from, nats.ErrNoResponders)
				}
				if st != "204" && st != "404" {
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
		if unserved {
			if err := logport.Sleep(ctx, min(backoff.Next(), noResponderWait-time.Since(unservedSince))); err != nil {
				return err
			}
			continue
		}
		if got > 0 {
			idle = readIdle
			unservedSince, backoff = time.Time{}, noResponderBackoff
		}
		if again {
			if last > 0 {
				from = last + 1
			} else {
				idle = nextIdle(idle)
			}
			continue
		}
		if done || got < readBatch || (upTo != 0 && last >= upTo) {
			return nil
		}
		from = last + 1
	}
}

// requestBatch sends one batched direct get, req, to apiSubj on a fresh
// inbox, and returns the inbox's subscription and the channel its replies
// arrive on. It first ends old, the subscription of the request before:
// the replies of a request given up on cannot mix with the next one's.
func (l *Log) requestBatch(old *nats.Subscription, apiSubj string, req directGetRequest) (*nats.Subscription, chan *nats.Msg, error) {
	if old != nil {
		_ = old.Unsubscribe()
	}
	inbox := l.nc.NewRespInbox()
	// One batch's replies at most arrive on this inbox (readBatch
	// messages and the end-of-batch status): a channel that holds them
	// all, not SubscribeSync's 64k-slot one (512 KiB per read, allocated
	// twice for a write to a new session: at 24 writers the heap's churn
	// held ~4 KB of RSS per session).
	msgs := make(chan *nats.Msg, readBatch+1)
	sub, err := l.nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return nil, nil, err
	}
	body, _ := json.Marshal(req)
	if err := l.nc.PublishRequest(apiSubj, inbox, body); err != nil {
		return sub, nil, err
	}
	return sub, msgs, nil
}

// errReadAgain: a direct-get batch stopped arriving; ask again.
var errReadAgain = errors.New("direct get batch interrupted")

// readIdle is how long a request may go without a reply before it is
// asked again: a replica that dies mid-batch never finishes it, and a
// node that died or went silent never answers. Each ask in a row that
// gets nothing waits twice as long, up to maxReadIdle, so that a server
// slower than readIdle still answers.
const (
	readIdle    = time.Second
	maxReadIdle = 8 * time.Second
)

// nextIdle is the wait after one of idle that got no reply.
func nextIdle(idle time.Duration) time.Duration { return min(2*idle, maxReadIdle) }

// batchWait bounds the wait for one request's replies: it ends
// (errReadAgain) when no reply came for its idle time or the connection
// reconnected (the request went out on the old connection).
type batchWait struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
}

func newBatchWait(ctx context.Context, rc <-chan struct{}, idle time.Duration) *batchWait {
	wctx, cancel := context.WithCancelCause(ctx)
	w := &batchWait{ctx: wctx, cancel: cancel, idle: idle}
	w.timer = time.AfterFunc(idle, func() { cancel(errReadAgain) })
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
		w.timer.Reset(w.idle)
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
// order, up to the last sequence at the time of the call, read with
// CatchUp's ordered consumer.
//
// The ordered consumer may be served by a replica behind the leader
// (after a partition heals), which holds fewer events: a whole-stream
// replay that reads fewer events than the leader counts up to its last
// sequence returns an error matching ErrReplayShort, to be asked again.
func (l *Log) Replay(ctx context.Context, from uint64, fn func(logport.Record) error) error {
	info, err := l.streamInfo(ctx)
	if err != nil {
		return fmt.Errorf("replay: stream info %s: %w", l.name, err)
	}
	last := info.State.LastSeq
	if from == 0 {
		from = 1
	}
	want := uint64(0) // events a whole-stream replay must read (0: not checked)
	if from <= info.State.FirstSeq {
		want = info.State.Msgs
	}
	var read uint64
	var fnErr error
	_, err = l.CatchUp(ctx, from, func(recs []logport.Record, _ uint64) error {
		for _, r := range recs {
			if r.Seq > last {
				return errReplayEnd // appended after the call
			}
			read++
			if fnErr = fn(r); fnErr != nil {
				return fnErr
			}
			if r.Seq >= last {
				return errReplayEnd
			}
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return fnErr
	case errors.Is(err, errReplayEnd):
	case err != nil:
		return fmt.Errorf("replay: %w", err)
	}
	if read < want {
		return fmt.Errorf("replay: %w: read %d of the %d events the stream leader holds up to sequence %d", ErrReplayShort, read, want, last)
	}
	return nil
}

// errReplayEnd stops Replay's CatchUp at the stream's last sequence of the
// time of the call.
var errReplayEnd = errors.New("replay reached its last sequence")

// ErrReplayShort: a replay read fewer events than the stream's leader
// holds (a replica behind it answered); ask again.
var ErrReplayShort = errors.New("replay came up short of the stream leader")

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
