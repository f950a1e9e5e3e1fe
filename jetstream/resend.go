package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// errStoreFault cancels an append attempt whose store failed a write or
// whose JetStream was disabled while it waited for the server's reply:
// nats-server never answers the publish whose write failed.
var errStoreFault = errors.New("the store failed a write or JetStream was disabled while the append waited for its acknowledgement")

// faultReadWait bounds the read with which an append cut short by a store
// fault looks for its events: the answer comes well within a client's
// timeout, however the store fares.
const faultReadWait = time.Second

func (l *Log) faults() <-chan struct{} {
	if l.cfg.Faults == nil {
		return nil
	}
	return l.cfg.Faults()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// afterFault answers an append whose wait for an acknowledgement a store
// fault cut short. The publish was sent, so whether it was
// stored is not known from the server's side: the session is read after
// expected for the append's ids.
//
//   - Found at or below the stream's last sequence (stream info, from the
//     file store's state, which counts a message only once its write
//     succeeded): stored, as durable as any acknowledged append: success.
//   - Found above it, or the stream info unreadable: a message whose
//     write failed can still sit in the server's block cache (nats-server
//     accounts it in the block before the write, and reads may find it
//     there) but is not on disk and is gone when JetStream reloads the
//     store: not a success.
//   - Not found: the fault may be another stream's (the views bucket on
//     the same disk) and the publish still queued in the server, to be
//     stored after this read; only the answer "unknown" is true.
//
// Either of the last two answers outcome unknown (503, "read the session
// at seq N"), at once instead of after the whole try.
func (l *Log) afterFault(ctx context.Context, session string, expected uint64, evs []events.Envelope, err error) (logport.AppendResult, error) {
	rctx, cancel := context.WithTimeout(ctx, faultReadWait)
	defer cancel()
	if res, found, _ := l.findStored(rctx, session, expected, evs); found {
		if last, lerr := l.LastStreamSeq(rctx); lerr == nil && res.Last <= last {
			res.Duplicate = false // this append's own write stored them
			return res, nil
		}
	}
	var ou *logport.OutcomeUnknownError
	if errors.As(err, &ou) {
		err = ou.Err // not "outcome unknown" twice
	}
	if !errors.Is(err, errStoreFault) {
		err = fmt.Errorf("%w: %w", errStoreFault, err)
	}
	return logport.AppendResult{}, &logport.OutcomeUnknownError{Session: session, AfterSeq: expected, Err: err}
}

// errReconnected cancels an append attempt whose connection reconnected
// while it waited for the server's reply.
var errReconnected = errors.New("connection reconnected: re-sending")

// maxResends bounds the re-sends of one append after reconnects (each
// needs a reconnect, so a flapping connection cannot spin).
const maxResends = 16

// watchReconnects starts following the connection's status: each
// reconnect closes the current l.rc. It stops when the connection closes.
func (l *Log) watchReconnects() {
	l.rc = make(chan struct{})
	ch := l.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	go func() {
		defer l.nc.RemoveStatusListener(ch)
		for st := range ch {
			if st == nats.CLOSED {
				return
			}
			l.rcMu.Lock()
			close(l.rc)
			l.rc = make(chan struct{})
			l.rcMu.Unlock()
		}
	}()
}

// reconnected returns a channel closed at the connection's next reconnect.
func (l *Log) reconnected() <-chan struct{} {
	l.rcMu.Lock()
	defer l.rcMu.Unlock()
	return l.rc
}

// resendOnReconnect runs attempt and, when the connection reconnects
// before its reply came, abandons it and runs it again at once: the
// request went out on the old connection, so no reply is coming, and
// waiting out the attempt's timeout would stall the append for nothing.
// The re-sent messages carry the same ids and expected
// sequence: if the first ones were stored, the server deduplicates them or
// reports the expected sequence stale, and Append finds them stored.
//
// A store fault (faulted closed) abandons the attempt too, and the error
// returned then matches errStoreFault. The attempt's wait selects on
// these signals itself (abortOn): no context or goroutine per append.
func (l *Log) resendOnReconnect(ctx context.Context, faulted <-chan struct{}, attempt func(context.Context, abortOn) (logport.AppendResult, error)) (logport.AppendResult, error) {
	for n := 0; ; n++ {
		abort := abortOn{reconnected: l.reconnected(), faulted: faulted}
		if n > 0 {
			// Right after a reconnect the reply may still be lost: the
			// servers learn the new connection's reply interest over
			// their routes asynchronously. Ask again soon (the resend
			// is deduplicated) rather than wait out the whole attempt.
			t := time.NewTimer(resendWait)
			defer t.Stop()
			abort.resend = t.C
		}
		// A wait cut short by a store fault returns an error matching
		// errStoreFault (ackMux.wait): not re-sent, Append reads the
		// session for the events (afterFault).
		res, err := attempt(ctx, abort)
		resend := err != nil && errors.Is(err, errReconnected) && ctx.Err() == nil && n < maxResends
		if !resend {
			return res, err
		}
	}
}

// resendWait is how long an append re-sent after a reconnect waits for
// its reply before it is sent again.
const resendWait = time.Second

// noResponderWait bounds how long ask keeps asking a request that "no
// responders" answers. A stream just created or just given a new leader
// can be without direct-get responders on the asking client's server for
// a few milliseconds, until the replicas' interest reaches it over the
// routes; a stream that does not exist stays without them, and its
// caller hears so after this wait.
const noResponderWait = 2 * time.Second

// noResponderBackoff spaces the asks that "no responders" answered.
var noResponderBackoff = logport.Backoff{First: 10 * time.Millisecond, Max: 250 * time.Millisecond}

// unserved reports the answer "no responders" (to a request, or to a
// publish to a stream).
func unserved(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// againUnserved runs read, and runs it again while it fails with "no
// responders" for up to noResponderWait: a read through a consumer just
// created can reach the client's server before the consumer's interest
// does, as a read of a stream just created can (see ask).
func againUnserved(ctx context.Context, read func() error) error {
	return readAgainWhile(ctx, unserved, read)
}

// readAgainWhile runs read, and runs it again while its error is one that
// again accepts, after noResponderBackoff's waits, for up to
// noResponderWait; it returns read's last error.
func readAgainWhile(ctx context.Context, again func(error) bool, read func() error) error {
	began, backoff := time.Now(), noResponderBackoff
	for {
		err := read()
		if err == nil || !again(err) {
			return err
		}
		wait := noResponderWait - time.Since(began)
		if wait <= 0 || logport.Sleep(ctx, min(backoff.Next(), wait)) != nil {
			return err
		}
	}
}

// ask runs an idempotent request (a read, a publish the stream
// deduplicates by its message id, a purge below a sequence) and returns
// its first answer. A request handed to a node that died or went silent
// is never answered, so each readIdle without an answer, and at a
// reconnect, it asks again; the first ask stays open for the whole of ctx
// (a healthy server slower than readIdle still answers it) and each
// re-ask gives up the one before, so at most two are open. An answer "no
// responders" is asked again after a short back-off for up to
// noResponderWait. ctx without a deadline gets the log's Timeout.
func ask[T any](ctx context.Context, l *Log, req func(context.Context) (T, error)) (T, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	began := time.Now()
	backoff := noResponderBackoff
	// Returning gives up every ask still open.
	ctx, giveUpAll := context.WithCancel(ctx)
	defer giveUpAll()
	type answer struct {
		v   T
		err error
		ctx context.Context // the ask's own
	}
	answers := make(chan answer)
	start := func(actx context.Context) {
		go func() {
			v, err := req(actx)
			select {
			case answers <- answer{v, err, actx}:
			case <-ctx.Done():
			}
		}()
	}
	start(ctx)
	giveUp := context.CancelFunc(func() {})
	defer func() { giveUp() }()
	idle := time.NewTimer(readIdle)
	defer idle.Stop()
	rc := l.reconnected()
	for {
		select {
		case a := <-answers:
			if a.err != nil && a.ctx != ctx && a.ctx.Err() != nil {
				if err := ctx.Err(); err != nil {
					var zero T
					return zero, err // the call's end, not the given-up re-ask's
				}
				continue // a re-ask given up for a later one
			}
			if unserved(a.err) {
				if wait := noResponderWait - time.Since(began); wait > 0 {
					// No replica serves the request on this server yet:
					// ask again soon, not after readIdle.
					idle.Reset(min(backoff.Next(), wait))
					continue
				}
			}
			return a.v, a.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-idle.C:
		case <-rc:
			rc = l.reconnected()
			idle.Stop()
		}
		giveUp()
		actx, cancelAsk := context.WithCancel(ctx)
		giveUp = cancelAsk
		start(actx)
		idle.Reset(readIdle)
	}
}
