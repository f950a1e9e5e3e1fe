package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// The atomic batch lines: what one JetStream atomic batch publish of
// two messages costs (the shape of the engine's turn end: TurnEnded and
// CheckpointRecorded, as service/safepoint.go appends them) against two
// sequential CAS publishes of the same two messages and against one CAS
// publish of one message of their combined size, all raw, on the raw
// stream of the same server (the engine's stream configuration: atomic
// publish allowed).
const (
	nameBatchVsTwo = "atomic batch of 2 events (TurnEnded + CheckpointRecorded) vs 2 sequential CAS publishes"
	nameBatchVsOne = "atomic batch of 2 events vs 1 CAS publish of one message of their combined size"
	nameBatchShare = "turn/end in-process (Engine.EndTurn) vs its atomic batch publish alone"
)

func atomicBatchLineNames() []string { return []string{nameBatchVsTwo, nameBatchVsOne, nameBatchShare} }

// batchReply is the server's reply to a batch commit.
type batchReply struct {
	Seq   uint64 `json:"seq"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// turnEndBytes returns the bytes and types of a real turn end: a session
// on the engine begins and ends a turn with a discovery, and the two
// events EndTurn stored are read back.
func (h *harness) turnEndBytes(ctx context.Context) ([][]byte, []events.Type, error) {
	s := "ab-shape"
	if _, err := h.eng.Apply(ctx, s, origin, nil, events.ToolsToggled{Enabled: bptr(true)}); err != nil {
		return nil, nil, err
	}
	d := engineDriver{h.eng}
	catalog, _, err := d.begin(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	if len(catalog) > 0 {
		if err := d.discover(ctx, s, catalog[0]); err != nil {
			return nil, nil, err
		}
	}
	if err := d.end(ctx, s); err != nil {
		return nil, nil, err
	}
	groups, err := h.tcGroups(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	g := groups[len(groups)-1]
	if g.phase == tcEnd && len(g.recs) == 1 {
		// EndTurn writes one TurnEnded carrying the checkpoint; the
		// batch lines measure the older pair form, split from it.
		te, ok := g.recs[0].Envelope.Payload.(events.TurnEnded)
		if !ok || te.Checkpoint == nil {
			return nil, nil, fmt.Errorf("atomic batch: the turn end stored %+v, want a TurnEnded carrying its checkpoint", g.recs[0].Envelope.Payload)
		}
		var data [][]byte
		var types []events.Type
		for _, p := range []events.Payload{events.TurnEnded{Turn: te.Turn}, *te.Checkpoint} {
			b, err := events.Encode(events.New(s, origin.Channel, origin.Actor, p))
			if err != nil {
				return nil, nil, fmt.Errorf("atomic batch: encode the pair form: %w", err)
			}
			data = append(data, b)
			types = append(types, p.EventType())
		}
		return data, types, nil
	}
	if g.phase != tcEnd || len(g.recs) != 2 {
		return nil, nil, fmt.Errorf("atomic batch: the turn end stored %d events, want TurnEnded + CheckpointRecorded", len(g.recs))
	}
	var data [][]byte
	var types []events.Type
	for _, r := range g.recs {
		data = append(data, r.Data)
		types = append(types, r.Envelope.Type)
	}
	return data, types, nil
}

// rawMsg is one CAS publish of data to subj; expected < 0 sends no
// expected-sequence header (a batch's later messages).
func rawMsg(subj string, data []byte, typ events.Type, expected int64) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(njs.MsgIDHeader, events.NewID())
	m.Header.Set(jetstream.HeaderEventType, string(typ))
	if expected >= 0 {
		m.Header.Set(njs.ExpectedLastSubjSeqHeader, strconv.FormatInt(expected, 10))
	}
	return m
}

// publishBatch publishes data as one atomic batch expecting the subject
// at last, as jetstream.Log.appendBatch does, and returns the sequence of
// its last message.
func (h *harness) publishBatch(ctx context.Context, subj string, data [][]byte, types []events.Type, last uint64) (uint64, error) {
	id := events.NewID()
	n := len(data)
	for i := range data {
		exp := int64(-1)
		if i == 0 {
			exp = int64(last)
		}
		m := rawMsg(subj, data[i], types[i], exp)
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < n-1 {
			if err := h.rawNC.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := h.rawNC.RequestMsgWithContext(ctx, m)
		if err != nil {
			return 0, fmt.Errorf("batch commit: %w", err)
		}
		var ack batchReply
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, fmt.Errorf("batch commit: decode %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			return 0, fmt.Errorf("batch commit: %d %s", ack.Error.ErrCode, ack.Error.Description)
		}
		return ack.Seq, nil
	}
	return 0, errors.New("empty batch")
}

// atomicBatch measures the three ways to write a turn end and the
// engine's own turn end, Runs times, AtomicBatchOps operations per run and
// way, interleaved operation by operation in rotating order (the disk's
// latency, shared with whatever else runs, then falls on every way alike),
// each run on fresh subjects.
func (h *harness) atomicBatch(ctx context.Context) error {
	data, types, err := h.turnEndBytes(ctx)
	if err != nil {
		return err
	}
	b := &batchRun{h: h, data: data, types: types, combined: bytes.Join(data, nil), n: h.cfg.AtomicBatchOps}
	for r := 0; r < h.cfg.Runs; r++ {
		if err := b.measure(ctx, r, -1); err != nil {
			return err
		}
	}
	if h.cfg.ProfileDir != "" {
		if err := b.profile(ctx); err != nil {
			return err
		}
	}
	b.addLines()
	return nil
}

// nBatchWays is the number of ways atomicBatch measures: the atomic batch,
// two CAS publishes, one CAS publish of the joined bytes, and the
// engine's own turn end.
const nBatchWays = 4

// batchWay is one way of writing a turn end: it returns the time of
// operation i (and, for the engine's, of its strong read alone).
type batchWay func(ctx context.Context, i int) (time.Duration, time.Duration, error)

// batchRun is the state the atomic batch lines share: the turn end's
// events and the figures of each way, one per run.
type batchRun struct {
	h        *harness
	data     [][]byte      // the turn end's events
	types    []events.Type // their types
	combined []byte        // their bytes joined
	n        int           // operations per run and way
	runs     [nBatchWays][]float64
	reads    []float64 // the engine's strong read alone, per run
}

// measure times run's n operations of every way (or of way only, when
// only >= 0, which records nothing), interleaved in rotating order.
func (b *batchRun) measure(ctx context.Context, run int, only int) error {
	ws, err := b.ways(ctx, run)
	if err != nil {
		return err
	}
	var total [nBatchWays]time.Duration
	var read time.Duration
	for i := 0; i < b.n; i++ {
		for k := range nBatchWays {
			w := (k + i) % nBatchWays
			if only >= 0 && w != only {
				continue
			}
			d, r, err := ws[w](ctx, i)
			if err != nil {
				return fmt.Errorf("atomic batch run %d op %d: %w", run, i, err)
			}
			total[w] += d
			read += r
		}
	}
	if only >= 0 {
		return nil
	}
	for w := range nBatchWays {
		b.runs[w] = append(b.runs[w], micros(total[w], b.n))
	}
	b.reads = append(b.reads, micros(read, b.n))
	return nil
}

// profile runs the first line's engine column (the atomic batch) and raw
// column (two CAS publishes) under the CPU profiler, then the atomic batch
// under the block and mutex profilers, each on a run of its own.
func (b *batchRun) profile(ctx context.Context) error {
	h := b.h
	if err := h.profile(ctx, nameBatchVsTwo, "engine", func() error { return b.measure(ctx, h.cfg.Runs, 0) }); err != nil {
		return err
	}
	if err := h.profile(ctx, nameBatchVsTwo, "raw", func() error { return b.measure(ctx, h.cfg.Runs+1, 1) }); err != nil {
		return err
	}
	return h.blockProfile(nameBatchVsTwo, func() error { return b.measure(ctx, h.cfg.Runs+2, 0) })
}

// batchWays is one run's ways of writing a turn end, each on its own
// subject (or, for the engine's, session) of the run, which it continues.
type batchWays struct {
	b                   *batchRun
	run                 int
	session             string
	d                   engineDriver
	lastB, lastT, lastO uint64
}

// ways enables the run's engine session and returns the run's ways, in
// the order of the runs figures: the atomic batch, two CAS publishes, one
// CAS publish of the joined bytes, the engine's turn end.
func (b *batchRun) ways(ctx context.Context, run int) ([]batchWay, error) {
	w := &batchWays{b: b, run: run, session: fmt.Sprintf("ab-e%04d", run), d: engineDriver{b.h.eng}}
	if _, err := b.h.eng.Apply(ctx, w.session, origin, nil, events.ToolsToggled{Enabled: bptr(true)}); err != nil {
		return nil, err
	}
	return []batchWay{w.batch, w.twoCAS, w.oneCAS, w.endTurn}, nil
}

func (w *batchWays) subj(k string) string {
	return fmt.Sprintf("%s.events.ab-%s%04d", prefixRaw, k, w.run)
}

func (w *batchWays) batch(ctx context.Context, _ int) (time.Duration, time.Duration, error) {
	start := time.Now()
	last, err := w.b.h.publishBatch(ctx, w.subj("b"), w.b.data, w.b.types, w.lastB)
	w.lastB = last
	return time.Since(start), 0, err
}

func (w *batchWays) twoCAS(ctx context.Context, _ int) (time.Duration, time.Duration, error) {
	return w.cas(ctx, w.subj("t"), &w.lastT, w.b.data, w.b.types)
}

func (w *batchWays) oneCAS(ctx context.Context, _ int) (time.Duration, time.Duration, error) {
	return w.cas(ctx, w.subj("o"), &w.lastO, [][]byte{w.b.combined}, w.b.types[1:])
}

// cas publishes msgs to subj one sync CAS publish each, the first
// expecting *last, and advances *last.
func (w *batchWays) cas(ctx context.Context, subj string, last *uint64, msgs [][]byte, ts []events.Type) (time.Duration, time.Duration, error) {
	start := time.Now()
	for j := range msgs {
		ack, err := w.b.h.rjs.PublishMsg(ctx, rawMsg(subj, msgs[j], ts[j], int64(*last)))
		if err != nil {
			return 0, 0, fmt.Errorf("CAS publish to %s at %d: %w", subj, *last, err)
		}
		*last = ack.Sequence
	}
	return time.Since(start), 0, nil
}

// endTurn is the engine's own turn end: a turn is begun (untimed), the
// strong read EndTurn starts with (service: latest) is timed alone, then
// EndTurn.
func (w *batchWays) endTurn(ctx context.Context, _ int) (time.Duration, time.Duration, error) {
	if _, _, err := w.d.begin(ctx, w.session); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := w.b.h.proj.Read(ctx, w.session, projection.ReadOptions{Latest: true}); err != nil {
		return 0, 0, err
	}
	read := time.Since(start)
	start = time.Now()
	err := w.d.end(ctx, w.session)
	return time.Since(start), read, err
}

// addLines adds the atomic batch against the two CAS ways, and the
// engine's turn end against the atomic batch.
func (b *batchRun) addLines() {
	h, n, data, runs := b.h, b.n, b.data, b.runs
	common := fmt.Sprintf("%d turn ends/run, the ways interleaved op by op; events of %d + %d B read back from a real EndTurn; engine column = one atomic batch (Nats-Batch-Id/-Sequence, expected-last-subject-seq on the first, commit request on the second, as jetstream.Log.appendBatch)", n, len(data[0]), len(data[1]))
	for i, raw := range [][]float64{runs[1], runs[2]} {
		name := []string{nameBatchVsTwo, nameBatchVsOne}[i]
		l := Line{Name: name, Unit: "µs/op", Runs: h.cfg.Runs, EngineRuns: runs[0], RawRuns: raw, Engine: median(runs[0]), Raw: median(raw)}
		if l.Engine > 0 {
			l.Ratio = l.Raw / l.Engine
		}
		if i == 0 {
			l.Note = common + "; raw = two sync CAS publishes of the same two messages, the second expecting the first"
		} else {
			l.Note = common + fmt.Sprintf("; raw = one sync CAS publish of one %d B message (the two events' bytes joined): the cost of writing the turn end as ONE event", len(b.combined))
		}
		h.add(l)
	}
	l := Line{Name: nameBatchShare, Unit: "µs/op", Runs: h.cfg.Runs, EngineRuns: runs[3], RawRuns: runs[0], Engine: median(runs[3]), Raw: median(runs[0])}
	if l.Engine > 0 {
		l.Ratio = l.Raw / l.Engine
	}
	read := median(b.reads)
	l.Note = fmt.Sprintf("%d turn ends/run, interleaved op by op with the ways above; engine = Engine.EndTurn of a turn just begun (strong read of the session, checkpoint, decide, encode, one atomic batch of TurnEnded + CheckpointRecorded); raw = the atomic batch publish alone (lines above): the ratio is the share of turn/end spent in the batch publish; the strong read alone (projection.Read Latest: view + one direct-get scan of the tail) takes %.0f µs (%.0f%% of turn/end), the rest (checkpoint, decide, encode, locks) %.0f%%", n, read, 100*read/l.Engine, 100*(1-l.Ratio-read/l.Engine))
	h.add(l)
}

// blockProfile writes a blocking profile (every blocking event) of fn
// into the profile directory: <line>.block.pprof.
func (h *harness) blockProfile(name string, fn func() error) error {
	path := filepath.Join(h.cfg.ProfileDir, slug(name)+".block.pprof")
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	err := fn()
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
	f, ferr := os.Create(path)
	if ferr != nil {
		return errors.Join(err, ferr)
	}
	defer f.Close()
	if werr := pprof.Lookup("block").WriteTo(f, 0); werr != nil {
		return errors.Join(err, werr)
	}
	mf, merr := os.Create(filepath.Join(h.cfg.ProfileDir, slug(name)+".mutex.pprof"))
	if merr != nil {
		return errors.Join(err, merr)
	}
	defer mf.Close()
	return errors.Join(err, pprof.Lookup("mutex").WriteTo(mf, 0))
}
