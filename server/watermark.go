package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/jetstream"
)

// watermarkEvery is how often serve records what the event stream holds
// in <data>/engine-watermark.json (only when it grew).
const watermarkEvery = time.Second

// ackWatermark keeps the data directory's record of how far the event
// stream reached, outside the JetStream store, and compares
// the stream with it: at start, and at every record, so a store that was
// moved, emptied or truncated (even by an in-process JetStream restart)
// is never served as if whole. Its check fails readiness and refuses
// appends, naming the gap, until the store is restored or the loss
// accepted with engine rebuild.
type ackWatermark struct {
	dir  string
	jlog *jetstream.Log
	log  zerolog.Logger

	mu       sync.Mutex
	w        jetstream.Watermark
	short    error // the gap found, until the engine restarts
	compared bool  // the stream answered once and was compared
	writeErr string
	// erasing counts the erases between their BeforePurge and AfterPurge;
	// gen moves at each of those: a record whose stream state may have
	// been read across a purge is skipped.
	erasing int
	gen     uint64
}

// beforePurge lowers the mark by the messages an erase is about to purge
// (an erase is not a loss) and records it on disk before the purge.
func (a *ackWatermark) beforePurge(purged uint64) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.erasing++
	a.gen++
	name := a.jlog.StreamName()
	mark := a.w.Streams[name]
	mark.Messages -= min(mark.Messages, purged)
	mark.Updated = time.Now()
	a.w.Streams[name] = mark
	if err := jetstream.WriteWatermark(a.dir, a.w); err != nil {
		a.erasing--
		return fmt.Errorf("lower the acknowledged watermark for an erase: %w", err)
	}
	return nil
}

// afterPurge ends an erase's window (see beforePurge).
func (a *ackWatermark) afterPurge() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.erasing--
	a.gen++
	a.mu.Unlock()
}

// startWatermark reads dir's watermark and compares the stream with it
// once (a stream that does not answer yet is compared by the loop), then
// records and compares every watermarkEvery until ctx ends.
func startWatermark(ctx context.Context, dir string, jlog *jetstream.Log, log zerolog.Logger) (*ackWatermark, error) {
	w, err := jetstream.ReadWatermark(dir)
	if err != nil {
		return nil, err
	}
	a := &ackWatermark{dir: dir, jlog: jlog, log: log, w: w}
	a.record(ctx)
	every(ctx, watermarkEvery, func() { a.record(ctx) })
	return a, nil
}

// record reads the stream's state, compares it with the mark and, when
// the stream holds all of it and more, raises the mark on disk.
func (a *ackWatermark) record(ctx context.Context) {
	a.mu.Lock()
	gen, erasing := a.gen, a.erasing
	a.mu.Unlock()
	if erasing > 0 {
		return // a purge in flight: the state read now may be either side of it
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	st, err := a.jlog.StreamState(cctx)
	cancel()
	if err != nil {
		return // the stream and jetstream checks say why
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gen != gen {
		return // an erase began or ended meanwhile: read again next time
	}
	a.compared = true
	if a.short != nil {
		return
	}
	name := a.jlog.StreamName()
	mark := a.w.Streams[name]
	if err := mark.Short(a.dir, name, st); err != nil {
		a.short = err
		a.log.Error().Err(err).Msg("the event stream holds less than this data directory acknowledged: not ready, appends refused")
		return
	}
	raised, changed := mark.Raise(st, time.Now())
	if !changed {
		return
	}
	a.w.Streams[name] = raised
	if err := jetstream.WriteWatermark(a.dir, a.w); err != nil {
		if err.Error() != a.writeErr { // once per distinct error (a full disk repeats)
			a.log.Warn().Err(err).Msg("cannot record the acknowledged watermark (retrying)")
		}
		a.writeErr = err.Error()
		a.w.Streams[name] = mark // retried at the next record
		return
	}
	a.writeErr = ""
}

// check is the readiness check: the gap, if any.
func (a *ackWatermark) check(context.Context) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.short != nil {
		return a.short
	}
	if !a.compared {
		return errors.New("the event stream has not been compared with the acknowledged watermark yet")
	}
	return nil
}

// refuse is asked before each append: a short log takes no appends (they
// would build on a history that lost acknowledged events).
func (a *ackWatermark) refuse() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.short
}

// flush records the stream's final state (clean shutdown).
func (a *ackWatermark) flush(ctx context.Context) {
	if a != nil {
		a.record(ctx)
	}
}

// AcceptWatermark sets dir's mark of the stream to what it holds now:
// the operator accepted a loss (engine rebuild). before is the mark it
// replaced, now what the stream holds.
func AcceptWatermark(ctx context.Context, dir string, jlog *jetstream.Log) (before jetstream.StreamMark, now jetstream.StreamState, err error) {
	w, err := jetstream.ReadWatermark(dir)
	if err != nil {
		// A garbled record is replaced: rebuild accepts the log as it is.
		w = jetstream.Watermark{Streams: map[string]jetstream.StreamMark{}}
	}
	st, err := jlog.StreamState(ctx)
	if err != nil {
		return before, st, err
	}
	before = w.Streams[jlog.StreamName()]
	w.Streams[jlog.StreamName()] = jetstream.StreamMark{LastSeq: st.LastSeq, Messages: st.Messages, Updated: time.Now()}
	if err := jetstream.WriteWatermark(dir, w); err != nil {
		return before, st, fmt.Errorf("accept the log as it is: %w", err)
	}
	return before, st, nil
}
