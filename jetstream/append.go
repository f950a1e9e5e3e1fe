package jetstream

import (
	"context"
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

// Append writes events to a session, all or nothing, provided the
// session's last stored sequence is expected (0: the session has no
// events). A stale expectation returns a *ConflictError (errors.Is
// ErrConflict). Each event's ULID is its Nats-Msg-Id, so a retry of the
// same envelopes within the duplicate window stores them once and returns
// Duplicate.
//
// Appends to one session are serialized within this process.
func (l *Log) Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (logport.AppendResult, error) {
	if err := l.checkSession(session); err != nil {
		return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, err)
	}
	if len(evs) == 0 {
		return logport.AppendResult{}, errors.New("append: no events given")
	}
	if len(evs) > logport.MaxBatch {
		return logport.AppendResult{}, fmt.Errorf("append: %d events exceed the atomic batch limit %d: split the command", len(evs), logport.MaxBatch)
	}
	if len(evs) > 1 && !l.atomic {
		return logport.AppendResult{}, fmt.Errorf("append %d events to %q: %w (server or stream has no atomic publish; upgrade nats-server to 2.12+ or append one event at a time)", len(evs), session, logport.ErrBatchUnsupported)
	}
	// Asked before the guard: a fault recorded after the guard passed
	// closes this channel.
	faulted := l.faults()
	if l.cfg.Guard != nil {
		if err := l.cfg.Guard(); err != nil {
			return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, err)
		}
	}
	msgs, err := l.appendMsgs(session, evs)
	if err != nil {
		return logport.AppendResult{}, err
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	mu := l.lock(session)
	mu.Lock()
	defer mu.Unlock()
	select {
	case <-faulted:
		// The store faulted while this append waited for the session:
		// nothing is sent yet, so a refusal is definite.
		if l.cfg.Guard != nil {
			if err := l.cfg.Guard(); err != nil {
				return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, err)
			}
		}
		if faulted = l.faults(); isClosed(faulted) {
			return logport.AppendResult{}, fmt.Errorf("append to %q: %w: the store failed a write or JetStream is disabled: nothing was sent; retry when the disk has space again", session, logport.ErrStorageFull)
		}
	default:
	}
	attempt := func(ctx context.Context, abort abortOn) (logport.AppendResult, error) {
		if len(msgs) == 1 {
			return l.appendOne(ctx, session, expected, msgs[0], abort)
		}
		return l.appendBatch(ctx, session, expected, msgs, abort)
	}
	res, err := l.resendOnReconnect(ctx, faulted, attempt)
	if errors.Is(err, errStoreFault) {
		return l.afterFault(ctx, session, expected, evs, err)
	}
	// Some refusals do not settle the append; the same messages are sent
	// again (their ids dedupe) a few times before the refusal is taken:
	//   - A replicated stream's leader acknowledges a write before it
	//     stops counting it in flight (nats-server 2.15 applies the entry,
	//     acks, then clears the subject's in-flight mark), so the session's
	//     next CAS publish can be refused with 10164 although the session
	//     is still at expected: nothing was stored and nobody else wrote.
	//   - Every replica's server gets the publish, and a deposed leader
	//     that has not learnt it yet (a node whose partition just healed)
	//     still answers it, at once, from its store behind the current
	//     leader's: a sequence below expected, or 10164 for a proposal of
	//     its own that never committed. The current leader stores the
	//     append meanwhile, and its acknowledgement comes second.
	// A real conflict moves the session past expected.
	refused := logport.Backoff{First: time.Millisecond, Max: 256 * time.Millisecond}
	for n := 0; n < refusalResends && unsettledRefusal(err, expected); n++ {
		if logport.Sleep(ctx, refused.Next()) != nil {
			break
		}
		res, err = l.resendOnReconnect(ctx, faulted, attempt)
		if errors.Is(err, errStoreFault) {
			return l.afterFault(ctx, session, expected, evs, err)
		}
	}
	if unsettledRefusal(err, expected) && ctx.Err() != nil {
		// The call ended among the re-sends: a copy may be stored.
		return logport.AppendResult{}, &logport.OutcomeUnknownError{Session: session, AfterSeq: expected, Err: err}
	}
	if err != nil && (errors.Is(err, logport.ErrConflict) || errors.Is(err, errDuplicateInBatch)) {
		if dup, done, derr := l.storedBefore(ctx, session, expected, evs, err); done {
			return dup, derr
		}
	}
	if err == nil && res.Duplicate {
		return l.checkDuplicate(ctx, session, res, evs)
	}
	return res, err
}

