// Package bench measures the engine beside raw NATS JetStream on one
// embedded server in one run, and prints a table of medians and
// ratios (text or JSON).
//
// Every line that has a raw baseline measures both sides on the same
// server, with the same payload bytes and the same number of clients, in
// alternating order run by run so that drift and background noise fall on
// both. Lines without a raw baseline (resolve, fold, split, memory) report
// the engine figure alone.
//
// Ratio convention: for rates (events/s) Ratio = engine/raw; for latencies
// (µs/op, s) Ratio = raw/engine. Either way a ratio above 1 means the
// engine is faster than raw, and 0.9 means it reaches 90% of raw.
//
// Run is what `engine bench` calls; Config.Quick is the CI mode.
package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config says what to measure and how much. The zero value measures the
// default sizes (under 10 minutes on 2 cores); Quick measures small sizes
// (under a minute) to prove that every line still works. A zero size field
// takes the default of the mode; a non-zero one is used as given.
type Config struct {
	// Quick selects the small sizes (CI).
	Quick bool `json:"quick"`
	// Runs is how many runs each line is the median of. Default 5, quick 3.
	// Memory lines are measured once (see their note).
	Runs int `json:"runs"`
	// Out receives one progress line per step; nil is quiet.
	Out io.Writer `json:"-"`
	// DataDir is where the embedded server keeps its files: a fresh
	// directory is made inside it (or inside the system temp directory
	// when empty) and removed at the end.
	DataDir string `json:"-"`
	// ProfileDir, when set, gets one extra, unmeasured run of each line
	// under the CPU profiler: <ProfileDir>/<line>.engine.pprof and
	// <line>.raw.pprof (whole process: engine, client and server).
	ProfileDir string `json:"-"`

	// SyncOps is the appends per run and side of the synchronous append
	// line (one session at a time). Default 2000, quick 300.
	SyncOps int `json:"sync_ops"`
	// Clients is the number of concurrent sessions (one goroutine each) of
	// the concurrent append line. Default 64.
	Clients int `json:"clients"`
	// ConcurrentOps is the appends per run and side of the concurrent line
	// (spread over Clients sessions). Default 12800, quick 2560.
	ConcurrentOps int `json:"concurrent_ops"`
	// ReadOps is the reads per run and side of the session read line.
	// Default 5000, quick 500.
	ReadOps int `json:"read_ops"`
	// RegistrySizes are the tool counts of the resolve lines. Default 50,
	// 500, 5000.
	RegistrySizes []int `json:"registry_sizes"`
	// CPUTime is the length of one run of a CPU-only line (resolve, fold,
	// split). Default 100ms, quick 20ms.
	CPUTime time.Duration `json:"cpu_time_ns"`
	// ReplayEvents are added to the engine stream before the replay line
	// (which replays the whole stream, the appends above included), spread
	// over ReplaySessions sessions. Default 100,000 over 10,000; quick
	// 10,000 over 1,000.
	ReplayEvents   int `json:"replay_events"`
	ReplaySessions int `json:"replay_sessions"`
	// ColdEvents over ColdSessions is the data set of the cold start lines.
	// Default 1,000,000 over 100,000; quick 20,000 over 2,000.
	ColdEvents   int `json:"cold_events"`
	ColdSessions int `json:"cold_sessions"`
	// MemorySessions are the session counts of the memory lines. Default
	// 10k, 100k, 1M; quick 1k, 5k, 10k.
	MemorySessions []int `json:"memory_sessions"`
	// MemorySettle is how long the memory lines wait before each heap
	// reading, so that the server's block caches (10s expiry) are released
	// on both sides of a delta. Default 11s, quick 0 (the quick figures then
	// include those caches); negative waits not at all in either mode.
	MemorySettle time.Duration `json:"memory_settle_ns"`
	// MemoryIdle is how long the memory step's largest event stream stays
	// untouched, after its fold, before the idle server line reads it:
	// its dedupe window and the server's expiry of per-block subject
	// state. Default 2m, quick 0 (read at once); negative: 0.
	MemoryIdle time.Duration `json:"memory_idle_ns"`
	// EraseSessions is the sessions of the erase-memory step,
	// created, measured, erased and measured again. Default 100,000,
	// quick 10,000 (at 2,000 and 5,000 the event stream's fixed caches, about 5 MB,
	// outweigh the sessions' own state). At 100k the step alone takes several minutes on 2
	// cores (the erases run at a few hundred per second).
	EraseSessions int `json:"erase_sessions"`
	// EraseConcurrency is how many erases the erase-memory step runs at
	// once. Default 64.
	EraseConcurrency int `json:"erase_concurrency"`
	// TurnCycleTurns is the turns per run of the turn cycle lines:
	// on one session, and spread over TurnCycleSessions sessions at once.
	// Default 200 over 4 sessions; quick 12 over 2.
	TurnCycleTurns    int `json:"turn_cycle_turns"`
	TurnCycleSessions int `json:"turn_cycle_sessions"`
	// AtomicBatchOps is the publishes per run and side of the atomic batch
	// lines. Default 300, quick 30.
	AtomicBatchOps int `json:"atomic_batch_ops"`
	// SkipRestart leaves out the cold start line that restarts the
	// embedded server.
	SkipRestart bool `json:"skip_restart"`
	// ScaleSessions is the sessions (one event each) of the
	// scale-restart step: restart after a clean stop and after kill -9,
	// and engine rebuild, of an engine serve child process. Default
	// 1,000,000, quick 10,000.
	ScaleSessions int `json:"scale_sessions"`
	// EngineBin is the engine executable the scale-restart step runs as
	// a child process (engine bench sets it to its own executable).
	// Required by that step.
	EngineBin string `json:"-"`
	// Only, when not empty, runs only the steps named (see Steps), to
	// measure one lever at a time; the report then lacks the other lines.
	Only []string `json:"only,omitempty"`
}

