package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

func micros(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

// appendSync: one session at a time, each append waiting for its ack.
// Engine: Engine.Apply of one ToolDisabled/ToolEnabled command (decide,
// fresh ULID, encode, CAS publish), with the projection running as in
// `engine serve`. Raw: js.PublishMsg of the same envelope bytes with the
// expected-last-subject-sequence header.
func (h *harness) appendSync(ctx context.Context) error {
	n := h.cfg.SyncOps
	engine := func(ctx context.Context, run int) (float64, error) {
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		s := fmt.Sprintf("sync-e%03d", run)
		if _, err := h.eng.Apply(ctx, s, origin, nil, toggle(0)); err != nil { // warm: first read of the session
			return 0, err
		}
		start := time.Now()
		for i := 1; i <= n; i++ {
			if _, err := h.eng.Apply(ctx, s, origin, nil, toggle(i)); err != nil {
				return 0, err
			}
		}
		return micros(time.Since(start), n), nil
	}
	raw := func(ctx context.Context, run int) (float64, error) {
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		w := newRawWriter(fmt.Sprintf("sync-r%03d", run))
		last, err := w.publishSync(ctx, h.rjs, 0, 0)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		for i := 1; i <= n; i++ {
			if last, err = w.publishSync(ctx, h.rjs, i, last); err != nil {
				return 0, err
			}
		}
		return micros(time.Since(start), n), nil
	}
	l, err := h.pair(ctx, nameAppendSync, "µs/op", false, engine, raw)
	if err != nil {
		return err
	}
	size, err := sameSize()
	if err != nil {
		return err
	}
	ratioTarget(&l, 0.9)
	l.Note = fmt.Sprintf("%d appends/run, %d B events; engine = Engine.Apply (decide, fresh ULID, encode, js.PublishMsg with Nats-Msg-Id + type + expected-last-subject-seq headers) with its projection folding behind in the same process; raw = js.PublishMsg of a fresh msgpack/v5 encode of an event of the same size with a fresh ULID Nats-Msg-Id, the type header and the expected-last-subject-seq header", n, size)
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
	run := func(ctx context.Context, warm func(g int) error, loop func(g int) error) (float64, error) {
		if err := h.waitProjection(ctx); err != nil {
			return 0, err
		}
		el, err := gated(c, warm, loop)
		if err != nil {
			return 0, err
		}
		return float64(total) / el.Seconds(), nil
	}
	var lagP99, lagP50 []float64
	var lagN int
	engine := func(ctx context.Context, r int) (float64, error) {
		name := func(g int) string { return fmt.Sprintf("conc-e%03d-%03d", r, g) }
		acks := make([][]ackAt, c)
		var watch *viewWatch
		v, err := run(ctx, func(g int) error {
			acks[g] = make([]ackAt, 0, per)
			_, err := h.eng.Apply(ctx, name(g), origin, nil, toggle(0))
			if g == 0 && err == nil {
				watch = watchViews(ctx, h.proj) // every goroutine's warm-up is done before the gate opens
			}
			return err
		}, func(g int) error {
			for i := 1; i <= per; i++ {
				res, err := h.eng.Apply(ctx, name(g), origin, nil, toggle(i))
				if err != nil {
					return err
				}
				acks[g] = append(acks[g], ackAt{seq: res.Last, at: time.Now()})
			}
			return nil
		})
		if watch != nil {
			if err == nil {
				err = h.waitProjection(ctx)
			}
			watch.stop()
			lags := watch.lags(acks)
			lagN = len(lags)
			lagP99 = append(lagP99, quantileMs(lags, 0.99))
			lagP50 = append(lagP50, quantileMs(lags, 0.50))
		}
		return v, err
	}
	raw := func(ctx context.Context, r int) (float64, error) {
		ws := make([]*rawWriter, c)
		lasts := make([]uint64, c)
		return run(ctx, func(g int) error {
			ws[g] = newRawWriter(fmt.Sprintf("conc-r%03d-%03d", r, g))
			var err error
			lasts[g], err = ws[g].publishAsync(ctx, h.rjs, 0, 0)
			return err
		}, func(g int) error {
			var err error
			for i := 1; i <= per; i++ {
				if lasts[g], err = ws[g].publishAsync(ctx, h.rjs, i, lasts[g]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	l, err := h.pair(ctx, fmt.Sprintf(nameAppendConcurrent, c), "events/s", true, engine, raw)
	if err != nil {
		return err
	}
	ratioTarget(&l, 0.85)
	l.Note = fmt.Sprintf("%d appends/run, %d goroutines x 1 session each, one append in flight per session (CAS); engine = Engine.Apply as above, its projection folding behind; raw = js.PublishMsgAsync of a fresh msgpack/v5 encode, fresh ULID Nats-Msg-Id, type and expected-last-subject-seq headers, next append of a session on its ack", total, c)
	h.add(l)
	lagP99, lagP50 = lagP99[:min(len(lagP99), l.Runs)], lagP50[:min(len(lagP50), l.Runs)]
	lag := Line{Name: fmt.Sprintf(nameProjectionLag, c), Unit: "ms", Runs: len(lagP99), Engine: median(lagP99), EngineRuns: lagP99, Target: "< 50 ms"}
	lag.Met = bptr(lag.Engine < 50)
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

// turnResolve: the whole per-turn read path of Engine.Resolve: session
// read (from the projection's memory), cached resolve, split, Anthropic
// rendering, sha256 prefix hash.
func (h *harness) turnResolve(ctx context.Context) error {
	keys := h.readKeys
	if len(keys) == 0 {
		return errors.New("turn resolve needs the sessions of append-concurrent")
	}
	n := max(h.cfg.ReadOps/2, 1)
	var tools int
	l, err := h.single(ctx, nameTurnResolve, "µs/op", func(ctx context.Context, _ int) (float64, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			v, err := h.eng.Resolve(ctx, keys[i%len(keys)], service.ResolveRequest{})
			if err != nil {
				return 0, err
			}
			tools = len(v.Provider)
		}
		return micros(time.Since(start), n), nil
	})
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("%d resolves/run, %d tools in the provider array; Engine.Resolve in the process running the projection: session read from its memory (no KV get), cached resolve, split, Anthropic rendering, prefix hash; no raw baseline", n, tools)
	h.add(l)
	return nil
}

// micro measures a CPU-only function: ns per op and allocations per op.
// fn performs ops operations per call.
func (h *harness) micro(ctx context.Context, name string, ops int, fn func() error) (Line, error) {
	if err := fn(); err != nil {
		return Line{}, fmt.Errorf("%s: %w", name, err)
	}
	// Calibrate the number of calls of one run to about CPUTime.
	calls := 1
	for {
		start := time.Now()
		for i := 0; i < calls; i++ {
			_ = fn()
		}
		el := time.Since(start)
		if el >= h.cfg.CPUTime/8 || calls >= 1<<30 {
			calls = max(1, int(float64(calls)*float64(h.cfg.CPUTime)/float64(max(el, 1))))
			break
		}
		calls *= 4
	}
	var allocs []float64
	l, err := h.single(ctx, name, "ns/op", func(ctx context.Context, _ int) (float64, error) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		for i := 0; i < calls; i++ {
			if err := fn(); err != nil {
				return 0, err
			}
		}
		el := time.Since(start)
		runtime.ReadMemStats(&m1)
		// Background goroutines (server, client) allocate too: the
		// smallest figure of the runs is the closest to fn's own.
		allocs = append(allocs, float64(m1.Mallocs-m0.Mallocs)/float64(calls*ops))
		return float64(el.Nanoseconds()) / float64(calls*ops), nil
	})
	if err != nil {
		return l, err
	}
	l.Allocs = fptr(minOf(allocs))
	return l, nil
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// registryJSON is a valid registry file of n tools, every one in
// DEFAULT_TOOLS (so a resolution has n tools), every tenth deferred, with
// tool_search among them and a web_search tool outside the defaults.
func registryJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":"bench-1","tools":[`)
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tool_%04d", i)
		if i == n/2 {
			name = resolver.ToolSearch
		}
		names = append(names, name)
		fmt.Fprintf(&b, `{"name":%q,"description":"Tool number %d reads and writes things for the agent.","permission":"read",`+
			`"parameters":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"limit":{"type":"integer"}},"required":["path"]}},`, name, i)
	}
	b.WriteString(`{"name":"web_search","description":"Searches the web.","permission":"network","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}`)
	b.WriteString(`],"default_tools":["` + strings.Join(names, `","`) + `"],"deferred_default_tools":[`)
	sep := ""
	for i, name := range names {
		if i%10 == 3 && name != resolver.ToolSearch {
			b.WriteString(sep + `"` + name + `"`)
			sep = ","
		}
	}
	b.WriteString(`],"presets":{"half":["` + strings.Join(names[:n/2+1], `","`) + `"]},"profiles":{"coder":{"preset":"half"}}}`)
	return []byte(b.String())
}

func benchRequest(n int) resolver.Request {
	return resolver.Request{Session: resolver.Intent{Enabled: bptr(true), WebSearch: bptr(true),
		Disabled: []string{fmt.Sprintf("tool_%04d", 7), fmt.Sprintf("tool_%04d", n/4+1)}}}
}

// resolveLines: cached Resolve and cold ResolveUncached for each registry
// size.
func (h *harness) resolveLines(ctx context.Context) error {
	for _, n := range h.cfg.RegistrySizes {
		reg, err := resolver.Load(registryJSON(n))
		if err != nil {
			return fmt.Errorf("registry of %d tools: %w", n, err)
		}
		req := benchRequest(n)
		want := n - 2 + 1 // two disabled, web_search added
		check := func(res *resolver.Resolution, err error) error {
			if err != nil {
				return err
			}
			if len(res.Tools) != want {
				return fmt.Errorf("resolution of %d tools, want %d", len(res.Tools), want)
			}
			return nil
		}
		l, err := h.micro(ctx, fmt.Sprintf(nameResolveCached, n), 1, func() error { return check(reg.Resolve(req)) })
		if err != nil {
			return err
		}
		l.Target = "< 1 µs, 0 allocs"
		l.Met = bptr(l.Engine < 1000 && *l.Allocs < 0.005)
		l.Note = fmt.Sprintf("Registry.Resolve, repeated request, %d tools out", want)
		h.add(l)
		l, err = h.micro(ctx, fmt.Sprintf(nameResolveCold, n), 1, func() error { return check(reg.ResolveUncached(req)) })
		if err != nil {
			return err
		}
		if n == 500 {
			l.Target = "< 50 µs"
			l.Met = bptr(l.Engine < 50_000)
		}
		l.Note = fmt.Sprintf("Registry.ResolveUncached, %d tools out (all tools are defaults)", want)
		h.add(l)
	}
	return nil
}

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
	loaded := deferral.NewSet("send_message")
	l, err = h.micro(ctx, nameSplitDefault, 1, func() error {
		if s := deferral.SplitTools(def.Tools, loaded.Has); len(s.Classification) != len(def.Tools) {
			return errors.New("split lost tools")
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("deferral.SplitTools of %d tools, 1 deferred tool loaded", len(def.Tools))
	h.add(l)

	reg, err := resolver.Load(registryJSON(500))
	if err != nil {
		return err
	}
	res, err := reg.Resolve(benchRequest(500))
	if err != nil {
		return err
	}
	loaded500 := deferral.NewSet("tool_0003", "tool_0013", "tool_0103")
	l, err = h.micro(ctx, nameSplit500, 1, func() error {
		if s := deferral.SplitTools(res.Tools, loaded500.Has); len(s.Classification) != len(res.Tools) {
			return errors.New("split lost tools")
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("deferral.SplitTools of %d tools (1 in 10 deferred), 3 loaded", len(res.Tools))
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
	per := max(1, h.cfg.ReplayEvents/h.cfg.ReplaySessions)
	sessions := sessionNames("rep-", h.cfg.ReplaySessions)
	start := time.Now()
	if err := generate(ctx, h.rjs, prefixEngine, sessions, per); err != nil {
		return err
	}
	gen := time.Since(start)
	if err := h.waitProjection(ctx); err != nil {
		return err
	}
	h.progress("replay data: %d events over %d sessions added to %s in %.1f s", per*len(sessions), len(sessions), h.elog.StreamName(), gen.Seconds())
	last, err := h.elog.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	info, err := h.elog.JetStream().Stream(ctx, h.elog.StreamName())
	if err != nil {
		return err
	}
	msgs := info.CachedInfo().State.Msgs
	subjects := info.CachedInfo().State.NumSubjects
	engine := func(ctx context.Context, run int) (float64, error) {
		p, err := projection.Open(ctx, h.elog, projection.Config{Durable: fmt.Sprintf("replay%03d", run), Bucket: fmt.Sprintf("REPLAY%03d", run)})
		if err != nil {
			return 0, err
		}
		start := time.Now()
		stop, err := runProjection(ctx, p, last, 10*time.Minute)
		if err != nil {
			return 0, err
		}
		el := time.Since(start)
		folded := p.Folded()
		stop()
		_ = h.elog.JetStream().DeleteConsumer(ctx, h.elog.StreamName(), fmt.Sprintf("replay%03d", run))
		_ = h.elog.JetStream().DeleteKeyValue(ctx, p.Views().Bucket())
		if folded < msgs {
			return 0, fmt.Errorf("replay folded %d of %d events", folded, msgs)
		}
		return float64(msgs) / el.Seconds(), nil
	}
	consume := func(ctx context.Context, decode bool) (float64, error) {
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
		for n := uint64(0); n < msgs; n++ {
			m, err := it.Next()
			if err != nil {
				return 0, fmt.Errorf("ordered consumer after %d of %d: %w", n, msgs, err)
			}
			if decode {
				if err := rawDecode(m.Data(), &ev); err != nil {
					return 0, fmt.Errorf("raw decode of message %d: %w", n, err)
				}
			}
		}
		return float64(msgs) / time.Since(start).Seconds(), nil
	}
	var countOnly []float64
	raw := func(ctx context.Context, run int) (float64, error) {
		// Alternate which consumer goes first (the first warms caches).
		var v, c float64
		var err error
		for k := 0; k < 2 && err == nil; k++ {
			if (k+run)%2 == 0 {
				v, err = consume(ctx, true)
			} else {
				c, err = consume(ctx, false)
			}
		}
		if err != nil {
			return 0, err
		}
		countOnly = append(countOnly, c)
		return v, nil
	}
	l, err := h.pair(ctx, nameReplay, "events/s", true, engine, raw)
	if err != nil {
		return err
	}
	l.Target = "ratio >= 0.8 and >= 500k events/s"
	l.Met = bptr(l.Ratio >= 0.8 && l.Engine >= 500_000)
	engineNote := fmt.Sprintf("%d events over %d sessions (%d generated round-robin over %d, the rest the appends above); engine = projection.Run with a new durable and bucket until WaitApplied (decode, fold, KV put of every touched view, ack)", msgs, subjects, per*len(sessions), len(sessions))
	l.Note = engineNote + "; raw = ordered consumer (4096 pulled) + msgpack/v5 decode of each message into a plain struct, nothing written"
	h.add(l)
	countOnly = countOnly[:min(len(countOnly), l.Runs)] // not the profiled run
	limit := Line{Name: nameReplayLimit, Unit: "events/s", Runs: l.Runs, Engine: l.Engine, EngineRuns: l.EngineRuns, Raw: median(countOnly), RawRuns: countOnly}
	limit.Ratio = limit.Engine / limit.Raw
	limit.Note = "the engine runs of the line above; raw = the same ordered consumer counting messages only (no decode): the physical limit of delivery"
	h.add(limit)
	return nil
}

// coldStart: a fresh engine (new connection, OpenLog, projection.Open and
// Run with the existing durable, one Session read) on a stream of
// ColdEvents events over ColdSessions sessions, against a raw client
// (connect, stream and bucket look-up, one kv.Get).
func (h *harness) coldStart(ctx context.Context) error {
	per := max(1, h.cfg.ColdEvents/h.cfg.ColdSessions)
	sessions := sessionNames("cold-", h.cfg.ColdSessions)
	if _, err := jetstream.OpenLog(ctx, h.rawNC, jetstream.LogConfig{Prefix: prefixCold}); err != nil {
		return err
	}
	start := time.Now()
	if err := generate(ctx, h.rjs, prefixCold, sessions, per); err != nil {
		return err
	}
	gen := time.Since(start)
	total := per * len(sessions)
	h.progress("cold data: %d events over %d sessions generated in %.1f s (%.0f events/s, raw pipelined async publishes)", total, len(sessions), gen.Seconds(), float64(total)/gen.Seconds())
	clog, err := jetstream.OpenLog(ctx, h.engNC, jetstream.LogConfig{Prefix: prefixCold})
	if err != nil {
		return err
	}
	last, err := clog.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	if last != uint64(total) {
		return fmt.Errorf("cold stream holds %d events, want %d", last, total)
	}
	p, err := projection.Open(ctx, clog, projection.Config{})
	if err != nil {
		return err
	}
	start = time.Now()
	stop, err := runProjection(ctx, p, last, 20*time.Minute)
	if err != nil {
		return err
	}
	build := time.Since(start)
	stop()
	h.progress("cold data: projection built (durable %q) in %.1f s (%.0f events/s)", "views", build.Seconds(), float64(total)/build.Seconds())
	// Probes: session i's last event is round per-1, at (per-1)*S + i + 1.
	S := len(sessions)
	for _, i := range []int{S / 7, S / 3, S / 2, 2 * S / 3, S - 1, 0, S / 5, 4 * S / 5} {
		h.coldProbe = append(h.coldProbe, coldProbe{session: sessions[i], seq: uint64((per-1)*S + i + 1)})
	}
	engine := func(ctx context.Context, run int) (float64, error) {
		start := time.Now()
		if err := h.coldEngineReady(ctx, h.url, h.coldProbe[run%len(h.coldProbe)]); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds(), nil
	}
	raw := func(ctx context.Context, run int) (float64, error) {
		start := time.Now()
		if err := coldRawReady(ctx, h.url, h.coldProbe[run%len(h.coldProbe)]); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds(), nil
	}
	l, err := h.pair(ctx, nameColdStart, "s", false, engine, raw)
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("%d events over %d sessions, generated in %.1f s (raw pipelined async), projection built in %.1f s; engine = connect + OpenLog + projection.Open + Run (existing durable) until caught up + Engine.Session; raw = connect + stream + bucket look-up + kv.Get", total, S, gen.Seconds(), build.Seconds())
	h.add(l)
	return nil
}

// coldEngineReady brings up a fresh engine on the cold stream and returns
// when it serves a read of the probe session.
func (h *harness) coldEngineReady(ctx context.Context, url string, probe coldProbe) error {
	nc, err := jetstream.Connect(ctx, jetstream.ConnConfig{URL: url, Name: "bench-cold-engine"})
	if err != nil {
		return err
	}
	defer nc.Close()
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Prefix: prefixCold})
	if err != nil {
		return err
	}
	p, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		return err
	}
	eng := service.New(log, p, resolver.Default(), service.Config{})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Minute)
	for !p.CaughtUp() {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("cold projection stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("cold projection not caught up after 5 minutes")
		}
		time.Sleep(100 * time.Microsecond)
	}
	st, err := eng.Session(ctx, probe.session, 0)
	if err != nil {
		return err
	}
	if st.LastSeq != probe.seq {
		return fmt.Errorf("cold session %s reads at %d, want %d", probe.session, st.LastSeq, probe.seq)
	}
	return nil
}

func coldRawReady(ctx context.Context, url string, probe coldProbe) error {
	nc, err := nats.Connect(url, nats.Name("bench-cold-raw"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.Stream(ctx, jetstream.EventStreamName(prefixCold)); err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, strings.ToUpper(prefixCold)+"_VIEWS")
	if err != nil {
		return err
	}
	e, err := kv.Get(ctx, probe.session)
	if err != nil {
		return fmt.Errorf("raw cold get %s: %w", probe.session, err)
	}
	if len(e.Value()) == 0 {
		return fmt.Errorf("raw cold get %s: empty", probe.session)
	}
	return nil
}

// memory: for each size, one event for each of N new sessions on a fresh
// stream and a projection folding them into a fresh bucket. The Go heap
// (server and engine share the process) is read after GC: before (with the
// stream and bucket created and written once, so that their fixed buffers
// are in the baseline), after the events are stored, with the projection
// caught up, and after the projection is dropped. Server per session
// subject = stored - before; views bucket = after - stored; projection
// cache = caught up - after, per cached session (the cache holds at most
// CacheSize sessions). Each reading waits MemorySettle first.
func (h *harness) memory(ctx context.Context) error {
	type fig struct{ proj, server float64 }
	var figs []fig
	var projLines, serverLines []Line
	for idx, n := range h.cfg.MemorySessions {
		prefix := fmt.Sprintf("mem%d", idx)
		if _, err := jetstream.OpenLog(ctx, h.rawNC, jetstream.LogConfig{Prefix: prefix}); err != nil {
			return err
		}
		mlog, err := jetstream.OpenLog(ctx, h.engNC, jetstream.LogConfig{Prefix: prefix})
		if err != nil {
			return err
		}
		p, err := projection.Open(ctx, mlog, projection.Config{})
		if err != nil {
			return err
		}
		// One warm event and one warm view.
		if err := generate(ctx, h.rjs, prefix, []string{"m-warm"}, 1); err != nil {
			return err
		}
		if _, err := h.rjs.Publish(ctx, "$KV."+p.Views().Bucket()+".m-warm-view", []byte("warm")); err != nil {
			return err
		}
		if err := sleepCtx(ctx, h.cfg.MemorySettle); err != nil {
			return err
		}
		heap0, rss0 := heapAfterGC(), h.rss()
		sessions := sessionNames("m-", n)
		start := time.Now()
		if err := generate(ctx, h.rjs, prefix, sessions, 1); err != nil {
			return err
		}
		pub := time.Since(start)
		if err := sleepCtx(ctx, h.cfg.MemorySettle); err != nil {
			return err
		}
		heap1 := heapAfterGC()
		start = time.Now()
		stop, err := runProjection(ctx, p, uint64(n+1), 20*time.Minute)
		if err != nil {
			return err
		}
		fold := time.Since(start)
		if err := sleepCtx(ctx, h.cfg.MemorySettle); err != nil {
			stop()
			return err
		}
		heap2 := heapAfterGC()
		cached := p.Cached()
		stop()
		p, mlog = nil, nil
		heap3, rss1 := heapAfterGC(), h.rss()
		f := fig{
			proj:   (float64(heap2) - float64(heap3)) / float64(max(cached, 1)),
			server: (float64(heap1) - float64(heap0)) / float64(n),
		}
		views := (float64(heap3) - float64(heap1)) / float64(n)
		figs = append(figs, f)
		label := sessionsLabel(n)
		projLines = append(projLines, Line{Name: fmt.Sprintf(nameMemProjection, label), Unit: "B/session", Engine: f.proj, Runs: 1,
			EngineRuns: []float64{f.proj},
			Note:       fmt.Sprintf("Go heap held by the running projection after GC (%.1f MB) / the %d sessions in its cache (CacheSize 100k: 90-100k are kept; %d sessions folded, at %.0f events/s)", (float64(heap2)-float64(heap3))/1e6, cached, n, float64(n)/fold.Seconds())})
		serverLines = append(serverLines, Line{Name: fmt.Sprintf(nameMemServer, label), Unit: "B/session", Engine: f.server, Runs: 1,
			EngineRuns: []float64{f.server},
			Note:       fmt.Sprintf("Go heap of the embedded server after GC / %d session subjects of the event stream (one event each), read %s after the last write (block caches expired; per-block subject state, 2 min expiry, still in); the views bucket adds %.0f B per session key; process RSS %+.0f MB; %d events published in %.1f s", n, h.cfg.MemorySettle, views, float64(rss1-rss0)/1e6, n, pub.Seconds())})
		_ = h.rjs.DeleteStream(ctx, jetstream.EventStreamName(prefix))
		_ = h.rjs.DeleteKeyValue(ctx, strings.ToUpper(prefix)+"_VIEWS")
		h.progress("memory at %s sessions: projection %.0f B/cached session, server %.0f B/session subject, views %.0f B/key (published in %.1f s, folded in %.1f s)", label, f.proj, f.server, views, pub.Seconds(), fold.Seconds())
	}
	flat := func(ls []Line, get func(fig) float64) {
		for i := range ls {
			if i == 0 {
				continue
			}
			ls[i].Target = fmt.Sprintf("<= 1.5x the %s figure", sessionsLabel(h.cfg.MemorySessions[0]))
			ls[i].Met = bptr(get(figs[i]) <= 1.5*get(figs[0]))
		}
	}
	flat(projLines, func(f fig) float64 { return f.proj })
	flat(serverLines, func(f fig) float64 { return f.server })
	for _, l := range projLines {
		h.add(l)
	}
	for _, l := range serverLines {
		h.add(l)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *harness) rss() int64 {
	if h.srv == nil {
		return 0
	}
	v, err := h.srv.Server().Varz(nil)
	if err != nil {
		return 0
	}
	return v.Mem
}

// restart: the cold start again, this time with the embedded server
// restarted on the data directory first (it recovers every stream of the
// run, the cold one included).
func (h *harness) restart(ctx context.Context) error {
	if h.cfg.SkipRestart || len(h.coldProbe) == 0 {
		return nil // without cold-start there is nothing to probe
	}
	h.close()
	dir := filepath.Join(h.dir, "server")
	var serverStart []float64
	startServer := func() (*jetstream.Embedded, error) {
		start := time.Now()
		srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir, Host: "127.0.0.1"})
		if err != nil {
			return nil, err
		}
		serverStart = append(serverStart, time.Since(start).Seconds())
		return srv, nil
	}
	engine := func(ctx context.Context, run int) (float64, error) {
		start := time.Now()
		srv, err := startServer()
		if err != nil {
			return 0, err
		}
		defer srv.Shutdown()
		if err := h.coldEngineReady(ctx, srv.ClientURL(), h.coldProbe[run%len(h.coldProbe)]); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds(), nil
	}
	raw := func(ctx context.Context, run int) (float64, error) {
		start := time.Now()
		srv, err := startServer()
		if err != nil {
			return 0, err
		}
		defer srv.Shutdown()
		if err := coldRawReady(ctx, srv.ClientURL(), h.coldProbe[run%len(h.coldProbe)]); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds(), nil
	}
	l, err := h.pair(ctx, nameColdRestart, "s", false, engine, raw)
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("StartEmbedded on this run's data directory (every stream above: cold data, engine, raw, views), then as the line before; the server start alone took %.2f s (median)", median(serverStart))
	h.add(l)
	return nil
}
