package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	json "github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackMux sends the log's appends and routes each acknowledgement to the
// append waiting for it: one wildcard reply subscription per log, a token
// per publish.
//
// nats.go's JetStream PublishMsg does the same through the connection's
// request mux, but an append then also needed a context per attempt, and
// a goroutine, to be cut short by a reconnect or a store fault (see
// resendOnReconnect), and the ack decoded with encoding/json: about 6 µs
// of CPU per append on the 64-session bench line, a fifth of the engine's
// own share. The wait here selects on the reply, the caller's context and
// those two signals at once.
type ackMux struct {
	nc *nats.Conn

	mu      sync.Mutex
	prefix  string // the reply subjects' prefix, "<inbox>."; "" until the first publish
	sub     *nats.Subscription
	waiting map[string]chan *nats.Msg
	next    uint64 // the last token given
}

// abortOn are the signals that end an append's wait for its reply before
// it came: a reconnect (the request went out on the old connection, no
// reply is coming), a store fault (nats-server never answers a publish
// whose write failed), and a re-send's shorter wait. Nil channels never
// fire.
type abortOn struct {
	reconnected <-chan struct{}
	faulted     <-chan struct{}
	resend      <-chan time.Time
}

// errAckWaitAborted is in the chain of a wait cut short by abortOn, with
// errReconnected or errStoreFault; it matches context.Canceled too, so
// that the append reports its outcome unknown (transportError) as it
// would for a cancelled request.
var errAckWaitAborted = fmt.Errorf("wait for the acknowledgement abandoned: %w", context.Canceled)

// register adds a waiter for one reply, making the reply subscription on
// first use (and again once the connection closed it), and returns the
// waiter's token and the reply subject to publish with.
func (a *ackMux) register(ch chan *nats.Msg) (token, reply string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub == nil || !a.sub.IsValid() {
		prefix := a.nc.NewInbox() + "."
		sub, err := a.nc.Subscribe(prefix+"*", a.deliver)
		if err != nil {
			return "", "", fmt.Errorf("subscribe to the append acknowledgements: %w", err)
		}
		// Every waiter has one reply at most in flight: the subscription
		// holds as many as there are appends waiting.
		_ = sub.SetPendingLimits(-1, -1)
		a.prefix, a.sub = prefix, sub
		if a.waiting == nil {
			a.waiting = make(map[string]chan *nats.Msg)
		}
	}
	a.next++
	token = strconv.FormatUint(a.next, 36)
	a.waiting[token] = ch
	return token, a.prefix + token, nil
}

// deliver hands a reply to its waiter, if it still waits. The send is
// made under the lock into a one-slot channel, so no reply reaches a
// channel after its waiter has gone.
func (a *ackMux) deliver(m *nats.Msg) {
	token := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	a.mu.Lock()
	if ch, ok := a.waiting[token]; ok {
		delete(a.waiting, token)
		select {
		case ch <- m:
		default:
		}
	}
	a.mu.Unlock()
}

// request publishes m and waits for the server's reply: the reply, or
// ctx's error, or an error matching errAckWaitAborted and the signal's
// own error when one of abort fires first. A "no responders" status (no
// stream leader yet) is asked again twice, 250 ms apart, as nats.go's
// PublishMsg does, then answered jetstream.ErrNoStreamResponse.
func (a *ackMux) request(ctx context.Context, m *nats.Msg, abort abortOn) (*nats.Msg, error) {
	for try := 0; ; try++ {
		resp, err := a.wait(ctx, m, abort)
		if err != nil {
			return nil, err
		}
		if statusOnly(resp) != "503" {
			return resp, nil
		}
		if try >= noResponderRetries {
			return nil, jetstream.ErrNoStreamResponse
		}
		t := time.NewTimer(jetstream.DefaultPubRetryWait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// noResponderRetries is how many times a publish answered "no responders"
// is sent again (nats.go's DefaultPubRetryAttempts).
const noResponderRetries = jetstream.DefaultPubRetryAttempts

// wait publishes m with a reply subject of its own and waits for the
// reply (see request).
func (a *ackMux) wait(ctx context.Context, m *nats.Msg, abort abortOn) (*nats.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing is sent for a context that has ended
	}
	ch := make(chan *nats.Msg, 1)
	token, reply, err := a.register(ch)
	if err != nil {
		return nil, err
	}
	m.Reply = reply
	if err = a.nc.PublishMsg(m); err == nil {
		select {
		case resp := <-ch:
			return resp, nil // deliver forgot the token
		case <-ctx.Done():
			err = ctx.Err()
		case <-abort.reconnected:
			err = fmt.Errorf("%w: %w", errReconnected, errAckWaitAborted)
		case <-abort.resend:
			err = fmt.Errorf("%w: %w", errReconnected, errAckWaitAborted)
		case <-abort.faulted:
			err = fmt.Errorf("%w: %w", errStoreFault, errAckWaitAborted)
		}
	}
	a.mu.Lock()
	delete(a.waiting, token)
	a.mu.Unlock()
	return nil, err
}

// statusOnly is the status of a status message (no data, a Status
// header: 503 no responders, 404 or 204 ends of a batch or a pull, 408,
// 409, ...), "" for any other message.
func statusOnly(m *nats.Msg) string {
	if len(m.Data) != 0 {
		return ""
	}
	return m.Header.Get("Status")
}

// pubAck is the server's reply to a publish to a stream: a single
// message's ack, or the commit of an atomic batch (Seq its last).
type pubAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	Error     *jetstream.APIError `json:"error,omitempty"`
}

// decodeAck reads a publish reply: its error, when the server refused the
// publish, as a *jetstream.APIError.
func decodeAck(resp *nats.Msg) (pubAck, error) {
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return ack, fmt.Errorf("decode the acknowledgement %q: %w", resp.Data, errors.Join(jetstream.ErrInvalidJSAck, err))
	}
	if ack.Error != nil {
		return ack, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return ack, fmt.Errorf("acknowledgement %q names no stream: %w", resp.Data, jetstream.ErrInvalidJSAck)
	}
	return ack, nil
}