// appendMsgs are the messages that store evs on session: each event
// encoded, with its ULID as Nats-Msg-Id and its type in a header.
func (l *Log) appendMsgs(session string, evs []events.Envelope) ([]*nats.Msg, error) {
	msgs := make([]*nats.Msg, len(evs))
	subj := l.Subject(session)
	for i, e := range evs {
		if e.Session != session {
			return nil, fmt.Errorf("append: event %s is for session %q, not %q", e.ID, e.Session, session)
		}
		data, err := events.Encode(e)
		if err != nil {
			return nil, fmt.Errorf("append: encode event %s: %w", e.ID, err)
		}
		m := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{
			headerMsgID:     []string{e.ID},
			HeaderEventType: []string{string(e.Type)},
		}}
		msgs[i] = m
	}
	return msgs, nil
}

// storedBefore answers an append refused as a conflict or for ids the
// batch's dedupe window holds (err): the server checks the expected
// sequence (and, for batches, the ids) before its dedupe window, so a
// retry of an append that was stored fails so. It looks for the events
// after expected; done reports that (res, rerr) is the append's answer,
// otherwise err stands.
func (l *Log) storedBefore(ctx context.Context, session string, expected uint64, evs []events.Envelope, err error) (res logport.AppendResult, done bool, rerr error) {
	var atLeast uint64 // the leader's last sequence of the session
	var ce *logport.ConflictError
	if errors.As(err, &ce) {
		atLeast = ce.Actual
		if atLeast < expected {
			// Still below expected after the re-sends: a deposed leader
			// may have answered them all; ask the leader again.
			if n, lerr := l.LeaderLastSeq(ctx, session); lerr == nil && n > atLeast {
				atLeast = n
			}
		}
	}
	if errors.Is(err, errDuplicateInBatch) {
		// 10201 names no sequence: ask the leader where the session
		// is, so that a replica behind it cannot hide a stored batch
		// (the server checks a batch's ids before its expected
		// sequence, so a re-sent stored batch is answered so). Not
		// knowing is an unknown outcome, never "another session's".
		n, lerr := l.LeaderLastSeq(ctx, session)
		if lerr != nil {
			return logport.AppendResult{}, true, &logport.OutcomeUnknownError{Session: session, AfterSeq: expected, Err: errors.Join(err, lerr)}
		}
		atLeast = n
	}
	dup, ok, seen := l.findStored(ctx, session, expected, evs)
	// Direct gets may be answered by a replica that lags the leader
	// (after a partition heals, say) and miss our own events stored
	// by an earlier attempt: read again until the replies reach the
	// sequence the leader reported. Answering "conflict" for a stored
	// append would tell the caller nothing was written.
	// When the session is at or below expected, nothing after
	// expected is stored: the conflict is the answer (without this,
	// an expectation ahead of the session read until the timeout).
	reread := logport.Backoff{First: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	for !ok && expected < atLeast && seen < atLeast {
		if err := logport.Sleep(ctx, reread.Next()); err != nil {
			return logport.AppendResult{}, true, fmt.Errorf("append to %q: the session is at sequence %d but reads reach only %d: cannot tell whether this append was stored: %w", session, atLeast, seen, err)
		}
		dup, ok, seen = l.findStored(ctx, session, expected, evs)
	}
	if ok {
		return dup, true, nil
	}
	if errors.Is(err, errDuplicateInBatch) {
		// The ids are in the dedupe window but not on this session
		// after expected: another session's events hold them.
		return logport.AppendResult{}, true, fmt.Errorf("append batch to %q: %w (%w)", session, &logport.KeyInUseError{Key: evs[0].ID, Session: session}, err)
	}
	return logport.AppendResult{}, false, nil
}

// refusalResends bounds the re-sends of an append whose refusal does
// not settle it (unsettledRefusal): waits of 1, 2, 4, ... 256 ms, about
// half a second in all.
const refusalResends = 10

// unsettledRefusal reports a CAS refusal that does not show the session
// past expected: one for a write in flight while the session is at
// expected (inFlightRefusal), or one naming a sequence below expected,
// which the current leader never answers for a session the caller read at
// expected (a session's last sequence does not go back) but a deposed one
// does. An expectation truly ahead of the session keeps the latter answer
// through the re-sends, and is a conflict after them.
func unsettledRefusal(err error, expected uint64) bool {
	var ce *logport.ConflictError
	return errors.As(err, &ce) && (ce.Actual < expected || ce.Actual == expected && ce.InFlight)
}

// checkDuplicate verifies the server's "duplicate" answer: the dedupe
// window is stream-wide (Nats-Msg-Id), so the sequences it names may hold
// another session's events with these ids. Only when the messages there
// are this session's events with these ids are they this append's;
// otherwise the append is refused (ErrKeyInUse) and nothing is returned
// for the caller to fold (handing another session's sequence
// to the session's state wedged it).
func (l *Log) checkDuplicate(ctx context.Context, session string, res logport.AppendResult, evs []events.Envelope) (logport.AppendResult, error) {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	if res.Last-res.First+1 != uint64(len(evs)) {
		return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, &logport.KeyInUseError{Key: ids[0], Session: session})
	}
	ok, err := l.StoredAt(ctx, session, res.First, ids)
	if err != nil {
		return logport.AppendResult{}, fmt.Errorf("append to %q: the server says event %s is stored at sequence %d: %w", session, ids[0], res.First, err)
	}
	if !ok {
		return logport.AppendResult{}, fmt.Errorf("append to %q: %w", session, &logport.KeyInUseError{Key: ids[0], Session: session})
	}
	return res, nil
}

