package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// testWriter sends progress lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuick runs the whole harness with the quick sizes and checks that it
// completes and that every line is there with a finite, positive engine
// figure. It never asserts a timing or a ratio.
func TestQuick(t *testing.T) {
	// Under load (4 helpers on 2 cores) the quick run took 223 s: the
	// bound is for a hung step, not a timing.
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	cfg := Config{Quick: true, Out: testWriter{t}, DataDir: t.TempDir(), EngineBin: engineBin(t)}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := ExpectedLines(cfg)
	if len(want) < 20 {
		t.Fatalf("only %d expected lines: %v", len(want), want)
	}
	if len(rep.Lines) != len(want) {
		t.Errorf("report has %d lines, want %d", len(rep.Lines), len(want))
	}
	table := rep.Table()
	for _, name := range want {
		l, ok := rep.Line(name)
		if !ok {
			t.Errorf("line %q missing", name)
			continue
		}
		if math.IsNaN(l.Engine) || math.IsInf(l.Engine, 0) || l.Engine <= 0 {
			t.Errorf("line %q: engine figure %v, want finite and positive", name, l.Engine)
		}
		if l.Runs < 1 || l.Unit == "" {
			t.Errorf("line %q: runs %d unit %q", name, l.Runs, l.Unit)
		}
		if math.IsNaN(l.Ratio) || math.IsInf(l.Ratio, 0) || math.IsNaN(l.Raw) || math.IsInf(l.Raw, 0) {
			t.Errorf("line %q: raw %v ratio %v, want finite", name, l.Raw, l.Ratio)
		}
		if !strings.Contains(table, name) {
			t.Errorf("table lacks line %q", name)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report does not encode as JSON: %v", err)
	}
	t.Log("\n" + table)
}

func TestExpectedLinesFollowConfig(t *testing.T) {
	got := ExpectedLines(Config{RegistrySizes: []int{7}, MemorySessions: []int{3, 4}, SkipRestart: true})
	for _, name := range []string{"resolve cached, 7 tools", "memory per session subject, server, 4 sessions"} {
		found := false
		for _, g := range got {
			found = found || g == name
		}
		if !found {
			t.Errorf("%q not in %v", name, got)
		}
	}
	for _, g := range got {
		if g == nameColdRestart {
			t.Errorf("restart line listed with SkipRestart")
		}
	}
}

func TestRegistryJSONLoads(t *testing.T) {
	for _, n := range []int{50, 500, 5000} {
		reg, err := resolver.Load(registryJSON(n))
		if err != nil {
			t.Fatalf("%d tools: %v", n, err)
		}
		res, err := reg.Resolve(benchRequest(n))
		if err != nil || len(res.Tools) != n-1 {
			t.Fatalf("%d tools: resolved %d (%v), want %d", n, len(res.Tools), err, n-1)
		}
	}
}

// fixture is the engine and raw side of the harness, for the Go
// benchmarks (and `go test -bench -cpuprofile`).
func fixture(b testing.TB) *harness {
	b.Helper()
	ctx := context.Background()
	h := &harness{cfg: Config{}.withDefaults(), dir: b.TempDir(), started: time.Now()}
	if err := h.start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.close)
	return h
}

// stopProjection stops the fixture's projection (for the diagnostic
// variants that measure the engine without it).
func (h *harness) stopProjection() {
	if h.projCancel != nil {
		h.projCancel()
		<-h.projDone
		h.projCancel = nil
	}
}

var benchRun int

func nextRun() int { benchRun++; return 1000 + benchRun }

