package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// foldSplit: decode + apply per event of a realistic session log, and the
// resident/deferred split per provider call.
func (h *harness) foldSplit(ctx context.Context) error {
	const session = "fold-session-0001"
	var log [][]byte
	for round := 0; round < 60; round++ {
		b, err := events.Encode(events.New(session, "bench", "bench", genPayload(round)))
		if err != nil {
			return err
		}
		log = append(log, b)
	}
	l, err := h.micro(ctx, nameFold, len(log), func() error {
		s := aggregate.State{Session: session}
		for i, raw := range log {
			e, err := events.Decode(raw)
			if err != nil {
				return err
			}
			s.Apply(uint64(i+1), e)
		}
		if s.Events != uint64(len(log)) {
			return fmt.Errorf("folded %d of %d events", s.Events, len(log))
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("events.Decode + State.Apply, per event, over a %d-event session (intent changes, turns, loads)", len(log))
	h.add(l)

	def, err := resolver.Default().Resolve(resolver.Request{Session: resolver.Intent{Enabled: bptr(true), WebSearch: bptr(true)}})
	if err != nil {
		return err
	}
	if err := h.splitLine(ctx, nameSplitDefault, def.Tools, deferral.NewSet("send_message"), "deferral.SplitTools of %d tools, 1 deferred tool loaded"); err != nil {
		return err
	}
	reg, err := resolver.Load(registryJSON(500))
	if err != nil {
		return err
	}
	res, err := reg.Resolve(benchRequest(500))
	if err != nil {
		return err
	}
	return h.splitLine(ctx, nameSplit500, res.Tools, deferral.NewSet("tool_0003", "tool_0013", "tool_0103"), "deferral.SplitTools of %d tools (1 in 10 deferred), 3 loaded")
}

// splitLine adds the line of deferral.SplitTools over tools with loaded;
// note formats the number of tools.
func (h *harness) splitLine(ctx context.Context, name string, tools []resolver.Tool, loaded deferral.Set, note string) error {
	l, err := h.micro(ctx, name, 1, func() error {
		if s := deferral.SplitTools(tools, loaded.Has); len(s.Classification) != len(tools) {
			return errors.New("split lost tools")
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf(note, len(tools))
	h.add(l)
	return nil
}

func sessionNames(prefix string, n int) []string {
	w := len(strconv.Itoa(max(n-1, 1)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%0*d", prefix, w, i)
	}
	return out
}

// runProjection starts p.Run and waits until it has folded seq, or fails.
func runProjection(ctx context.Context, p *projection.Projection, seq uint64, timeout time.Duration) (stop func(), err error) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	stop = func() { cancel(); <-done }
	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	waitErr := make(chan error, 1)
	go func() { waitErr <- p.WaitApplied(wctx, seq) }()
	select {
	case err = <-waitErr:
	case err = <-done:
		wcancel()
		<-waitErr
		done <- err
		if err == nil {
			err = errors.New("projection stopped")
		}
	}
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// replay: a fresh projection (new durable, new bucket) folding the whole
// engine stream, against a raw ordered consumer reading it.
func (h *harness) replay(ctx context.Context) error {
	r, err := h.newReplayRun(ctx)
	if err != nil {
		return err
	}
	l, err := h.pair(ctx, nameReplay, "events/s", true, r.engine, r.raw)
	if err != nil {
		return err
	}
	r.addLines(l)
	return nil
}

// replayRun is the state the replay lines share: the stream's content
// and the raw side's figures besides the line's own.
type replayRun struct {
	h         *harness
	per       int    // events generated per session
	generated int    // sessions generated
	last      uint64 // the stream's last sequence
	msgs      uint64 // the stream's messages
	subjects  uint64 // the stream's subjects (sessions)
	// Per raw run: the consumer counting only, and the consumer writing
	// each session's last event.
	countOnly, sameWrites []float64
}

// newReplayRun adds ReplayEvents events over ReplaySessions sessions to
// the engine stream, waits for the projection to fold them and reads the
// stream's state.
func (h *harness) newReplayRun(ctx context.Context) (*replayRun, error) {
	per := max(1, h.cfg.ReplayEvents/h.cfg.ReplaySessions)
	sessions := sessionNames("rep-", h.cfg.ReplaySessions)
	start := time.Now()
	if err := generate(ctx, h.rjs, prefixEngine, sessions, per); err != nil {
		return nil, err
	}
	gen := time.Since(start)
	if err := h.waitProjection(ctx); err != nil {
		return nil, err
	}
	h.progress("replay data: %d events over %d sessions added to %s in %.1f s", per*len(sessions), len(sessions), h.elog.StreamName(), gen.Seconds())
	last, err := h.elog.LastStreamSeq(ctx)
	if err != nil {
		return nil, err
	}
	info, err := h.elog.JetStream().Stream(ctx, h.elog.StreamName())
	if err != nil {
		return nil, err
	}
	return &replayRun{h: h, per: per, generated: len(sessions), last: last,
		msgs: info.CachedInfo().State.Msgs, subjects: info.CachedInfo().State.NumSubjects}, nil
}

// engine is a run of a fresh projection (new durable, new bucket) folding
// the whole stream: events/s.
func (r *replayRun) engine(ctx context.Context, run int) (float64, error) {
	h := r.h
	p, err := projection.Open(ctx, h.elog, projection.Config{Durable: fmt.Sprintf("replay%03d", run), Bucket: fmt.Sprintf("REPLAY%03d", run)})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	stop, err := runProjection(ctx, p, r.last, 10*time.Minute)
	if err != nil {
		return 0, err
	}
	el := time.Since(start)
	folded := p.Folded()
	stop()
	_ = h.elog.JetStream().DeleteConsumer(ctx, h.elog.StreamName(), fmt.Sprintf("replay%03d", run))
	_ = h.elog.JetStream().DeleteKeyValue(ctx, p.Views().Bucket())
	if folded < r.msgs {
		return 0, fmt.Errorf("replay folded %d of %d events", folded, r.msgs)
	}
	return float64(r.msgs) / el.Seconds(), nil
}

// raw is a run of the three raw consumers, in an order that rotates with
// the run (the first warms caches): it returns the decoding one's rate
// and records the others'.
func (r *replayRun) raw(ctx context.Context, run int) (float64, error) {
	var v [3]float64
	for k := range 3 {
		mode := replayMode((k + run) % 3)
		rate, err := r.consume(ctx, run, mode)
		if err != nil {
			return 0, err
		}
		v[mode] = rate
	}
	r.countOnly = append(r.countOnly, v[replayCount])
	r.sameWrites = append(r.sameWrites, v[replayWrite])
	return v[replayDecode], nil
}

// consume reads the whole stream with an ordered consumer: counting
// only (replayCount), decoding each event (replayDecode), or decoding
// and then writing one KV value per session, its last event's bytes,
// into a fresh bucket (replayWrite: the work the engine's replay does
// besides folding).
func (r *replayRun) consume(ctx context.Context, run int, mode replayMode) (float64, error) {
	h, msgs := r.h, r.msgs
	var bucket string
	if mode == replayWrite {
		bucket = fmt.Sprintf("RAWREPLAY%03d", run)
		if _, err := h.rjs.CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: bucket, History: 1, Storage: njs.FileStorage}); err != nil {
			return 0, err
		}
		defer h.rjs.DeleteKeyValue(context.WithoutCancel(ctx), bucket) //nolint:errcheck // a bench bucket
	}
	start := time.Now()
	cons, err := h.rjs.OrderedConsumer(ctx, h.elog.StreamName(), njs.OrderedConsumerConfig{
		FilterSubjects: []string{prefixEngine + ".events.*"},
	})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages(njs.PullMaxMessages(4096))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	var ev rawEvent
	var last map[string][]byte
	if mode == replayWrite {
		last = make(map[string][]byte, r.subjects)
	}
	for n := uint64(0); n < msgs; n++ {
		m, err := it.Next()
		if err != nil {
			return 0, fmt.Errorf("ordered consumer after %d of %d: %w", n, msgs, err)
		}
		if mode == replayCount {
			continue
		}
		if err := rawDecode(m.Data(), &ev); err != nil {
			return 0, fmt.Errorf("raw decode of message %d: %w", n, err)
		}
		if last != nil {
			subj := m.Subject()
			last[subj[strings.LastIndexByte(subj, '.')+1:]] = m.Data()
		}
	}
	if mode == replayWrite {
		if err := rawPutAll(ctx, h.rjs, bucket, last); err != nil {
			return 0, err
		}
	}
	return float64(msgs) / time.Since(start).Seconds(), nil
}

// addLines sets the replay line's target and note and adds it, then the
// lines that set its engine runs against the other raw consumers.
func (r *replayRun) addLines(l Line) {
	l.Target = "ratio >= 0.8 and >= 500k events/s"
	ratioTarget(&l, 0.8)
	l.Target = "ratio >= 0.8 and >= 500k events/s"
	l.Met = bptr(*l.Met && slices.Min(l.EngineRuns) >= 500_000)
	l.Crossed = !*l.Met && l.Ratio >= 0.8 && l.Engine >= 500_000
	engineNote := fmt.Sprintf("%d events over %d sessions (%d generated round-robin over %d, the rest the appends above); engine = projection.Run with a new durable and bucket until WaitApplied (decode, fold, KV put of every touched view, ack)", r.msgs, r.subjects, r.per*r.generated, r.generated)
	l.Note = engineNote + "; raw = ordered consumer (4096 pulled) + msgpack/v5 decode of each message into a plain struct, nothing written"
	r.h.add(l)
	countOnly := r.countOnly[:min(len(r.countOnly), l.Runs)] // not the profiled run
	limit := Line{Name: nameReplayLimit, Unit: "events/s", Runs: l.Runs, Rate: true, Engine: l.Engine, EngineRuns: l.EngineRuns, Raw: median(countOnly), RawRuns: countOnly}
	limit.Ratio = limit.Engine / limit.Raw
	limit.Note = "the engine runs of the line above; raw = the same ordered consumer counting messages only (no decode): the physical limit of delivery"
	r.h.add(limit)
	sameWrites := r.sameWrites[:min(len(r.sameWrites), l.Runs)]
	same := Line{Name: nameReplayWrites, Unit: "events/s", Runs: l.Runs, Rate: true, Engine: l.Engine, EngineRuns: l.EngineRuns, Raw: median(sameWrites), RawRuns: sameWrites}
	same.Ratio = same.Engine / same.Raw
	same.Note = fmt.Sprintf("the engine runs of the line above; raw = the same ordered consumer and decode, then one KV put per session (%d, its last event's bytes) into a fresh bucket, async with at most %d unacknowledged, all acknowledged: the views the engine writes, without the fold", r.subjects, rawPutWindow)
	r.h.add(same)
}

// replayMode is what the replay line's raw consumer does per event.
type replayMode int

const (
	replayDecode replayMode = iota // decode (the line's baseline)
	replayCount                    // count only (the delivery limit)
	replayWrite                    // decode, then one KV put per session
)

// rawPutWindow bounds rawPutAll's unacknowledged puts, as the projection's
// own (jetstream.Views.PutAll) are.
const rawPutWindow = 2048

// rawPutAll writes values into bucket with async publishes, at most
// rawPutWindow unacknowledged, and waits for every acknowledgement.
func rawPutAll(ctx context.Context, js njs.JetStream, bucket string, values map[string][]byte) error {
	inflight := make([]njs.PubAckFuture, 0, rawPutWindow)
	wait := func(f njs.PubAckFuture) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("raw put into %s: %w", bucket, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for key, v := range values {
		if len(inflight) == rawPutWindow {
			if err := wait(inflight[0]); err != nil {
				return err
			}
			inflight = inflight[1:]
		}
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: "$KV." + bucket + "." + key, Data: v})
		if err != nil {
			return fmt.Errorf("raw put into %s: %w", bucket, err)
		}
		inflight = append(inflight, f)
	}
	for _, f := range inflight {
		if err := wait(f); err != nil {
			return err
		}
	}
	return nil
}
