package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// Sizes of the cold session load line.
const (
	coldLoadEvents = 2000 // events in the session
	coldLoadTail   = 50   // of them appended after the view was written
	coldLoadReads  = 40   // fresh engines per run
)

// coldLoad: one session of coldLoadEvents events whose view (the snapshot)
// was written by a projection that then stopped, coldLoadTail events
// before the end. Each read is by a fresh engine that does not run the
// projection (serve --no-projection, nothing cached) and asks for
// read-your-writes at the last sequence: one KV get of the view plus a
// batched direct get of the tail, folded. The note gives the fold of the
// whole log without the snapshot, for comparison.
func (h *harness) coldLoad(ctx context.Context) error {
	const prefix = "load"
	const session = "load-session-0001"
	if _, err := jetstream.OpenLog(ctx, h.rawNC, jetstream.LogConfig{Prefix: prefix}); err != nil {
		return err
	}
	llog, err := jetstream.OpenLog(ctx, h.engNC, jetstream.LogConfig{Prefix: prefix})
	if err != nil {
		return err
	}
	head := coldLoadEvents - coldLoadTail
	if err := generate(ctx, h.rjs, prefix, []string{session}, head); err != nil {
		return err
	}
	p, err := projection.Open(ctx, llog, projection.Config{})
	if err != nil {
		return err
	}
	stop, err := runProjection(ctx, p, uint64(head), 5*time.Minute)
	if err != nil {
		return err
	}
	stop()
	// The tail: appended by an engine without a projection.
	writer := service.New(llog, p, resolver.Default(), service.Config{})
	var last uint64
	for i := 0; i < coldLoadTail; i++ {
		res, err := writer.Apply(ctx, session, origin, nil, toggle(i))
		if err != nil {
			return err
		}
		last = res.Last
	}
	view, err := p.Views().Get(ctx, session)
	if err != nil {
		return err
	}
	snap, err := aggregate.UnmarshalState(view)
	if err != nil {
		return err
	}
	if snap.LastSeq != uint64(head) || last != coldLoadEvents {
		return fmt.Errorf("cold load: view at %d, log at %d; want %d and %d", snap.LastSeq, last, head, coldLoadEvents)
	}
	var fullFold []float64
	l, err := h.single(ctx, nameColdLoad, "µs/op", func(ctx context.Context, _ int) (float64, error) {
		engines := make([]*service.Engine, coldLoadReads)
		for i := range engines {
			fresh, err := projection.Open(ctx, llog, projection.Config{})
			if err != nil {
				return 0, err
			}
			engines[i] = service.New(llog, fresh, resolver.Default(), service.Config{})
		}
		var total time.Duration
		for _, eng := range engines {
			start := time.Now()
			st, err := eng.Session(ctx, session, last)
			total += time.Since(start)
			if err != nil {
				return 0, err
			}
			if st.LastSeq != last {
				return 0, fmt.Errorf("cold load read at %d, want %d", st.LastSeq, last)
			}
		}
		start := time.Now()
		recs, err := llog.ReadSession(ctx, session, 1, 0)
		if err != nil {
			return 0, err
		}
		st := aggregate.State{Session: session}
		for _, r := range recs {
			st.ApplyStored(aggregate.StoredRecord(r))
		}
		fullFold = append(fullFold, micros(time.Since(start), 1))
		if st.LastSeq != last {
			return 0, fmt.Errorf("full fold at %d, want %d", st.LastSeq, last)
		}
		return micros(total, coldLoadReads), nil
	})
	if err != nil {
		return err
	}
	maxTarget(&l, 1000, "< 1 ms")
	l.Note = fmt.Sprintf("a session of %d events whose view (snapshot) is %d events behind; %d fresh engines per run without a running projection, each Engine.Session at the last sequence: kv.Get of the view + UnmarshalState + one batched direct get of the %d-event tail, folded; folding the whole log without the snapshot takes %.0f µs", coldLoadEvents, coldLoadTail, coldLoadReads, coldLoadTail, median(fullFold))
	h.add(l)
	return nil
}
