package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// Stream prefixes. Engine and raw prefixes have the same length, so that
// subjects (and envelopes naming sessions of equal length) are the same
// size on both sides.
const (
	prefixEngine = "eng"
	prefixRaw    = "raw"
	prefixCold   = "cold"
)

var origin = service.Origin{Channel: "bench", Actor: "bench"}

// harness is one run of the bench: the server, the engine under test and
// the raw client beside it.
type harness struct {
	cfg     Config
	out     io.Writer
	dir     string
	started time.Time
	lines   []Line

	srv *jetstream.Embedded
	url string

	// The engine: its own connection, log, running projection and engine.
	engNC      *nats.Conn
	elog       *jetstream.Log
	proj       *projection.Projection
	projCancel context.CancelFunc
	projDone   chan error
	eng        *service.Engine

	// Raw JetStream: its own connection, a stream with the engine's
	// configuration (prefix raw) and the engine's views bucket.
	rawNC *nats.Conn
	rjs   njs.JetStream
	rkv   njs.KeyValue

	// turns is the turn cycle's engine and HTTP server (turn-cycle).
	turns      *turnEngine
	turnsLarge *turnEngine // on the turn cycle's large registry

	// Figures kept for notes of later lines.
	kvGetMicros float64
	readKeys    []string
	coldProbe   []coldProbe
}

type coldProbe struct {
	session string
	seq     uint64
}

func (h *harness) progress(format string, args ...any) {
	if h.out == nil {
		return
	}
	fmt.Fprintf(h.out, "[%6.1fs] %s\n", time.Since(h.started).Seconds(), fmt.Sprintf(format, args...))
}

func (h *harness) start(ctx context.Context) error {
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: filepath.Join(h.dir, "server"), Host: "127.0.0.1"})
	if err != nil {
		return err
	}
	h.srv, h.url = srv, srv.ClientURL()
	if err := h.openEngine(ctx); err != nil {
		return err
	}
	h.rawNC, err = jetstream.Connect(ctx, jetstream.ConnConfig{URL: h.url, Name: "bench-raw"})
	if err != nil {
		return err
	}
	// The raw stream is created with the engine's own stream configuration
	// (file storage, dedupe window, direct get, atomic publish allowed);
	// every publish to it below is raw.
	if _, err := jetstream.OpenLog(ctx, h.rawNC, jetstream.LogConfig{Prefix: prefixRaw}); err != nil {
		return err
	}
	h.rjs, err = njs.New(h.rawNC)
	if err != nil {
		return err
	}
	h.rkv, err = h.rjs.KeyValue(ctx, h.proj.Views().Bucket())
	if err != nil {
		return err
	}
	h.progress("embedded nats-server %s on %s, data in %s; engine stream %s, raw stream %s", serverVersion(), h.url, h.dir, h.elog.StreamName(), jetstream.EventStreamName(prefixRaw))
	return nil
}

// openEngine connects the engine as cmd/engine serve does: one connection,
// the log, the projection running, the service over both.
func (h *harness) openEngine(ctx context.Context) error {
	var err error
	h.engNC, err = jetstream.Connect(ctx, jetstream.ConnConfig{URL: h.url, Name: "bench-engine"})
	if err != nil {
		return err
	}
	h.elog, err = jetstream.OpenLog(ctx, h.engNC, jetstream.LogConfig{Prefix: prefixEngine})
	if err != nil {
		return err
	}
	h.proj, err = projection.Open(ctx, h.elog, projection.Config{})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.projCancel = cancel
	h.projDone = make(chan error, 1)
	proj := h.proj
	go func() { h.projDone <- proj.Run(rctx) }()
	h.eng = service.New(h.elog, h.proj, resolver.Default(), service.Config{})
	return nil
}

func (h *harness) stopEngine() {
	if h.projCancel != nil {
		h.projCancel()
		<-h.projDone
		h.projCancel = nil
	}
	if h.engNC != nil {
		h.engNC.Close()
		h.engNC = nil
	}
}