// Steps names the steps of a run, in order, for Config.Only.
func Steps() []string {
	return []string{"memory", "erase-memory", "append-sync", "append-concurrent", "session-read", "cold-session-load", "turn-resolve", "resolver",
		"fold-and-split", "tool-search", "prompt-cache", "turn-cycle", "atomic-batch", "replay", "cold-start", "scale-out", "restart", "scale-restart"}
}

func (c Config) withDefaults() Config {
	def := func(v *int, full, quick int) {
		if *v <= 0 {
			*v = full
			if c.Quick {
				*v = quick
			}
		}
	}
	def(&c.Runs, 5, 3)
	def(&c.SyncOps, 2000, 300)
	def(&c.Clients, 64, 64)
	def(&c.ConcurrentOps, 12800, 2560)
	def(&c.ReadOps, 5000, 500)
	def(&c.ReplayEvents, 100_000, 10_000)
	def(&c.ReplaySessions, 10_000, 1_000)
	def(&c.ColdEvents, 1_000_000, 20_000)
	def(&c.ColdSessions, 100_000, 2_000)
	def(&c.TurnCycleTurns, 200, 12)
	def(&c.TurnCycleSessions, 4, 2)
	def(&c.AtomicBatchOps, 300, 30)
	def(&c.EraseSessions, 100_000, 10_000)
	def(&c.EraseConcurrency, 64, 64)
	def(&c.ScaleSessions, 1_000_000, 10_000)
	if len(c.RegistrySizes) == 0 {
		c.RegistrySizes = []int{50, 500, 5000}
	}
	if len(c.MemorySessions) == 0 {
		c.MemorySessions = []int{10_000, 100_000, 1_000_000}
		if c.Quick {
			c.MemorySessions = []int{1_000, 5_000, 10_000}
		}
	}
	if c.CPUTime <= 0 {
		c.CPUTime = 100 * time.Millisecond
		if c.Quick {
			c.CPUTime = 20 * time.Millisecond
		}
	}
	if c.MemorySettle == 0 && !c.Quick {
		c.MemorySettle = 11 * time.Second
	}
	if c.MemoryIdle == 0 && !c.Quick {
		c.MemoryIdle = 2 * time.Minute
	}
	c.MemoryIdle = max(0, c.MemoryIdle)
	if c.ColdSessions > c.ColdEvents {
		c.ColdSessions = c.ColdEvents
	}
	if c.ReplaySessions > c.ReplayEvents {
		c.ReplaySessions = c.ReplayEvents
	}
	if c.ConcurrentOps < c.Clients {
		c.ConcurrentOps = c.Clients
	}
	return c
}

