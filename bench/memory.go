package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// memory: for each size, one event for each of N new sessions on a fresh
// stream and a projection folding them into a fresh bucket. The Go heap
// (server and engine share the process) is read after GC: before (with the
// stream and bucket created and written once, so that their fixed buffers
// are in the baseline), after the events are stored, with the projection
// caught up, and after the projection is dropped. Server per session
// subject = stored - before; projection cache = caught up - after, per
// cached session (the cache holds at most CacheSize sessions). The views
// bucket is measured by deleting it: with the event stream already
// deleted, heap before - heap after deleting the bucket, per key (the
// difference after - stored would mix the bucket's growth with the event
// stream's per-subject state expiring during a long fold). Each reading
// waits MemorySettle first. With ProfileDir set, a heap profile is
// written at the stored and the folded readings, and a CPU profile of
// the fold.
func (h *harness) memory(ctx context.Context) error {
	type fig struct{ proj, server, rate, cpu, cores float64 }
	var figs []fig
	var projLines, serverLines []Line
	largest := slices.Max(h.cfg.MemorySessions)
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
		if err := logport.Sleep(ctx, h.cfg.MemorySettle); err != nil {
			return err
		}
		heap0, rss0 := heapAfterGC(), h.rss()
		label := sessionsLabel(n)
		sessions := sessionNames("m-", n)
		start := time.Now()
		if err := generate(ctx, h.rjs, prefix, sessions, 1); err != nil {
			return err
		}
		pub := time.Since(start)
		if err := logport.Sleep(ctx, h.cfg.MemorySettle); err != nil {
			return err
		}
		heap1 := heapAfterGC()
		if err := h.heapProfile(label, "stored"); err != nil {
			return err
		}
		endProfile, err := h.cpuProfile(fmt.Sprintf("memory-%s-fold", label))
		if err != nil {
			return err
		}
		start, cpu0 := time.Now(), processCPU()
		stop, err := runProjection(ctx, p, uint64(n+1), 20*time.Minute)
		fold, cpu := time.Since(start), processCPU()-cpu0
		folded := time.Now() // the event stream's blocks were last read
		endProfile()
		if err != nil {
			return err
		}
		if err := logport.Sleep(ctx, h.cfg.MemorySettle); err != nil {
			stop()
			return err
		}
		heap2 := heapAfterGC()
		if err := h.heapProfile(label, "folded"); err != nil {
			stop()
			return err
		}
		cached := p.Cached()
		stop()
		p, mlog = nil, nil
		heap3, rss1 := heapAfterGC(), h.rss()
		idleFrom := time.Time{}
		if n == largest {
			idleFrom = folded
		}
		views, err := h.storePerKey(ctx, prefix, n, idleFrom)
		if err != nil {
			return err
		}
		f := fig{
			proj:   (float64(heap2) - float64(heap3)) / float64(max(cached, 1)),
			server: (float64(heap1) - float64(heap0)) / float64(n),
			rate:   float64(n) / fold.Seconds(),
			cpu:    float64(cpu.Microseconds()) / float64(n),
			cores:  cpu.Seconds() / fold.Seconds(),
		}
		figs = append(figs, f)
		projLines = append(projLines, Line{Name: fmt.Sprintf(nameMemProjection, label), Unit: "B/session", Engine: f.proj, Runs: 1,
			EngineRuns: []float64{f.proj},
			Note:       fmt.Sprintf("Go heap held by the running projection after GC (%.1f MB) / the %d sessions in its cache (CacheSize 100k: 90-100k are kept; %d sessions folded, at %.0f events/s)", (float64(heap2)-float64(heap3))/1e6, cached, n, float64(n)/fold.Seconds())})
		serverLines = append(serverLines, Line{Name: fmt.Sprintf(nameMemServer, label), Unit: "B/session", Engine: f.server, Runs: 1,
			EngineRuns: []float64{f.server},
			Note:       fmt.Sprintf("Go heap of the embedded server after GC / %d session subjects of the event stream (one event each), read %s after the last write (block caches expired; per-block subject state, 2 min expiry, still in); the views bucket adds %.0f B per session key; process RSS %+.0f MB; %d events published in %.1f s", n, h.cfg.MemorySettle, views, float64(rss1-rss0)/1e6, n, pub.Seconds())})
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
	h.addFoldLines(func(i int) (float64, float64, float64) { return figs[i].rate, figs[i].cpu, figs[i].cores })
	return nil
}

