package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackMux sends the log's appends and routes each acknowledgement to the
// append waiting for it: one wildcard reply subscription per log, a token
// per publish (#28).
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
	next    atomic.Uint64
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

// subscribe makes the reply subscription on first use.
func (a *ackMux) subscribe() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sub != nil && a.sub.IsValid() {
		return a.prefix, nil
	}
	prefix := a.nc.NewInbox() + "."
	sub, err := a.nc.Subscribe(prefix+"*", a.deliver)
	if err != nil {
		return "", fmt.Errorf("subscribe to the append acknowledgements: %w", err)
	}
	// Every waiter has one reply at most in flight: the subscription
	// holds as many as there are appends waiting.
	_ = sub.SetPendingLimits(-1, -1)
	a.prefix, a.sub = prefix, sub
	if a.waiting == nil {
		a.waiting = make(map[string]chan *nats.Msg)
	}
	return prefix, nil
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
	prefix, err := a.subscribe()
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		token := strconv.FormatUint(a.next.Add(1), 36)
		ch := make(chan *nats.Msg, 1)
		a.mu.Lock()
		a.waiting[token] = ch
		a.mu.Unlock()
		m.Reply = prefix + token
		resp, err := a.wait(ctx, m, token, ch, abort)
		if err != nil {
			return nil, err
		}
		if !noResponders(resp) {
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

func (a *ackMux) wait(ctx context.Context, m *nats.Msg, token string, ch chan *nats.Msg, abort abortOn) (*nats.Msg, error) {
	if err := ctx.Err(); err != nil {
		// Nothing is sent for a context that has ended.
		a.forget(token)
		return nil, err
	}
	if err := a.nc.PublishMsg(m); err != nil {
		a.forget(token)
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		a.forget(token)
		return nil, ctx.Err()
	case <-abort.reconnected:
		a.forget(token)
		return nil, fmt.Errorf("%w: %w", errReconnected, errAckWaitAborted)
	case <-abort.resend:
		a.forget(token)
		return nil, fmt.Errorf("%w: %w", errReconnected, errAckWaitAborted)
	case <-abort.faulted:
		a.forget(token)
		return nil, fmt.Errorf("%w: %w", errStoreFault, errAckWaitAborted)
	}
}

func (a *ackMux) forget(token string) {
	a.mu.Lock()
	delete(a.waiting, token)
	a.mu.Unlock()
}

// noResponders reports the server's 503 status: no stream listens on the
// subject (yet).
func noResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}

// pubAck is the server's reply to a publish to a stream: a single
// message's ack, or the commit of an atomic batch (Count, BatchID).
type pubAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	BatchID   string              `json:"batch,omitempty"`
	Count     uint64              `json:"count,omitempty"`
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