func (h *harness) close() {
	h.turns.close()
	h.turnsLarge.close()
	h.turns = nil
	h.stopEngine()
	if h.rawNC != nil {
		h.rawNC.Close()
		h.rawNC = nil
	}
	if h.srv != nil {
		h.srv.Shutdown()
		h.srv = nil
	}
}

// waitProjection waits until the engine's projection has folded the whole
// engine stream, so that a measurement does not compete with its catch-up.
// serverMsgs is the messages the embedded server received and sent so
// far (every connection's).
func (h *harness) serverMsgs() uint64 {
	v, err := h.srv.Server().Varz(nil)
	if err != nil {
		return 0
	}
	return uint64(v.InMsgs + v.OutMsgs)
}

func (h *harness) waitProjection(ctx context.Context) error {
	last, err := h.elog.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	select {
	case err := <-h.projDone:
		h.projDone <- err
		return fmt.Errorf("projection stopped: %v", err)
	default:
	}
	return h.proj.WaitApplied(wctx, last)
}

// sample measures one run of one side.
type sample func(ctx context.Context, run int) (float64, error)

// pair measures engine and raw Runs times each, alternating which goes
// first, then one extra profiled run of each when ProfileDir is set.
// rate says the figure is a rate (higher is better).
func (h *harness) pair(ctx context.Context, name, unit string, rate bool, engine, raw sample) (Line, error) {
	l := Line{Name: name, Unit: unit, Runs: h.cfg.Runs, Rate: rate}
	var err error
	if l.EngineRuns, l.RawRuns, err = alternate(ctx, l.Runs, false, engine, raw); err != nil {
		return l, err
	}
	return h.finishPair(ctx, l, engine, raw)
}

// alternate measures engine and raw runs times each and returns each
// side's figures in run order. Engine goes first in even runs and raw in
// odd ones, so that drift falls on both sides, unless engineFirst (a raw
// run that needs what the engine run before it left).
func alternate(ctx context.Context, runs int, engineFirst bool, engine, raw sample) (eng, rw []float64, err error) {
	for r := 0; r < runs; r++ {
		swap := !engineFirst && r%2 == 1
		first, second := engine, raw
		if swap {
			first, second = raw, engine
		}
		a, err := first(ctx, r)
		if err != nil {
			return eng, rw, err
		}
		b, err := second(ctx, r)
		if err != nil {
			return eng, rw, err
		}
		if swap {
			a, b = b, a
		}
		eng, rw = append(eng, a), append(rw, b)
	}
	return eng, rw, nil
}

// finishPair profiles one extra run of each side when ProfileDir is set
// and sets the line's medians and ratio from its runs.
func (h *harness) finishPair(ctx context.Context, l Line, engine, raw sample) (Line, error) {
	if h.cfg.ProfileDir != "" {
		if err := h.profile(ctx, l.Name, "engine", func() error { _, err := engine(ctx, h.cfg.Runs); return err }); err != nil {
			return l, err
		}
		if err := h.profile(ctx, l.Name, "raw", func() error { _, err := raw(ctx, h.cfg.Runs); return err }); err != nil {
			return l, err
		}
	}
	l.setMedians()
	return l, nil
}

// setMedians sets the line's medians and ratio from its runs.
func (l *Line) setMedians() {
	l.Engine, l.Raw = median(l.EngineRuns), median(l.RawRuns)
	if l.Engine > 0 && l.Raw > 0 {
		if l.Rate {
			l.Ratio = l.Engine / l.Raw
		} else {
			l.Ratio = l.Raw / l.Engine
		}
	}
}

// slice measures one slice of one side's run: it does the slice's share
// of the run's work and returns the time that work took (waits for the
// projection and other set-up excluded).
type slice func(ctx context.Context, run, slice int) (time.Duration, error)