// cpuProfile starts the CPU profile <ProfileDir>/<name>.cpu.pprof when
// ProfileDir is set (the whole process: server, projection, publisher)
// and returns what stops it.
func (h *harness) cpuProfile(name string) (stop func(), err error) {
	if h.cfg.ProfileDir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(h.cfg.ProfileDir, name+".cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("memory: CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("memory: CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// heapProfile writes the heap profile of the memory step at a size and
// a point (stored: the events stored, nothing folded; folded: the
// projection caught up) to <ProfileDir>/memory-<label>-<point>.heap.pprof
// when ProfileDir is set: what holds the memory per session (the
// server's per-subject state, the views, the projection's cache). The
// heap was collected just before.
func (h *harness) heapProfile(label, point string) error {
	if h.cfg.ProfileDir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(h.cfg.ProfileDir, fmt.Sprintf("memory-%s-%s.heap.pprof", label, point)))
	if err != nil {
		return fmt.Errorf("memory: heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("memory: heap profile: %w", err)
	}
	return f.Close()
}

// storePerKey deletes the memory step's event stream, then its views
// bucket, and returns the heap the bucket held per key: the difference
// of the heap after GC before and after deleting it, both read with the
// event stream gone (its per-subject state no longer shrinking between
// them). When idleFrom is set (the largest size), it first waits until
// the event stream has been idle since then for MemoryIdle and
// MemorySettle, and adds the idle server line: the heap the stream held
// per session subject then (the difference before and after deleting
// it), once its dedupe entries and per-block subject state expired.
func (h *harness) storePerKey(ctx context.Context, prefix string, n int, idleFrom time.Time) (float64, error) {
	if !idleFrom.IsZero() {
		wait := time.Until(idleFrom.Add(h.cfg.MemoryIdle + max(0, h.cfg.MemorySettle)))
		h.progress("memory at %s sessions: waiting %.0f s for the event stream to be idle for %s", sessionsLabel(n), max(0, wait.Seconds()), h.cfg.MemoryIdle+max(0, h.cfg.MemorySettle))
		if err := logport.Sleep(ctx, wait); err != nil {
			return 0, err
		}
		before := heapAfterGC()
		if err := h.rjs.DeleteStream(ctx, jetstream.EventStreamName(prefix)); err != nil {
			return 0, fmt.Errorf("memory: delete the event stream: %w", err)
		}
		if err := logport.Sleep(ctx, h.cfg.MemorySettle); err != nil {
			return 0, err
		}
		idle := (float64(before) - float64(heapAfterGC())) / float64(n)
		h.add(Line{Name: fmt.Sprintf(nameMemServerIdle, sessionsLabel(n)), Unit: "B/session", Engine: idle, Runs: 1, EngineRuns: []float64{idle},
			Note: fmt.Sprintf("Go heap the embedded server gives back when the event stream of %d sessions (one event each) is deleted, read after the stream was idle for %s (no write, no read since the fold): its dedupe entries (2 min window) and per-block subject state have expired, its per-subject index is what stays per idle session; the fixed state of one stream is in the figure", n, h.cfg.MemoryIdle+max(0, h.cfg.MemorySettle))})
	} else if err := h.rjs.DeleteStream(ctx, jetstream.EventStreamName(prefix)); err != nil {
		return 0, fmt.Errorf("memory: delete the event stream: %w", err)
	}
	if err := logport.Sleep(ctx, h.cfg.MemorySettle); err != nil {
		return 0, err
	}
	before := heapAfterGC()
	if err := h.rjs.DeleteKeyValue(ctx, strings.ToUpper(prefix)+"_VIEWS"); err != nil {
		return 0, fmt.Errorf("memory: delete the views bucket: %w", err)
	}
	if err := logport.Sleep(ctx, h.cfg.MemorySettle); err != nil {
		return 0, err
	}
	return (float64(before) - float64(heapAfterGC())) / float64(n), nil
}

// nameMemFold is the fold rate line of each memory size.
const nameMemFold = "projection fold, one event for each of %s new sessions"

// memoryFoldLineNames names the fold lines of cfg's memory sizes, in
// order; ExpectedLines lists them after the memory lines.
func memoryFoldLineNames(cfg Config) []string {
	var out []string
	for _, n := range cfg.MemorySessions {
		out = append(out, fmt.Sprintf(nameMemFold, sessionsLabel(n)))
	}
	return out
}

// addFoldLines adds the fold rate of each memory size, fig(i) for
// MemorySessions[i] (events/s, the process's CPU µs per event and the
// cores it had during the fold): past the reference size (100k, else the
// first) a size must fold at >= 0.8 of its rate (no cliff with the number
// of sessions). The CPU per event says what the rate is on a machine
// whose other work takes cores. A line ExpectedLines does not list yet
// is left out.
func (h *harness) addFoldLines(fig func(int) (rate, cpu, cores float64)) {
	rate := func(i int) float64 { r, _, _ := fig(i); return r }
	sizes := h.cfg.MemorySessions
	ref := 0
	for i, n := range sizes {
		if n == 100_000 {
			ref = i
		}
	}
	expected := ExpectedLines(h.cfg)
	names := memoryFoldLineNames(h.cfg)
	for i, n := range sizes {
		name := names[i]
		if !slices.Contains(expected, name) {
			continue
		}
		_, cpu, cores := fig(i)
		l := Line{Name: name, Unit: "events/s", Engine: rate(i), Runs: 1, EngineRuns: []float64{rate(i)},
			Note: fmt.Sprintf("the memory step's fold: a fresh projection (CacheSize 100k) folding one event of each of %d sessions on a fresh stream, from its start until WaitApplied; past the cache size a new session must cost no view read; the process (server, projection) used %.1f µs of CPU per event, %.2f cores on average", n, cpu, cores)}
		if i > ref {
			l.Target = fmt.Sprintf(">= 0.8 of the %s rate (%.0f events/s)", sessionsLabel(sizes[ref]), rate(ref))
			l.Met = bptr(rate(i) >= 0.8*rate(ref))
		}
		h.add(l)
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
	// restarted is one side's run: the server started on dir, until
	// ready answers for the run's probe (s).
	restarted := func(ready func(ctx context.Context, url string, probe coldProbe) error) sample {
		return func(ctx context.Context, run int) (float64, error) {
			start := time.Now()
			srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir, Host: "127.0.0.1"})
			if err != nil {
				return 0, err
			}
			serverStart = append(serverStart, time.Since(start).Seconds())
			defer srv.Shutdown()
			if err := ready(ctx, srv.ClientURL(), h.coldProbe[run%len(h.coldProbe)]); err != nil {
				return 0, err
			}
			return time.Since(start).Seconds(), nil
		}
	}
	l, err := h.pair(ctx, nameColdRestart, "s", false, restarted(h.coldEngineReady), restarted(coldRawReady))
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("StartEmbedded on this run's data directory (every stream above: cold data, engine, raw, views), then as the line before; the server start alone took %.2f s (median)", median(serverStart))
	h.add(l)
	return nil
}