// Line is one row of the report.
type Line struct {
	// Name says what was measured.
	Name string `json:"name"`
	// Unit of Engine and Raw: "µs/op", "events/s", "ns/op", "s", "B/session".
	Unit string `json:"unit"`
	// Engine and Raw are the medians of the runs; Raw is 0 for lines
	// without a raw baseline.
	Engine float64 `json:"engine"`
	Raw    float64 `json:"raw"`
	// Ratio is engine/raw for rates and raw/engine for latencies (above 1:
	// the engine is faster); 0 without a raw baseline.
	Ratio float64 `json:"ratio"`
	// Rate says the figures are rates (Ratio = engine/raw), not latencies.
	Rate bool `json:"rate,omitempty"`
	// Runs is the number of runs the medians are taken over.
	Runs int `json:"runs"`
	// Allocs is the engine's heap allocations per operation (CPU-only
	// lines); nil elsewhere.
	Allocs *float64 `json:"allocs_per_op,omitempty"`
	// Target is the line's target, if any, and Met whether this run
	// reached it: every run, not only the median (a figure whose spread
	// crosses its target is not met).
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// Crossed says the median meets the target but the spread crosses it
	// (Met is then false).
	Crossed bool `json:"spread_crosses_target,omitempty"`
	// Note says what bounds or qualifies the figure.
	Note string `json:"note,omitempty"`
	// EngineRuns and RawRuns are the individual runs.
	EngineRuns []float64 `json:"engine_runs,omitempty"`
	RawRuns    []float64 `json:"raw_runs,omitempty"`
}

// Report is the outcome of Run.
type Report struct {
	Started       time.Time `json:"started"`
	Seconds       float64   `json:"seconds"`
	Quick         bool      `json:"quick"`
	Runs          int       `json:"runs"`
	GoVersion     string    `json:"go_version"`
	OS            string    `json:"os"`
	Arch          string    `json:"arch"`
	NumCPU        int       `json:"num_cpu"`
	GOMAXPROCS    int       `json:"gomaxprocs"`
	ServerVersion string    `json:"server_version"`
	// CPUModel is the machine's processor (/proc/cpuinfo's model name;
	// "" where there is none), LoadStart and LoadEnd the 1, 5 and 15
	// minute load averages when the run started and ended.
	CPUModel  string `json:"cpu_model,omitempty"`
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
	Config    Config `json:"config"`
	Lines     []Line `json:"lines"`
}

// Line returns the line of that name.
func (r Report) Line(name string) (Line, bool) {
	for _, l := range r.Lines {
		if l.Name == name {
			return l, true
		}
	}
	return Line{}, false
}