// countMsgs reports the server's client messages (in + out) and bytes per
// operation of fn, and the process's CPU time (user + system: engine,
// client and server) per operation, counted until the engine's projection
// is caught up. CPU time is what a loaded machine cannot hide: on a
// dedicated one, throughput is bounded by cores / CPU per operation.
func countMsgs(b *testing.B, h *harness, fn func()) {
	b.Helper()
	stats := func() (int64, int64) {
		v, err := h.srv.Server().Varz(nil)
		if err != nil {
			b.Fatal(err)
		}
		return v.InMsgs + v.OutMsgs, v.InBytes + v.OutBytes
	}
	m0, by0 := stats()
	cpu0 := cpuTime()
	fn()
	if h.projCancel != nil {
		if err := h.waitProjection(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	m1, by1 := stats()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(m1-m0)/float64(b.N), "msgs/op")
	b.ReportMetric(float64(by1-by0)/float64(b.N), "wireB/op")
}

// BenchmarkAppendSync is one synchronous append: the engine (with its
// projection running, as deployed), the fair raw publish (fresh ULID and
// encode, the engine's three headers), and the engine with its projection
// stopped. msgs/op counts NATS messages through the server.
func BenchmarkAppendSync(b *testing.B) {
	h := fixture(b)
	ctx := context.Background()
	engine := func(b *testing.B) {
		s := fmt.Sprintf("bsync-e%04d", nextRun())
		if _, err := h.eng.Apply(ctx, s, origin, nil, toggle(0)); err != nil {
			b.Fatal(err)
		}
		i := 1
		countMsgs(b, h, func() {
			for b.Loop() {
				if _, err := h.eng.Apply(ctx, s, origin, nil, toggle(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	b.Run("engine", engine)
	b.Run("raw", func(b *testing.B) {
		w := newRawWriter(fmt.Sprintf("bsync-r%04d", nextRun()))
		last, err := w.publishSync(ctx, h.rjs, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		i := 1
		countMsgs(b, h, func() {
			for b.Loop() {
				if last, err = w.publishSync(ctx, h.rjs, i, last); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("engine-no-projection", func(b *testing.B) {
		h.stopProjection()
		engine(b)
	})
}

// BenchmarkAppendConcurrent is appends from 64 goroutines, one session
// each: the engine (projection running), the fair raw async publish (next
// on ack), and the engine without its projection.
func BenchmarkAppendConcurrent(b *testing.B) {
	h := fixture(b)
	ctx := context.Background()
	const clients = 64
	par := func(b *testing.B, prefix string, fn func(s string, i int) error) {
		r := nextRun()
		var mu sync.Mutex
		g := 0
		b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
		countMsgs(b, h, func() {
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				s := fmt.Sprintf("%s%04d-%03d", prefix, r, g)
				g++
				mu.Unlock()
				for i := 0; pb.Next(); i++ {
					if err := fn(s, i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	engine := func(b *testing.B) {
		par(b, "bconc-e", func(s string, i int) error {
			_, err := h.eng.Apply(ctx, s, origin, nil, toggle(i))
			return err
		})
	}
	b.Run("engine", engine)
	b.Run("raw", func(b *testing.B) {
		var writers sync.Map
		par(b, "bconc-r", func(s string, i int) error {
			v, _ := writers.LoadOrStore(s, &struct {
				w    *rawWriter
				last uint64
			}{w: newRawWriter(s)})
			st := v.(*struct {
				w    *rawWriter
				last uint64
			})
			last, err := st.w.publishAsync(ctx, h.rjs, i, st.last)
			st.last = last
			return err
		})
	})
	b.Run("engine-no-projection", func(b *testing.B) {
		h.stopProjection()
		engine(b)
	})
}

// BenchmarkSessionRead is one engine session read, one raw KV get of the
// same key, one read by a second engine that does not run the projection
// (engine bench's remote read line: a view get and decode), and one
// Engine.Resolve (the per-turn read path).
func BenchmarkSessionRead(b *testing.B) {
	h := fixture(b)
	ctx := context.Background()
	s := "bread-0001"
	res, err := h.eng.Apply(ctx, s, origin, nil, toggle(0))
	if err != nil {
		b.Fatal(err)
	}
	if err := h.proj.WaitApplied(ctx, res.Last); err != nil {
		b.Fatal(err)
	}
	b.Run("engine", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.eng.Session(ctx, s, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.rkv.Get(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The remote line's engine: a second engine on the stream that does
	// not run the projection (one view get and decode per read).
	other, err := projection.Open(ctx, h.elog, projection.Config{})
	if err != nil {
		b.Fatal(err)
	}
	reader := service.New(h.elog, other, resolver.Default(), service.Config{})
	b.Run("engine-remote", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reader.Session(ctx, s, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("turn", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.eng.Resolve(ctx, s, service.ResolveRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkResolve is the cached and cold resolution of the bench
// registries.
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{50, 500, 5000} {
		reg, err := resolver.Load(registryJSON(n))
		if err != nil {
			b.Fatal(err)
		}
		req := benchRequest(n)
		b.Run(fmt.Sprintf("cached-%d", n), func(b *testing.B) {
			_, _ = reg.Resolve(req)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = reg.Resolve(req)
			}
		})
		b.Run(fmt.Sprintf("cold-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = reg.ResolveUncached(req)
			}
		})
	}
}

// TestDefaultSizes runs the harness with the default sizes when
// ENGINE_BENCH_FULL=1 (about 5 to 10 minutes on 2 cores): the table goes to
// the test log, the JSON report to $ENGINE_BENCH_JSON and CPU profiles to
// $ENGINE_BENCH_PROFILE when those are set.
//
//	ENGINE_BENCH_FULL=1 go test -run TestDefaultSizes -timeout 30m -v ./bench
func TestDefaultSizes(t *testing.T) {
	if os.Getenv("ENGINE_BENCH_FULL") != "1" {
		t.Skip("set ENGINE_BENCH_FULL=1 to run the default sizes")
	}
	cfg := Config{Out: os.Stderr, ProfileDir: os.Getenv("ENGINE_BENCH_PROFILE")}
	rep, err := Run(context.Background(), cfg)
	t.Log("\n" + rep.Table())
	if path := os.Getenv("ENGINE_BENCH_JSON"); path != "" {
		b, jerr := json.MarshalIndent(rep, "", "  ")
		if jerr != nil {
			t.Fatal(jerr)
		}
		if werr := os.WriteFile(path, b, 0o644); werr != nil {
			t.Fatal(werr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// cpuTime is the CPU time the process has used (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The turn-cycle and atomic-batch steps run in quick mode and print
// every line they own: each phase's p50 and p99 per setting (in-process,
// HTTP, several sessions) beside the raw appends the same turn needs, the
// log writes per turn, and the atomic batch beside two CAS publishes and
// one combined publish. No figure is asserted, only that it was measured.
func TestTurnCycleAndAtomicBatchLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{Quick: true, Out: testWriter{t}, DataDir: t.TempDir(), Only: []string{"turn-cycle", "atomic-batch"}}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	table := rep.Table()
	names := append(turnCycleLineNames(cfg.withDefaults()), atomicBatchLineNames()...)
	if len(rep.Lines) != len(names) {
		t.Errorf("report has %d lines, want %d", len(rep.Lines), len(names))
	}
	for _, name := range names {
		l, ok := rep.Line(name)
		if !ok {
			t.Errorf("line %q missing", name)
			continue
		}
		if l.Engine <= 0 || math.IsNaN(l.Engine) || math.IsInf(l.Engine, 0) || len(l.EngineRuns) != l.Runs {
			t.Errorf("line %q: engine %v over %d runs (%v)", name, l.Engine, l.Runs, l.EngineRuns)
		}
		if !strings.Contains(table, name) {
			t.Errorf("table lacks line %q", name)
		}
		if strings.Contains(name, "turn/discover") || strings.Contains(name, "turn/dispatch") || strings.Contains(name, "log writes") ||
			strings.Contains(name, "log bytes") || strings.Contains(name, ": resume ") {
			continue // nothing written, or a figure without a baseline
		}
		if l.Raw <= 0 || len(l.RawRuns) != l.Runs {
			t.Errorf("line %q: no raw baseline (%v, %v)", name, l.Raw, l.RawRuns)
		}
	}
	// The turn cycle writes TurnStarted and a TurnEnded carrying the
	// checkpoint every turn and a DeferredLoaded on the discovery
	// turns: at least 2 events per turn.
	w, _ := rep.Line(fmt.Sprintf(nameTurnCycleWrites, "in-process, one session"))
	if w.Engine < 2 {
		t.Errorf("%s: %v events per turn, want >= 2", w.Name, w.Engine)
	}
	// A turn on 10,000 tools writes about what a turn on the default
	// registry writes: its checkpoint holds the loaded tools, not the
	// registry.
	small, _ := rep.Line(fmt.Sprintf(nameTurnCycleBytes, "in-process, one session"))
	large, _ := rep.Line(fmt.Sprintf(nameTurnCycleBytes, fmt.Sprintf("in-process, one session, %s MCP tools", sessionsLabel(tcLargeRegistry))))
	if small.Engine <= 0 || large.Engine > 2*small.Engine {
		t.Errorf("log bytes per turn: %v on the default registry, %v on %d tools; want the large no more than twice the small", small.Engine, large.Engine, tcLargeRegistry)
	}
	t.Log("\n" + table)
}

// The spread column is the min-max of the runs' ratios, and a
// target is met only when every run meets it ("not met" when the median
// meets it but the spread crosses it).
func TestSpreadAndTargets(t *testing.T) {
	l := Line{Name: "x", Unit: "µs/op", Engine: 100, Raw: 95, Ratio: 0.95, EngineRuns: []float64{100, 90, 200}, RawRuns: []float64{95, 90, 100}, Runs: 3}
	ratioTarget(&l, 0.9)
	if l.spread() != "0.50-1.00" || *l.Met || !l.Crossed || l.met() != "not met (spread)" {
		t.Errorf("latency line: spread %q met %v crossed %v (%q)", l.spread(), *l.Met, l.Crossed, l.met())
	}
	r := Line{Name: "y", Unit: "events/s", Rate: true, Engine: 90, Raw: 100, Ratio: 0.9, EngineRuns: []float64{90, 95}, RawRuns: []float64{100, 100}, Runs: 2}
	ratioTarget(&r, 0.85)
	if r.spread() != "0.90-0.95" || !*r.Met || r.met() != "yes" {
		t.Errorf("rate line: spread %q met %q", r.spread(), r.met())
	}
	m := Line{Name: "z", Unit: "µs/op", Engine: 1500, EngineRuns: []float64{1400, 1500, 2500}, Raw: 150, RawRuns: []float64{150, 140, 160}, Runs: 3}
	maxTarget(&m, 2000, "< 2 ms")
	if *m.Met || !m.Crossed || m.spread() != "1400.0-2500.0" {
		t.Errorf("max target: met %v crossed %v spread %q (the engine's, the target's figure)", *m.Met, m.Crossed, m.spread())
	}
}

// Every step is one --only accepts, and an unknown name is
// refused before anything runs.
func TestOnlyStepNames(t *testing.T) {
	for _, s := range []string{"prompt-cache", "turn-cycle", "atomic-batch", "memory", "restart"} {
		if !slices.Contains(Steps(), s) {
			t.Errorf("Steps() lacks %q", s)
		}
	}
	_, err := Run(context.Background(), Config{Quick: true, DataDir: t.TempDir(), Only: []string{"turn-cycles"}})
	if err == nil || !strings.Contains(err.Error(), "turn-cycle") {
		t.Errorf("unknown step: %v", err)
	}
}

// The erase-memory step runs in quick mode and prints its
// lines: the event stream's memory per session before and after erasing
// every session through Engine.Erase, with a non-negative fraction
// returned, the erase throughput and the audit stream per erased session.
// The step itself fails unless the stream holds no message after the
// erase and a raw direct get finds each sampled erased subject empty.
// No figure is asserted beyond its sign.
func TestEraseMemoryQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{Quick: true, Out: testWriter{t}, DataDir: t.TempDir(), Only: []string{"erase-memory"}}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := eraseLineNames(cfg.withDefaults())
	if len(rep.Lines) != len(names) {
		t.Errorf("report has %d lines, want %d", len(rep.Lines), len(names))
	}
	table := rep.Table()
	for i, name := range names {
		l, ok := rep.Line(name)
		if !ok {
			t.Errorf("line %q missing", name)
			continue
		}
		if math.IsNaN(l.Engine) || math.IsInf(l.Engine, 0) || (i > 0 && l.Engine <= 0) {
			t.Errorf("line %q: engine figure %v, want finite and positive", name, l.Engine)
		}
		if !strings.Contains(table, name) {
			t.Errorf("table lacks line %q", name)
		}
	}
	// The fraction returned may be negative: an erased id keeps its
	// tombstone and subject, and the purged records leave the blocks (and
	// the server's delete maps) only at its sync interval.
	returned, _ := rep.Line(names[0])
	if math.IsNaN(returned.Engine) || returned.Engine > 1 {
		t.Errorf("%s: %v, want a fraction of at most 1 (%s)", returned.Name, returned.Engine, returned.Note)
	}
	for _, want := range []string{"before = ", "after = ", "found their SessionDeleted only"} {
		if !strings.Contains(returned.Note, want) {
			t.Errorf("%s: note lacks %q: %s", returned.Name, want, returned.Note)
		}
	}
	t.Log("\n" + table)
}

// The performance page is a function of the report: machine, date, every
// line with its figures and note, and the command that regenerates it.
func TestReportMarkdown(t *testing.T) {
	met := true
	rep := Report{Started: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC), Seconds: 700, Runs: 5, GoVersion: "go1.26.8", OS: "linux", Arch: "amd64",
		NumCPU: 2, GOMAXPROCS: 2, ServerVersion: "2.15.2", CPUModel: "Test CPU", LoadStart: "0.5 0.4 0.3", LoadEnd: "1.0 0.8 0.5",
		Lines: []Line{
			{Name: "append, one session, synchronous", Unit: "µs/op", Engine: 65.8, Raw: 76.2, Ratio: 1.16, Runs: 5, Target: "ratio >= 0.9", Met: &met,
				Note: "engine = Engine.Append | raw = a CAS publish", EngineRuns: []float64{65, 66}, RawRuns: []float64{76, 77}},
			{Name: "fold per event", Unit: "ns/op", Engine: 338.1, Runs: 5},
		}}
	md := rep.Markdown()
	for _, want := range []string{"2030-01-02 03:04 UTC", "Test CPU, 2 CPUs", "0.5 0.4 0.3 at the start, 1.0 0.8 0.5 at the end",
		MarkdownCommand, "| append, one session, synchronous | µs/op | 65.80 | 76.20 | 1.16 |", "| fold per event | ns/op | 338.1 | - | - |",
		"- **append, one session, synchronous**: engine = Engine.Append \\| raw = a CAS publish"} {
		if !strings.Contains(md, want) {
			t.Errorf("the page lacks %q:\n%s", want, md)
		}
	}
}

// docs/performance.md is the page of the report saved beside it,
// docs/performance.json, as MarkdownCommand writes them.
func TestPerformancePageIsGenerated(t *testing.T) {
	data, err := os.ReadFile("../docs/performance.json")
	if err != nil {
		t.Fatalf("read the saved report: %v (write it: %s)", err, MarkdownCommand)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil || len(rep.Lines) == 0 {
		t.Fatalf("docs/performance.json is not a report with lines (%v): %s", err, MarkdownCommand)
	}
	page, err := os.ReadFile("../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(page) != rep.Markdown() {
		t.Fatalf("docs/performance.md is not the page of docs/performance.json: regenerate both with %s", MarkdownCommand)
	}
}

// engineBin builds the engine binary once per test process, for the
// scale-restart step, which runs it as engine serve and engine rebuild.
func engineBin(t testing.TB) string {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bench-engine-")
		if err != nil {
			builtErr = err
			return
		}
		built = filepath.Join(dir, "engine")
		out, err := exec.Command("go", "build", "-o", built, "../cmd/engine").CombinedOutput()
		if err != nil {
			builtErr = fmt.Errorf("go build ../cmd/engine: %w: %s", err, out)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return built
}

var (
	builtOnce sync.Once
	built     string
	builtErr  error
)

// The scale-restart step runs engine serve as a child process holding
// its sessions and restarts it after a clean stop (SIGTERM) and after
// kill -9 (SIGKILL), then runs engine rebuild and starts it again: no
// restart folds again any event its views hold (the projection resumes
// after its acknowledged position, and a rebuild moves the feed past
// what it folded), the rebuild folds every event once, and each restart
// reads a session's view over HTTP (the step fails otherwise). No time
// is asserted.
func TestScaleRestartRefoldsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{Quick: true, Out: testWriter{t}, DataDir: t.TempDir(), EngineBin: engineBin(t), Only: []string{"scale-restart"}, ScaleSessions: 2000}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := scaleRestartLineNames(cfg.withDefaults())
	if len(rep.Lines) != len(names) {
		t.Errorf("report has %d lines, want %d", len(rep.Lines), len(names))
	}
	for _, name := range names {
		l, ok := rep.Line(name)
		if !ok {
			t.Errorf("line %q missing", name)
			continue
		}
		if l.Met == nil || !*l.Met {
			t.Errorf("%s: target %q not met: %s", name, l.Target, l.Note)
		}
		if l.Engine <= 0 || len(l.EngineRuns) != l.Runs {
			t.Errorf("%s: engine %v over %d runs (%v)", name, l.Engine, l.Runs, l.EngineRuns)
		}
	}
	for _, name := range names[:2] {
		if l, _ := rep.Line(name); l.Raw <= 0 || len(l.RawRuns) != l.Runs {
			t.Errorf("%s: no raw baseline (the server alone): %v", name, l.RawRuns)
		}
	}
	t.Log("\n" + rep.Table())
}

// A run that includes the scale-restart step without the engine binary
// fails with an error that says what to set.
func TestScaleRestartNeedsEngineBin(t *testing.T) {
	_, err := Run(context.Background(), Config{Quick: true, DataDir: t.TempDir(), Only: []string{"scale-restart"}})
	if err == nil || !strings.Contains(err.Error(), "EngineBin") {
		t.Fatalf("scale-restart without EngineBin: %v, want an error naming Config.EngineBin", err)
	}
}