// errDuplicateInBatch is the server's answer to a batch whose ids are
// already in the dedupe window (error code 10201).
var errDuplicateInBatch = errors.New("batch contains an already stored event id")

const codeBatchDuplicateID jetstream.ErrorCode = 10201

// findStored reports whether every event of evs is stored on the session
// after seq expected, in order and contiguously, and where; seen is the
// highest sequence of the session the read reached.
func (l *Log) findStored(ctx context.Context, session string, expected uint64, evs []events.Envelope) (res logport.AppendResult, found bool, seen uint64) {
	i := 0
	broken := false // a foreign event between two of ours: not ours as a whole
	err := l.ScanSession(ctx, session, expected+1, 0, func(r logport.Record) error {
		seen = r.Seq
		if broken || i == len(evs) {
			return nil
		}
		if r.Err != nil || r.Envelope.ID != evs[i].ID {
			broken = i > 0
			return nil
		}
		if i == 0 {
			res.First = r.Seq
		}
		res.Last = r.Seq
		i++
		return nil
	})
	if err != nil {
		return logport.AppendResult{}, false, seen
	}
	res.Duplicate = true
	return res, !broken && i == len(evs), seen
}

func (l *Log) appendOne(ctx context.Context, session string, expected uint64, m *nats.Msg, abort abortOn) (logport.AppendResult, error) {
	m.Header[headerExpectedSeq] = []string{strconv.FormatUint(expected, 10)}
	ack, err := l.publish(ctx, session, expected, m, abort)
	if err != nil {
		return logport.AppendResult{}, err
	}
	return logport.AppendResult{First: ack.Seq, Last: ack.Seq, Duplicate: ack.Duplicate}, nil
}

// publish sends an append's message (its only one, or its batch's commit)
// and reads the server's acknowledgement, each failure classified: the
// server's refusal (publishError), no stream listening, or a transport
// error whose outcome may be unknown (transportError).
func (l *Log) publish(ctx context.Context, session string, expected uint64, m *nats.Msg, abort abortOn) (pubAck, error) {
	resp, err := l.acks.request(ctx, m, abort)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			return pubAck{}, fmt.Errorf("append to %q: %w", session, err)
		}
		return pubAck{}, transportError(session, expected, err)
	}
	ack, err := decodeAck(resp)
	if err != nil {
		return pubAck{}, l.publishError(ctx, session, expected, err)
	}
	return ack, nil
}