// Table renders the report as an aligned text table, with the ratio
// convention in its header.
func (r Report) Table() string {
	var b strings.Builder
	mode := "default sizes"
	if r.Quick {
		mode = "quick sizes"
	}
	fmt.Fprintf(&b, "engine bench: %s, medians of %d runs, %.0f s; %s/%s, %d CPUs, GOMAXPROCS %d, %s, nats-server %s (embedded, file storage)\n",
		mode, r.Runs, r.Seconds, r.OS, r.Arch, r.NumCPU, r.GOMAXPROCS, r.GoVersion, r.ServerVersion)
	b.WriteString("ratio: rates (events/s) engine/raw, latencies (µs/op, s) raw/engine; above 1 the engine is faster, 0.90 = 90% of raw; - = no raw baseline\n")
	b.WriteString("spread: min-max over the runs of the ratio, or of the engine figure where there is no raw baseline or the target is absolute; met: every run meets the target (\"not met (spread)\": the median does, a run does not)\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "line\tunit\tengine\traw\tratio\tspread (min-max)\tallocs/op\truns\ttarget\tmet\tnote")
	for _, l := range r.Lines {
		raw, ratio := "-", "-"
		if l.Raw != 0 {
			raw = num(l.Raw)
			ratio = fmt.Sprintf("%.2f", l.Ratio)
		}
		allocs := ""
		if l.Allocs != nil {
			allocs = fmt.Sprintf("%.2f", *l.Allocs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.Name, l.Unit, num(l.Engine), raw, ratio, l.spread(), allocs, l.Runs, l.Target, l.met(), l.Note)
	}
	tw.Flush()
	return b.String()
}

// met is the table's met column: "yes", "no", or "not met" when the
// median meets the target but the spread of the runs crosses it.
func (l Line) met() string {
	switch {
	case l.Met == nil:
		return ""
	case *l.Met:
		return "yes"
	case l.Crossed:
		return "not met (spread)"
	}
	return "no"
}

// Ratios returns the ratio of each run, engine and raw of the same run
// paired as Ratio pairs the medians; nil without a raw baseline.
func (l Line) Ratios() []float64 {
	if l.Raw == 0 || len(l.EngineRuns) != len(l.RawRuns) {
		return nil
	}
	rate := l.Rate
	out := make([]float64, 0, len(l.EngineRuns))
	for i, e := range l.EngineRuns {
		r := l.RawRuns[i]
		switch {
		case e == 0 || r == 0:
			out = append(out, 0)
		case rate:
			out = append(out, e/r)
		default:
			out = append(out, r/e)
		}
	}
	return out
}

// spread is the table's spread column: the min-max of the runs' ratios
// on a line with a raw baseline and no target or a ratio target, else of
// the engine's runs, which an absolute target is set on ("" for a single
// run).
func (l Line) spread() string {
	if xs := l.Ratios(); len(xs) > 1 && (l.Target == "" || strings.HasPrefix(l.Target, "ratio")) {
		return fmt.Sprintf("%.2f-%.2f", slices.Min(xs), slices.Max(xs))
	}
	if len(l.EngineRuns) > 1 {
		return num(slices.Min(l.EngineRuns)) + "-" + num(slices.Max(l.EngineRuns))
	}
	return ""
}

// num formats a figure with about four significant digits.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 10000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// ExpectedLines names every line Run produces for cfg, in order.
func ExpectedLines(cfg Config) []string {
	cfg = cfg.withDefaults()
	var out []string
	out = append(out,
		nameAppendSync,
		fmt.Sprintf(nameAppendConcurrent, cfg.Clients),
		fmt.Sprintf(nameProjectionLag, cfg.Clients),
		nameSessionRead,
		nameSessionReadKV,
		nameColdLoad,
		nameTurnResolve,
	)
	for _, n := range cfg.RegistrySizes {
		out = append(out, fmt.Sprintf(nameResolveCached, n), fmt.Sprintf(nameResolveCold, n))
	}
	out = append(out, nameFold, nameSplitDefault, nameSplit500)
	out = append(out, searchLineNames()...)
	out = append(out, promptCacheLineNames()...)
	out = append(out, cacheChangeLineNames()...)
	out = append(out, turnCycleLineNames(cfg)...)
	out = append(out, atomicBatchLineNames()...)
	out = append(out, nameReplay, nameReplayLimit, nameReplayWrites, nameColdStart)
	for k := 1; k <= 3; k++ {
		out = append(out, fmt.Sprintf(nameScaleOut, k))
	}
	out = append(out, namePartitioned)
	for _, n := range cfg.MemorySessions {
		out = append(out, fmt.Sprintf(nameMemProjection, sessionsLabel(n)))
	}
	for _, n := range cfg.MemorySessions {
		out = append(out, fmt.Sprintf(nameMemServer, sessionsLabel(n)))
	}
	out = append(out, fmt.Sprintf(nameMemServerIdle, sessionsLabel(slices.Max(cfg.MemorySessions))))
	out = append(out, memoryFoldLineNames(cfg)...)
	out = append(out, eraseLineNames(cfg)...)
	if !cfg.SkipRestart {
		out = append(out, nameColdRestart)
	}
	out = append(out, scaleRestartLineNames(cfg)...)
	return out
}

// Line names.
const (
	nameAppendSync       = "append, one session, synchronous"
	nameAppendConcurrent = "append, %d sessions concurrently"
	nameProjectionLag    = "projection lag p99, ack to view, under the %d-session load"
	nameSessionRead      = "session read, in memory (process running the projection)"
	nameSessionReadKV    = "session read, remote (engine without its projection, KV view)"
	nameColdLoad         = "session load, cold engine without projection, 2k events (snapshot + tail)"
	nameTurnResolve      = "resolve for a turn, Engine.Resolve, default registry"
	nameResolveCached    = "resolve cached, %d tools"
	nameResolveCold      = "resolve cold (uncached), %d tools"
	nameFold             = "fold per event (decode + apply)"
	nameSplitDefault     = "split per call, default registry"
	nameSplit500         = "split per call, 500 tools"
	nameReplay           = "replay whole stream into a fresh projection"
	nameReplayLimit      = "replay, against a count-only consumer (physical limit)"
	nameReplayWrites     = "replay, against consume + decode + one KV put per session (the same writes)"
	nameScaleOut         = "scale-out, %d engine(s), 3-node cluster, 3 replicas"
	namePartitioned      = "scale-out, 3 engines, 3 partitioned streams led by 3 nodes, 3 replicas"
	nameColdStart        = "cold start, fresh engine ready"
	nameMemProjection    = "memory per cached session, projection, %s sessions"
	nameMemServer        = "memory per session subject, server, %s sessions"
	nameMemServerIdle    = "memory per idle session subject, server, %s sessions"
	nameColdRestart      = "cold start incl. server restart"
)

func sessionsLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// Run starts one embedded server, measures every line and returns the
// report. On an error it returns the lines measured so far with the error.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	rep := Report{
		Started: time.Now(), Quick: cfg.Quick, Runs: cfg.Runs, Config: cfg,
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		ServerVersion: serverVersion(), CPUModel: cpuModel(), LoadStart: loadAverage(),
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o750); err != nil {
			return rep, fmt.Errorf("bench: profile directory: %w", err)
		}
	}
	parent := cfg.DataDir
	if parent != "" {
		if err := os.MkdirAll(parent, 0o750); err != nil {
			return rep, fmt.Errorf("bench: data directory: %w", err)
		}
	}
	dir, err := os.MkdirTemp(parent, "engine-bench-")
	if err != nil {
		return rep, fmt.Errorf("bench: data directory: %w", err)
	}
	defer os.RemoveAll(dir)

	for _, o := range cfg.Only {
		if !slices.Contains(Steps(), o) {
			return rep, fmt.Errorf("bench: no step %q: the steps are %s", o, strings.Join(Steps(), ", "))
		}
	}
	h := &harness{cfg: cfg, out: cfg.Out, dir: dir, started: rep.Started}
	defer h.close()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"start", h.start},
		// Memory first, while nothing else on the server or in the heap
		// expires under the measurement (block caches, per-block subject
		// state and dedupe entries of earlier steps would make the deltas
		// drift); the table keeps the order.
		{"memory", h.memory},
		// Erase right after memory, for the same reason.
		{"erase memory", h.eraseMemory},
		{"append sync", h.appendSync},
		{"append concurrent", h.appendConcurrent},
		{"session read", h.sessionRead},
		{"cold session load", h.coldLoad},
		{"turn resolve", h.turnResolve},
		{"resolver", h.resolveLines},
		{"fold and split", h.foldSplit},
		{"tool search", h.searchLines},
		{"prompt cache", h.promptCache},
		{"turn cycle", h.turnCycle},
		{"atomic batch", h.atomicBatch},
		{"replay", h.replay},
		{"cold start", h.coldStart},
		{"scale-out", h.scaleOut},
		{"restart", h.restart},
		// Last: a child process with its own server, at a million
		// sessions by default; nothing measured after it competes with
		// its files.
		{"scale restart", h.scaleRestart},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			break
		}
		if len(cfg.Only) > 0 && s.name != "start" && !slices.Contains(cfg.Only, strings.ReplaceAll(s.name, " ", "-")) {
			continue
		}
		if err = s.fn(ctx); err != nil {
			err = fmt.Errorf("bench %s: %w", s.name, err)
			break
		}
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("bench: %w", ctx.Err())
	}
	order := ExpectedLines(cfg)
	slices.SortStableFunc(h.lines, func(a, b Line) int {
		return slices.Index(order, a.Name) - slices.Index(order, b.Name)
	})
	rep.Lines = h.lines
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.LoadEnd = loadAverage()
	h.progress("done in %.1f s", rep.Seconds)
	return rep, err
}

func serverVersion() string { return server.VERSION }

func cpuCount() int { return runtime.NumCPU() }

// median of xs (xs is not modified).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func bptr(b bool) *bool       { return &b }
func fptr(f float64) *float64 { return &f }
