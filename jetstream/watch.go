package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/logport"
)

// ErrWatchStopped is what Watcher.Next returns once the watcher was
// stopped (Stop, or the context given to Watch ended).
var ErrWatchStopped = errors.New("watch stopped")

// watchBuffer is how many decoded events a Watcher holds ahead of its
// reader.
const watchBuffer = 64

// Watcher follows the event stream live: the events of one session,
// or of every session, in stream order, as they are appended. Next and
// Stop may be called from different goroutines; Next from one at a time.
type Watcher struct {
	ch     chan logport.Record
	done   chan struct{} // closed when the pump ended; err is set then
	err    error
	cancel context.CancelFunc
	once   sync.Once
}

// Watch starts following session's events ("": every session's) from
// stream sequence afterSeq+1 on: first the stored ones, then each new
// one as it is appended, until ctx ends or Stop. It reads with one
// ordered consumer (ephemeral, flow-controlled, no acks) filtered on the
// session's subject or on every event subject. Events erased or purged
// from the stream are simply absent; an undecodable event is delivered
// with Record.Err set, like ReadSession does.
func (l *Log) Watch(ctx context.Context, session string, afterSeq uint64) (*Watcher, error) {
	filter := l.subjBase + "*"
	if session != "" {
		if err := l.checkSession(session); err != nil {
			return nil, fmt.Errorf("watch session %q: %w", session, err)
		}
		filter = l.Subject(session)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if afterSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, afterSeq+1
	}
	cctx, ccancel := l.withTimeout(ctx)
	cons, err := l.js.OrderedConsumer(cctx, l.name, cfg)
	ccancel()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", filter, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Watcher{ch: make(chan logport.Record, watchBuffer), done: make(chan struct{}), cancel: cancel}
	stop := context.AfterFunc(wctx, it.Stop)
	go func() {
		defer close(w.done)
		defer stop()
		defer it.Stop()
		for {
			m, err := it.Next()
			if err != nil {
				if wctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					w.err = ErrWatchStopped
				} else {
					w.err = fmt.Errorf("watch %s: %w", filter, err)
				}
				return
			}
			md, err := m.Metadata()
			if err != nil {
				w.err = fmt.Errorf("watch %s: %w", filter, err)
				return
			}
			l.msgsRead.Add(1)
			r := l.record(md.Sequence.Stream, m.Subject(), md.Timestamp, m.Headers().Get(jetstream.MsgIDHeader), m.Data())
			select {
			case w.ch <- r:
			case <-wctx.Done():
				w.err = ErrWatchStopped
				return
			}
		}
	}()
	return w, nil
}

// Next returns the next event, waiting for one to be appended. It
// returns ctx's error when ctx ends first (the watcher stays usable), and
// once the watch ended, why: ErrWatchStopped after Stop or the end of
// Watch's context, otherwise the read error.
func (w *Watcher) Next(ctx context.Context) (logport.Record, error) {
	select {
	case r := <-w.ch:
		return r, nil
	default:
	}
	select {
	case r := <-w.ch:
		return r, nil
	case <-w.done:
		select {
		case r := <-w.ch: // delivered before the pump ended
			return r, nil
		default:
		}
		return logport.Record{}, w.err
	case <-ctx.Done():
		return logport.Record{}, ctx.Err()
	}
}

// Stop ends the watch and releases its consumer; it waits for the reader
// goroutine to end. Safe to call more than once.
func (w *Watcher) Stop() {
	w.once.Do(w.cancel)
	<-w.done
}