func (l *Log) appendBatch(ctx context.Context, session string, expected uint64, msgs []*nats.Msg, abort abortOn) (logport.AppendResult, error) {
	id := msgs[0].Header.Get(headerMsgID)
	n := len(msgs)
	for i, m := range msgs {
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i == 0 {
			m.Header.Set(headerExpectedSeq, strconv.FormatUint(expected, 10))
		}
		if i < n-1 {
			if err := l.nc.PublishMsg(m); err != nil {
				// Nothing is committed before the last message.
				return logport.AppendResult{}, fmt.Errorf("append batch to %q: publish event %d of %d: %w", session, i+1, n, notSent(err))
			}
		}
	}
	last := msgs[n-1]
	last.Header.Set(headerBatchCommit, "1")
	ack, err := l.publish(ctx, session, expected, last, abort)
	if err != nil {
		return logport.AppendResult{}, err
	}
	return logport.AppendResult{First: ack.Seq - uint64(n) + 1, Last: ack.Seq, Duplicate: ack.Duplicate}, nil
}

// inFlightRefusal reports a CAS refusal after which the session is still
// at the expected sequence: the leader refused the publish because a write
// to the subject was still in flight (10164), not because the session
// moved.
func inFlightRefusal(err error, expected uint64) bool {
	var ce *logport.ConflictError
	return errors.As(err, &ce) && ce.Actual == expected && ce.InFlight
}

func (l *Log) publishError(ctx context.Context, session string, expected uint64, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == codeBatchDuplicateID {
		return fmt.Errorf("%w: %w", errDuplicateInBatch, err)
	}
	if errors.As(err, &apiErr) && apiErr.ErrorCode == codeMsgIDInProcess {
		// An earlier try with the same message id is still being stored
		// (a re-send after a timeout or a leader change): its outcome is
		// not known yet, and a later re-send learns it (the stored
		// sequence as a duplicate, or a store once the leader changed).
		return &logport.OutcomeUnknownError{Session: session, AfterSeq: expected, Err: err}
	}
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSeq || apiErr.ErrorCode == codeWrongLastSeqConstant) {
		ce := &logport.ConflictError{Session: session, Expected: expected, InFlight: apiErr.ErrorCode == codeWrongLastSeqConstant}
		if _, after, ok := strings.Cut(apiErr.Description, "wrong last sequence: "); ok {
			if n, perr := strconv.ParseUint(strings.TrimSpace(after), 10, 64); perr == nil {
				ce.Actual = n
				return ce
			}
		}
		// 10164 names no sequence either; the leader's answer, since the
		// caller acts on it (a re-send while it equals expected).
		if n, lerr := l.LeaderLastSeq(ctx, session); lerr == nil {
			ce.Actual = n
		} else if n, lerr := l.LastSeq(ctx, session); lerr == nil {
			ce.Actual = n
		}
		return ce
	}
	return transportError(session, expected, err)
}

// transportError classifies an append's failure that is not the server's
// answer: a publish that never left (the connection was down: no publish
// is buffered across a reconnect) stored nothing; one that left and got
// no acknowledgement may have been stored.
func transportError(session string, expected uint64, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		return fmt.Errorf("append to %q: %w", session, err)
	case errors.Is(err, nats.ErrReconnectBufExceeded):
		return fmt.Errorf("append to %q: %w", session, notSent(err))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return &logport.OutcomeUnknownError{Session: session, AfterSeq: expected, Err: err}
	}
	return fmt.Errorf("append to %q: %w", session, err)
}

// notSent marks a publish refused before it left the process.
func notSent(err error) error {
	if errors.Is(err, nats.ErrReconnectBufExceeded) {
		return fmt.Errorf("%w (%w)", logport.ErrNotSent, err)
	}
	return err
}