// pairSlices is pair for the lines whose work divides evenly: each run is
// cut into slices, and the engine's and the raw's slices alternate
// (engine first on even slices, raw first on odd ones). A run's figure for
// a side is figure(the sum of its slices' times). Both sides of a run then
// share the same seconds of the machine: a neighbour that takes the cores
// for a second slows both, where with whole-run pairs it slowed one side
// of the ratio (on the 2-core bench machine per-run ratios of the same
// binary spread 0.86-1.28 that way).
func (h *harness) pairSlices(ctx context.Context, name, unit string, rate bool, slices int, figure func(time.Duration) float64, engine, raw slice) (Line, error) {
	side := func(fn slice) sample {
		return func(ctx context.Context, run int) (float64, error) {
			var total time.Duration
			for s := 0; s < slices; s++ {
				d, err := fn(ctx, run, s)
				if err != nil {
					return 0, err
				}
				total += d
			}
			return figure(total), nil
		}
	}
	// ofRun is one side's slices of run r as samples (nanoseconds), for
	// alternate.
	ofRun := func(fn slice, r int) sample {
		return func(ctx context.Context, s int) (float64, error) {
			d, err := fn(ctx, r, s)
			return float64(d), err
		}
	}
	total := func(ns []float64) time.Duration {
		var t time.Duration
		for _, d := range ns {
			t += time.Duration(d)
		}
		return t
	}
	l := Line{Name: name, Unit: unit, Runs: h.cfg.Runs, Rate: rate}
	for r := 0; r < h.cfg.Runs; r++ {
		te, tr, err := alternate(ctx, slices, false, ofRun(engine, r), ofRun(raw, r))
		if err != nil {
			return l, err
		}
		l.EngineRuns = append(l.EngineRuns, figure(total(te)))
		l.RawRuns = append(l.RawRuns, figure(total(tr)))
	}
	return h.finishPair(ctx, l, side(engine), side(raw))
}

// single measures the engine alone Runs times.
func (h *harness) single(ctx context.Context, name, unit string, engine sample) (Line, error) {
	l := Line{Name: name, Unit: unit, Runs: h.cfg.Runs}
	for r := 0; r < h.cfg.Runs; r++ {
		v, err := engine(ctx, r)
		if err != nil {
			return l, err
		}
		l.EngineRuns = append(l.EngineRuns, v)
	}
	if h.cfg.ProfileDir != "" {
		if err := h.profile(ctx, name, "engine", func() error { _, err := engine(ctx, h.cfg.Runs); return err }); err != nil {
			return l, err
		}
	}
	l.Engine = median(l.EngineRuns)
	return l, nil
}

func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

