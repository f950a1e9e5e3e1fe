package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

func micros(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

// appendSlices is how many slices each run of the append lines is cut
// into (see pairSlices): 400 appends a slice at the default sizes.
const appendSlices = 5

// sliceOf returns the first and last of the appends 1..n that slice k of
// appendSlices does.
func sliceOf(n, k int) (from, to int) {
	return k*n/appendSlices + 1, (k + 1) * n / appendSlices
}

// appendSync: one session at a time, each append waiting for its ack.
// Engine: Engine.Apply of one ToolDisabled/ToolEnabled command (decide,
// fresh ULID, encode, CAS publish), with the projection running as in
// `engine serve`. Raw: js.PublishMsg of the same envelope bytes with the
// expected-last-subject-sequence header.
func (h *harness) appendSync(ctx context.Context) error {
	n := h.cfg.SyncOps
	var syncMsgs []float64
	var msgs uint64 // the engine's NATS messages in the current run so far
	engine := func(ctx context.Context, run, k int) (time.Duration, error) {
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		s := fmt.Sprintf("sync-e%03d", run)
		if k == 0 {
			if _, err := h.eng.Apply(ctx, s, origin, nil, toggle(0)); err != nil { // warm: first read of the session
				return 0, err
			}
			msgs = 0
		}
		from, to := sliceOf(n, k)
		m0 := h.serverMsgs()
		start := time.Now()
		for i := from; i <= to; i++ {
			if _, err := h.eng.Apply(ctx, s, origin, nil, toggle(i)); err != nil {
				return 0, err
			}
		}
		el := time.Since(start)
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		msgs += h.serverMsgs() - m0
		if k == appendSlices-1 {
			syncMsgs = append(syncMsgs, float64(msgs)/float64(n))
		}
		return el, nil
	}
	var (
		w    *rawWriter
		last uint64
	)
	raw := func(ctx context.Context, run, k int) (time.Duration, error) {
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		var err error
		if k == 0 {
			w = newRawWriter(fmt.Sprintf("sync-r%03d", run))
			if last, err = w.publishSync(ctx, h.rjs, 0, 0); err != nil {
				return 0, err
			}
		}
		from, to := sliceOf(n, k)
		start := time.Now()
		for i := from; i <= to; i++ {
			if last, err = w.publishSync(ctx, h.rjs, i, last); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	l, err := h.pairSlices(ctx, nameAppendSync, "µs/op", false, appendSlices, func(d time.Duration) float64 { return micros(d, n) }, engine, raw)
	if err != nil {
		return err
	}
	size, err := sameSize()
	if err != nil {
		return err
	}
	ratioTarget(&l, 0.9)
	l.Note = fmt.Sprintf("%d appends/run in %d slices alternating with the raw's, %d B events, %.2f NATS msgs/append (engine, its projection's included; raw 2); engine = Engine.Apply (decide, fresh ULID, encode, a publish with Nats-Msg-Id + type + expected-last-subject-seq headers, its ack awaited on the log's reply subscription) with its projection folding behind in the same process; raw = js.PublishMsg of a fresh msgpack/v5 encode of an event of the same size with a fresh ULID Nats-Msg-Id, the type header and the expected-last-subject-seq header", n, appendSlices, size, median(syncMsgs))
	h.add(l)
	return nil
}

// appendConcurrent: Clients goroutines, each appending to its own session
// (per-session CAS forbids more than one append in flight per session).
// Engine: Engine.Apply. Raw: js.PublishMsgAsync with the expected header,
// next publish of a session on its ack.
func (h *harness) appendConcurrent(ctx context.Context) error {
	c := h.cfg.Clients
	per := h.cfg.ConcurrentOps / c
	total := per * c
	nowarm := func(int) error { return nil }
	var lagP99, lagP50, concMsgs []float64
	var lagN int
	var (
		acks  [][]ackAt
		watch *viewWatch
		msgs  uint64 // the engine's NATS messages in the current run so far
	)
	engine := func(ctx context.Context, r, k int) (time.Duration, error) {
		name := func(g int) string { return fmt.Sprintf("conc-e%03d-%03d", r, g) }
		if k == 0 {
			// Each session's first append (its first read) is not timed.
			acks = make([][]ackAt, c)
			if _, err := gated(c, func(g int) error {
				acks[g] = make([]ackAt, 0, per)
				_, err := h.eng.Apply(ctx, name(g), origin, nil, toggle(0))
				return err
			}, nowarm); err != nil {
				return 0, err
			}
			if err := h.waitProjection(ctx); err != nil {
				return 0, err
			}
			watch, msgs = watchViews(ctx, h.proj), 0
		}
		if err := h.waitProjection(ctx); err != nil {
			watch.stop()
			return 0, err
		}
		from, to := sliceOf(per, k)
		m0 := h.serverMsgs()
		el, err := gated(c, nowarm, func(g int) error {
			for i := from; i <= to; i++ {
				res, err := h.eng.Apply(ctx, name(g), origin, nil, toggle(i))
				if err != nil {
					return err
				}
				acks[g] = append(acks[g], ackAt{seq: res.Last, at: time.Now()})
			}
			return nil
		})
		if err == nil {
			err = h.waitProjection(ctx)
		}
		msgs += h.serverMsgs() - m0
		if err != nil {
			watch.stop()
			return 0, err
		}
		if k == appendSlices-1 {
			concMsgs = append(concMsgs, float64(msgs)/float64(total))
			watch.stop()
			lags := watch.lags(acks)
			lagN = len(lags)
			lagP99 = append(lagP99, quantileMs(lags, 0.99))
			lagP50 = append(lagP50, quantileMs(lags, 0.50))
		}
		return el, nil
	}
	var (
		ws    []*rawWriter
		lasts []uint64
	)
	raw := func(ctx context.Context, r, k int) (time.Duration, error) {
		if k == 0 {
			ws, lasts = make([]*rawWriter, c), make([]uint64, c)
			if _, err := gated(c, func(g int) error {
				ws[g] = newRawWriter(fmt.Sprintf("conc-r%03d-%03d", r, g))
				var err error
				lasts[g], err = ws[g].publishAsync(ctx, h.rjs, 0, 0)
				return err
			}, nowarm); err != nil {
				return 0, err
			}
		}
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		from, to := sliceOf(per, k)
		return gated(c, nowarm, func(g int) error {
			var err error
			for i := from; i <= to; i++ {
				if lasts[g], err = ws[g].publishAsync(ctx, h.rjs, i, lasts[g]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	l, err := h.pairSlices(ctx, fmt.Sprintf(nameAppendConcurrent, c), "events/s", true, appendSlices, func(d time.Duration) float64 { return float64(total) / d.Seconds() }, engine, raw)
	if err != nil {
		return err
	}
	ratioTarget(&l, 0.85)
	l.Note = fmt.Sprintf("%d appends/run in %d slices alternating with the raw's, %d goroutines x 1 session each, each session's first append untimed, one append in flight per session (CAS), %.2f NATS msgs/append (engine, its projection's included; raw 2); engine = Engine.Apply as above, its projection folding behind; raw = js.PublishMsgAsync of a fresh msgpack/v5 encode, fresh ULID Nats-Msg-Id, type and expected-last-subject-seq headers, next append of a session on its ack", total, appendSlices, c, median(concMsgs))
	h.add(l)
	lagP99, lagP50 = lagP99[:min(len(lagP99), l.Runs)], lagP50[:min(len(lagP50), l.Runs)]
	lag := Line{Name: fmt.Sprintf(nameProjectionLag, c), Unit: "ms", Runs: len(lagP99), Engine: median(lagP99), EngineRuns: lagP99}
	maxTarget(&lag, 50, "< 50 ms")
	lag.Note = fmt.Sprintf("the engine runs of the line above: per append, from its ack reaching the writer to the projection having written its view to KV and acknowledged it (Projection.Applied); p99 over %d appends per run (p50 %.1f ms); no raw baseline", lagN, median(lagP50))
	h.add(lag)
	for g := 0; g < c; g++ {
		h.readKeys = append(h.readKeys, fmt.Sprintf("conc-e%03d-%03d", 0, g))
	}
	return nil
}

// sessionRead measures two reads, each against the same work done raw:
// the in-memory read of the process running the projection against an
// RWMutex-guarded Go map lookup of the same decoded states (the physical
// limit), and the read of an engine without the projection (KV view get +
// decode) against a raw direct get of the same view bytes.
func (h *harness) sessionRead(ctx context.Context) error {
	if err := h.waitProjection(ctx); err != nil {
		return err
	}
	keys := h.readKeys
	if len(keys) == 0 {
		return errors.New("session read needs the sessions of append-concurrent")
	}
	n := h.cfg.ReadOps
	// The same decoded states in a plain map.
	var mu sync.RWMutex
	states := make(map[string]aggregate.State, len(keys))
	viewBytes := 0
	for _, k := range keys {
		e, err := h.rkv.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("view %s: %w", k, err)
		}
		st, err := aggregate.UnmarshalState(e.Value())
		if err != nil {
			return fmt.Errorf("view %s: %w", k, err)
		}
		states[k] = st
		viewBytes = len(e.Value())
	}
	read := func(eng *service.Engine) sample {
		return func(ctx context.Context, _ int) (float64, error) {
			start := time.Now()
			for i := 0; i < n; i++ {
				st, err := eng.Session(ctx, keys[i%len(keys)], 0)
				if err != nil {
					return 0, err
				}
				if st.LastSeq == 0 {
					return 0, fmt.Errorf("session %s reads empty", keys[i%len(keys)])
				}
			}
			return micros(time.Since(start), n), nil
		}
	}
	mapRead := func(ctx context.Context, _ int) (float64, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			mu.RLock()
			st, ok := states[keys[i%len(keys)]]
			mu.RUnlock()
			if !ok || st.LastSeq == 0 {
				return 0, fmt.Errorf("session %s not in the map", keys[i%len(keys)])
			}
		}
		return micros(time.Since(start), n), nil
	}
	l, err := h.pair(ctx, nameSessionRead, "µs/op", false, read(h.eng), mapRead)
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("%d reads/run over %d sessions; engine = Engine.Session in the process running the projection (session id check, RLock, copy of the cached state); raw = RLock + Go map lookup of the same decoded aggregate.State (the physical limit, no copy)", n, len(keys))
	h.add(l)

	// The same reads by an engine that does not run the projection (a
	// second engine on the stream, serve --no-projection): one KV get and
	// a state decode per read.
	other, err := projection.Open(ctx, h.elog, projection.Config{})
	if err != nil {
		return err
	}
	reader := service.New(h.elog, other, resolver.Default(), service.Config{})
	kvStream := "KV_" + h.proj.Views().Bucket()
	subjBase := "$KV." + h.proj.Views().Bucket() + "."
	directGet := func(ctx context.Context, _ int) (float64, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			k := keys[i%len(keys)]
			m, err := h.rawNC.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+kvStream+"."+subjBase+k, nil)
			if err != nil {
				return 0, fmt.Errorf("raw direct get %s: %w", k, err)
			}
			if len(m.Data) == 0 {
				return 0, fmt.Errorf("raw direct get %s: empty (%s)", k, m.Header.Get("Status"))
			}
		}
		return micros(time.Since(start), n), nil
	}
	l2, err := h.pair(ctx, nameSessionReadKV, "µs/op", false, read(reader), directGet)
	if err != nil {
		return err
	}
	h.kvGetMicros = l2.Raw
	ratioTarget(&l2, 0.9)
	l2.Note = fmt.Sprintf("%d reads/run, %d B views; engine = Engine.Session of an engine without a running projection (kv.Get of the view + UnmarshalState); raw = one direct-get request (last message of the view's KV subject) over the connection, bytes not decoded", n, viewBytes)
	h.add(l2)
	return nil
}