func (h *harness) profile(_ context.Context, name, side string, fn func() error) error {
	path := filepath.Join(h.cfg.ProfileDir, slug(name)+"."+side+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	err = fn()
	pprof.StopCPUProfile()
	return err
}

// add records a finished line and prints it.
func (h *harness) add(l Line) {
	h.lines = append(h.lines, l)
	switch {
	case l.Raw != 0:
		h.progress("%s: engine %s %s, raw %s %s, ratio %.2f%s", l.Name, num(l.Engine), l.Unit, num(l.Raw), l.Unit, l.Ratio, metSuffix(l))
	case l.Allocs != nil:
		h.progress("%s: %s %s, %.2f allocs/op%s", l.Name, num(l.Engine), l.Unit, *l.Allocs, metSuffix(l))
	default:
		h.progress("%s: %s %s%s", l.Name, num(l.Engine), l.Unit, metSuffix(l))
	}
}

func metSuffix(l Line) string {
	if l.Met == nil {
		return ""
	}
	if *l.Met {
		return " (target " + l.Target + ": met)"
	}
	return " (target " + l.Target + ": MISSED)"
}

// ratioTarget sets a "ratio >= min" target on l, met only when every
// run's ratio reaches it (a spread that crosses the target is not
// met).
func ratioTarget(l *Line, min float64) {
	l.Target = fmt.Sprintf("ratio >= %g", min)
	worst := l.Ratio
	for _, r := range l.Ratios() {
		worst = math.Min(worst, r)
	}
	l.Met = bptr(worst >= min)
	l.Crossed = l.Ratio >= min && worst < min
}

// envelope encodes the bytes of one ToolDisabled/ToolEnabled event for a
// session, as the engine writes them.
func envelope(session string, disable bool) ([]byte, error) {
	var p events.Payload = events.ToolEnabled{Name: "bash"}
	if disable {
		p = events.ToolDisabled{Name: "bash"}
	}
	return events.Encode(events.New(session, origin.Channel, origin.Actor, p))
}

func toggle(i int) events.Payload {
	if i%2 == 0 {
		return events.ToolDisabled{Name: "bash"}
	}
	return events.ToolEnabled{Name: "bash"}
}

// publishPipelined publishes n messages with raw async publishes, at most
// window in flight (keep it under the client's 4000 pending acks, or
// publishes stall), and waits for every ack. msg(i) builds message i.
func publishPipelined(ctx context.Context, js njs.JetStream, n, window int, msg func(i int) (*nats.Msg, error)) error {
	futs := make([]njs.PubAckFuture, window)
	wait := func(f njs.PubAckFuture) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return errors.New("no publish ack within a minute")
		}
	}
	for i := 0; i < n; i++ {
		if f := futs[i%window]; f != nil {
			if err := wait(f); err != nil {
				return fmt.Errorf("publish %d of %d: %w", i-window+1, n, err)
			}
		}
		m, err := msg(i)
		if err != nil {
			return err
		}
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("publish %d of %d: %w", i+1, n, err)
		}
		futs[i%window] = f
	}
	for i := max(0, n-window); i < n; i++ {
		if err := wait(futs[i%window]); err != nil {
			return fmt.Errorf("publish %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// genPayloads are the events generated data cycles through: a realistic
// mix of intent changes and turn markers.
func genPayload(round int) events.Payload {
	switch round % 10 {
	case 0:
		return events.ToolsToggled{Enabled: bptr(true)}
	case 1:
		return events.WebSearchSet{Enabled: bptr(true)}
	case 2:
		return events.ToolDisabled{Name: "bash"}
	case 3:
		return events.TurnStarted{Turn: uint64(round/10*2 + 1)}
	case 4:
		return events.DeferredLoaded{Names: []string{"send_message"}, Turn: uint64(round/10*2 + 1)}
	case 5:
		return events.TurnEnded{Turn: uint64(round/10*2 + 1)}
	case 6:
		return events.PresetChosen{Preset: "coding"}
	case 7:
		return events.ToolEnabled{Name: "bash"}
	case 8:
		return events.TurnStarted{Turn: uint64(round/10*2 + 2)}
	default:
		return events.TurnEnded{Turn: uint64(round/10*2 + 2)}
	}
}

// generate publishes perSession events to each of the sessions, round by
// round (so consecutive events are of different sessions, the worst case
// for a projection), as raw pipelined async publishes of valid envelopes.
func generate(ctx context.Context, js njs.JetStream, prefix string, sessions []string, perSession int) error {
	n := len(sessions) * perSession
	return publishPipelined(ctx, js, n, 2048, func(i int) (*nats.Msg, error) {
		return genMsg(prefix, sessions[i%len(sessions)], i/len(sessions))
	})
}

// genMsg is the message of generated event round of session: its
// envelope on the session's subject, with the event id as Nats-Msg-Id (as
// docs/wire-format.md asks: without it the fold rejects the event).
func genMsg(prefix, session string, round int) (*nats.Msg, error) {
	e := events.New(session, "bench", "gen", genPayload(round))
	data, err := events.Encode(e)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(prefix + ".events." + session)
	m.Data = data
	m.Header.Set("Nats-Msg-Id", e.ID)
	return m, nil
}

// heapAfterGC is the live heap after two full collections.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
