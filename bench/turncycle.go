package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// The turn cycle: a whole model turn as a backend drives it on the
// embedded default (default registry, embedded server): turn/begin, a
// tool_search every 4th turn, one dispatch, turn/end. Each phase's p50 and
// p99 are measured in-process (service.Engine) and over HTTP (the API's
// handler on a loopback listener, client.NewHTTP), beside the raw
// JetStream appends the same turn needs: the very event bytes the engine
// stored, re-published with one synchronous CAS publish each, grouped by
// the phase that wrote them, on a raw stream of the same server.

// Phases of a turn, in order; resume follows the turn (a backend that
// restarted asks for its loaded set back) and is not part of the whole
// turn's sum.
const (
	tcBegin = iota
	tcDiscover
	tcDispatch
	tcEnd
	tcTurn // the whole turn: the sum of the phases
	tcResume
	tcPhases
)

var tcPhaseNames = [tcPhases]string{"turn/begin", "turn/discover", "turn/dispatch", "turn/end", "whole turn", "resume"}

// Line name patterns of the turn cycle: transport and sessions, the
// phase, the quantile.
const (
	nameTurnCycle       = "turn cycle, %s: %s %s"
	nameTurnCycleWrites = "turn cycle, %s: log writes per turn"
	nameTurnCycleBytes  = "turn cycle, %s: log bytes written per turn"
)

// tcLargeRegistry is the tool count of the turn cycle's large registry:
// the default registry and the MCP corpus repeated (mcpRegistry).
const tcLargeRegistry = 10_000

// tcDiscoverEvery is how often a turn runs a tool_search (every 4th turn).
const tcDiscoverEvery = 4

// tcTargetMicros is the p99 target of turn/begin and turn/end.
const tcTargetMicros = 2000

// tcSetting is one measured setting: a transport, a session count and
// the registry (0: the default; else at least that many MCP tools).
type tcSetting struct {
	label    string // "in-process, one session"
	http     bool
	sessions int
	tools    int
}

func (h *harness) tcSettings() []tcSetting {
	return []tcSetting{
		{label: "in-process, one session"},
		{label: "HTTP, one session", http: true},
		{label: fmt.Sprintf("in-process, %d sessions concurrently", h.cfg.TurnCycleSessions), sessions: h.cfg.TurnCycleSessions},
		{label: fmt.Sprintf("in-process, one session, %s MCP tools", sessionsLabel(tcLargeRegistry)), tools: tcLargeRegistry},
	}
}

// turnCycleLineNames names the turn cycle's lines of cfg, in order.
func turnCycleLineNames(cfg Config) []string {
	h := &harness{cfg: cfg}
	var out []string
	for _, s := range h.tcSettings() {
		for p := 0; p < tcPhases; p++ {
			out = append(out, fmt.Sprintf(nameTurnCycle, s.label, tcPhaseNames[p], "p50"), fmt.Sprintf(nameTurnCycle, s.label, tcPhaseNames[p], "p99"))
		}
		out = append(out, fmt.Sprintf(nameTurnCycleWrites, s.label), fmt.Sprintf(nameTurnCycleBytes, s.label))
	}
	return out
}

// turnEngine is the engine of the turn cycle: the harness's log and
// projection, with the metrics hooks `engine serve` installs and a count
// of appends and events, served over HTTP on a loopback port.
type turnEngine struct {
	eng     *service.Engine
	appends atomic.Int64
	events  atomic.Int64
	srv     *http.Server
	url     string
}

func (h *harness) openTurnEngine() (*turnEngine, error) {
	if h.turns != nil {
		return h.turns, nil
	}
	te, err := h.newTurnEngine(resolver.Default())
	h.turns = te
	return te, err
}

// openLargeTurnEngine is openTurnEngine on a registry of at least
// tcLargeRegistry MCP tools.
func (h *harness) openLargeTurnEngine() (*turnEngine, error) {
	if h.turnsLarge != nil {
		return h.turnsLarge, nil
	}
	reg, err := mcpRegistry(tcLargeRegistry)
	if err != nil {
		return nil, fmt.Errorf("turn cycle: registry of %d tools: %w", tcLargeRegistry, err)
	}
	te, err := h.newTurnEngine(reg)
	h.turnsLarge = te
	return te, err
}

// newTurnEngine is a turn engine serving reg.
func (h *harness) newTurnEngine(reg *resolver.Registry) (*turnEngine, error) {
	te := &turnEngine{}
	hooks := metrics.New().Hooks()
	counted := hooks.Appended
	hooks.Appended = func(n int, dup bool) {
		if counted != nil {
			counted(n, dup)
		}
		te.appends.Add(1)
		te.events.Add(int64(n))
	}
	te.eng = service.New(h.elog, h.proj, reg, service.Config{Hooks: hooks})
	a, err := api.New(te.eng, api.Config{})
	if err != nil {
		return nil, fmt.Errorf("turn cycle: api: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", a.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("turn cycle: listen: %w", err)
	}
	te.srv = &http.Server{Handler: a.Protect(mux), ReadHeaderTimeout: 10 * time.Second}
	te.url = "http://" + ln.Addr().String()
	go func() { _ = te.srv.Serve(ln) }()
	return te, nil
}

func (te *turnEngine) close() {
	if te != nil && te.srv != nil {
		_ = te.srv.Close()
	}
}

// tcResult is one run of one setting: each phase's durations.
type tcResult struct {
	durs    [tcPhases][]time.Duration
	turns   int
	loads   int // discoveries that loaded a tool
	search  int // discoveries
	appends int64
	events  int64
}

// cycle runs turns turns on each of sessions (one goroutine per session)
// through d, and times each phase.
func (te *turnEngine) cycle(ctx context.Context, d turnDriver, sessions []string, turns int) (tcResult, error) {
	var res tcResult
	var mu sync.Mutex
	a0, e0 := te.appends.Load(), te.events.Load()
	run := func(s string) error {
		var local [tcPhases][]time.Duration
		loads, searches := 0, 0
		for t := 1; t <= turns; t++ {
			turnStart := time.Now()
			start := turnStart
			catalog, loaded, err := d.begin(ctx, s)
			if err != nil {
				return fmt.Errorf("%s turn %d: begin: %w", s, t, err)
			}
			local[tcBegin] = append(local[tcBegin], time.Since(start))
			if t%tcDiscoverEvery == 0 && len(catalog) > 0 {
				// Load the first deferred tool not loaded yet; once every
				// one is, search the first again (the model re-searching
				// a tool of an earlier turn: nothing to write).
				name := catalog[0]
				for _, c := range catalog {
					if !slices.Contains(loaded, c) {
						name = c
						loads++
						break
					}
				}
				searches++
				start = time.Now()
				if err := d.discover(ctx, s, name); err != nil {
					return fmt.Errorf("%s turn %d: discover %s: %w", s, t, name, err)
				}
				local[tcDiscover] = append(local[tcDiscover], time.Since(start))
			}
			start = time.Now()
			if err := d.dispatch(ctx, s); err != nil {
				return fmt.Errorf("%s turn %d: dispatch: %w", s, t, err)
			}
			local[tcDispatch] = append(local[tcDispatch], time.Since(start))
			start = time.Now()
			if err := d.end(ctx, s); err != nil {
				return fmt.Errorf("%s turn %d: end: %w", s, t, err)
			}
			now := time.Now()
			local[tcEnd] = append(local[tcEnd], now.Sub(start))
			local[tcTurn] = append(local[tcTurn], now.Sub(turnStart))
			start = time.Now()
			if err := d.resume(ctx, s); err != nil {
				return fmt.Errorf("%s turn %d: resume: %w", s, t, err)
			}
			local[tcResume] = append(local[tcResume], time.Since(start))
		}
		mu.Lock()
		defer mu.Unlock()
		for p := range local {
			res.durs[p] = append(res.durs[p], local[p]...)
		}
		res.loads += loads
		res.search += searches
		res.turns += turns
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = run(s) }()
	}
	wg.Wait()
	res.appends, res.events = te.appends.Load()-a0, te.events.Load()-e0
	return res, errors.Join(errs...)
}

// tcPhaseOf is the phase that writes an event of type t (-1: none of a
// turn's, such as the set-up's ToolsToggled).
func tcPhaseOf(t events.Type) int {
	switch t {
	case events.TypeTurnStarted, events.TypeDeferredEvicted:
		return tcBegin
	case events.TypeDeferredLoaded:
		return tcDiscover
	case events.TypeTurnEnded, events.TypeCheckpointRecorded:
		return tcEnd
	}
	return -1
}

// tcGroup is the events one phase of one turn appended.
type tcGroup struct {
	phase int
	recs  []logport.Record
}

// tcGroups reads a session's events and groups them by the phase of the
// turn that wrote them.
func (h *harness) tcGroups(ctx context.Context, session string) ([]tcGroup, error) {
	var out []tcGroup
	err := h.elog.ScanSession(ctx, session, 1, 0, func(r logport.Record) error {
		if r.Err != nil {
			return fmt.Errorf("turn cycle: event %d of %s: %w", r.Seq, session, r.Err)
		}
		p := tcPhaseOf(r.Envelope.Type)
		if p < 0 {
			return nil
		}
		newTurn := r.Envelope.Type == events.TypeTurnStarted && len(out) > 0 && out[len(out)-1].phase == tcBegin &&
			slices.ContainsFunc(out[len(out)-1].recs, func(x logport.Record) bool { return x.Envelope.Type == events.TypeTurnStarted })
		if len(out) == 0 || out[len(out)-1].phase != p || newTurn {
			out = append(out, tcGroup{phase: p})
		}
		out[len(out)-1].recs = append(out[len(out)-1].recs, r)
		return nil
	})
	return out, err
}

// rawTurns re-publishes the groups' event bytes to a raw session, each
// event one synchronous CAS publish (Nats-Msg-Id and type headers as the
// engine sets them), and times each phase of each turn as the engine's
// are timed: the whole turn is the sum of its phases' appends.
func (h *harness) rawTurns(ctx context.Context, rawSession string, groups []tcGroup) ([tcPhases][]time.Duration, error) {
	var out [tcPhases][]time.Duration
	subj := prefixRaw + ".events." + rawSession
	var last uint64
	var turn time.Duration
	for i, g := range groups {
		start := time.Now()
		for _, r := range g.recs {
			m := nats.NewMsg(subj)
			m.Data = r.Data
			m.Header.Set(njs.MsgIDHeader, r.Envelope.ID)
			m.Header.Set(jetstream.HeaderEventType, string(r.Envelope.Type))
			m.Header.Set(njs.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
			ack, err := h.rjs.PublishMsg(ctx, m)
			if err != nil {
				return out, fmt.Errorf("turn cycle: raw publish to %s at %d: %w", subj, last, err)
			}
			last = ack.Sequence
		}
		d := time.Since(start)
		out[g.phase] = append(out[g.phase], d)
		turn += d
		if g.phase == tcEnd || i == len(groups)-1 {
			out[tcTurn] = append(out[tcTurn], turn)
			turn = 0
		}
	}
	return out, nil
}

// quantileMicros is the q-quantile of ds in µs (ds is sorted in place).
func quantileMicros(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(quantileMs(ds, q)) * 1e3
}

// turnCycle measures every setting Runs times; each run uses fresh
// sessions, enabled once (ToolsToggled) before the first turn.
func (h *harness) turnCycle(ctx context.Context) error {
	te, err := h.openTurnEngine()
	if err != nil {
		return err
	}
	for si, set := range h.tcSettings() {
		s, err := h.newTCSettingRun(te, si, set)
		if err != nil {
			return err
		}
		for r := 0; r < h.cfg.Runs; r++ {
			if err := s.run(ctx, r); err != nil {
				return err
			}
		}
		s.addLines()
	}
	if h.cfg.ProfileDir != "" {
		return h.profileTurnCycle(ctx, te)
	}
	return nil
}

// tcSettingRun is the measurement of one setting: its engine and
// driver, the sessions and turns of each run, and the figures of the
// runs so far.
type tcSettingRun struct {
	h   *harness
	set tcSetting
	si  int // the setting's index, in its session names
	te  *turnEngine
	d   turnDriver
	n   int // sessions per run
	per int // turns per session

	// eng[p][q][run], raw likewise; q 0 = p50, 1 = p99.
	eng, raw                         [tcPhases][2][]float64
	writes, appends, loads, bytesPer []float64
	searches                         int
}

// newTCSettingRun picks set's engine (base, or the large registry's) and
// driver, and its sessions and turns per run.
func (h *harness) newTCSettingRun(base *turnEngine, si int, set tcSetting) (*tcSettingRun, error) {
	s := &tcSettingRun{h: h, set: set, si: si, te: base}
	if set.tools > 0 {
		var err error
		if s.te, err = h.openLargeTurnEngine(); err != nil {
			return nil, err
		}
	}
	s.d = engineDriver{s.te.eng}
	if set.http {
		s.d = httpDriver{client.NewHTTP(s.te.url, client.WithActor(origin.Actor), client.WithTimeout(time.Minute))}
	}
	s.n = max(set.sessions, 1)
	s.per = h.cfg.TurnCycleTurns
	if s.n > 1 {
		s.per = max(tcDiscoverEvery, h.cfg.TurnCycleTurns/s.n)
	}
	return s, nil
}

// run runs the turns of run r on fresh sessions, re-publishes their
// events raw, and records the run's figures.
func (s *tcSettingRun) run(ctx context.Context, r int) error {
	if err := s.h.waitProjection(ctx); err != nil {
		return err
	}
	sessions := make([]string, s.n)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("tc%d-e%03d-%03d", s.si, r, i)
		if _, err := s.te.eng.Apply(ctx, sessions[i], origin, nil, events.ToolsToggled{Enabled: bptr(true)}); err != nil {
			return err
		}
	}
	res, err := s.te.cycle(ctx, s.d, sessions, s.per)
	if err != nil {
		return err
	}
	rawDurs, stored, err := s.rawRun(ctx, r, sessions)
	if err != nil {
		return err
	}
	for p := 0; p < tcPhases; p++ {
		for q, qv := range []float64{0.5, 0.99} {
			s.eng[p][q] = append(s.eng[p][q], quantileMicros(res.durs[p], qv))
			s.raw[p][q] = append(s.raw[p][q], quantileMicros(rawDurs[p], qv))
		}
	}
	s.writes = append(s.writes, float64(res.events)/float64(res.turns))
	s.bytesPer = append(s.bytesPer, float64(stored)/float64(res.turns))
	s.appends = append(s.appends, float64(res.appends)/float64(res.turns))
	s.loads = append(s.loads, float64(res.loads))
	s.searches = res.search
	return nil
}

// rawRun re-publishes the events the sessions of run r stored to raw
// sessions of their own and returns each phase's durations and the bytes
// the sessions stored.
func (s *tcSettingRun) rawRun(ctx context.Context, r int, sessions []string) ([tcPhases][]time.Duration, int, error) {
	var rawDurs [tcPhases][]time.Duration
	stored := 0
	for i, session := range sessions {
		groups, err := s.h.tcGroups(ctx, session)
		if err != nil {
			return rawDurs, 0, err
		}
		for _, g := range groups {
			for _, rec := range g.recs {
				stored += len(rec.Data)
			}
		}
		rd, err := s.h.rawTurns(ctx, fmt.Sprintf("tc%d-r%03d-%03d", s.si, r, i), groups)
		if err != nil {
			return rawDurs, 0, err
		}
		for p := range rd {
			rawDurs[p] = append(rawDurs[p], rd[p]...)
		}
	}
	return rawDurs, stored, nil
}

// addLines adds the setting's lines: each phase's p50 and p99, the log
// writes and the bytes per turn.
func (s *tcSettingRun) addLines() {
	h, set, te := s.h, s.set, s.te
	for p := 0; p < tcPhases; p++ {
		for q, qn := range []string{"p50", "p99"} {
			l := Line{Name: fmt.Sprintf(nameTurnCycle, set.label, tcPhaseNames[p], qn), Unit: "µs/op", Runs: h.cfg.Runs,
				EngineRuns: s.eng[p][q], RawRuns: s.raw[p][q], Engine: median(s.eng[p][q]), Raw: median(s.raw[p][q])}
			if l.Raw > 0 && l.Engine > 0 {
				l.Ratio = l.Raw / l.Engine
			} else {
				l.Raw, l.RawRuns = 0, nil // dispatch writes nothing: no raw baseline
			}
			if q == 1 && (p == tcBegin || p == tcEnd) {
				maxTarget(&l, tcTargetMicros, "< 2 ms")
			}
			l.Note = tcNote(p, s.n, s.per, s.searches, median(s.loads))
			if set.tools > 0 {
				l.Note += fmt.Sprintf("; registry %s: %d tools (the default registry and the MCP corpus repeated), each begin renders them all natively", te.eng.Registry().Version(), len(te.eng.Registry().Tools()))
			}
			h.add(l)
		}
	}
	w := Line{Name: fmt.Sprintf(nameTurnCycleWrites, set.label), Unit: "events/turn", Runs: h.cfg.Runs, EngineRuns: s.writes, Engine: median(s.writes)}
	w.Note = fmt.Sprintf("events the engine stored per turn, in %.2f appends (publish round trips) per turn; the raw baseline above publishes the same %.2f events one CAS publish each; the issue asks at most 2 log writes per turn", median(s.appends), median(s.writes))
	h.add(w)
	b := Line{Name: fmt.Sprintf(nameTurnCycleBytes, set.label), Unit: "B/turn", Runs: h.cfg.Runs, EngineRuns: s.bytesPer, Engine: median(s.bytesPer),
		Note: "bytes of the events a turn stored (TurnStarted, DeferredLoaded, the TurnEnded carrying the checkpoint, and a resume's when it wrote one); a checkpoint grows with the loaded tools, not with the registry"}
	h.add(b)
}

// profileTurnCycle runs one extra in-process run on one session under
// the CPU profiler, then one under the block and mutex profilers.
func (h *harness) profileTurnCycle(ctx context.Context, te *turnEngine) error {
	for i, prof := range []func(string, func() error) error{
		func(name string, fn func() error) error { return h.profile(ctx, name, "engine", fn) },
		h.blockProfile,
	} {
		s := fmt.Sprintf("tc-prof-%d", i)
		if _, err := te.eng.Apply(ctx, s, origin, nil, events.ToolsToggled{Enabled: bptr(true)}); err != nil {
			return err
		}
		if err := prof("turn cycle in-process", func() error {
			_, err := te.cycle(ctx, engineDriver{te.eng}, []string{s}, h.cfg.TurnCycleTurns)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func tcNote(phase, sessions, turns, searches int, loads float64) string {
	who := fmt.Sprintf("%d turns on one session", turns)
	if sessions > 1 {
		who = fmt.Sprintf("%d turns on each of %d sessions at once", turns, sessions)
	}
	switch phase {
	case tcBegin:
		return who + "; engine = BeginTurn (resolve, freeze, TurnStarted); raw = one sync CAS publish of the same TurnStarted bytes (and DeferredEvicted when the bound evicted)"
	case tcDiscover:
		return fmt.Sprintf("%s; engine = Discover by name, every %dth turn (%d searches per run, %.0f loaded a tool: the default registry defers 4 tools, later searches find them loaded and write nothing); raw = a sync CAS publish of the same DeferredLoaded bytes, for the searches that wrote one", who, tcDiscoverEvery, searches, loads)
	case tcDispatch:
		return who + "; engine = Dispatch (the frozen turn's provider request); it writes nothing, so there is no raw baseline"
	case tcEnd:
		return who + "; engine = EndTurn (one TurnEnded carrying the checkpoint); raw = one sync CAS publish of the same event's bytes"
	case tcResume:
		return who + "; engine = Resume after each turn (verifies the checkpoint's contract and restores its loaded tools; it writes nothing when they are the session's), not part of the whole turn; no raw baseline"
	}
	return who + "; the sum of the turn's phases; raw = the sum of its raw publishes"
}

// maxTarget sets an "every run below limit" target on a latency line:
// met only when the slowest run is below it (a spread that crosses the
// target is not met).
func maxTarget(l *Line, limit float64, label string) {
	l.Target = label
	worst := slices.Max(append([]float64{l.Engine}, l.EngineRuns...))
	l.Met = bptr(worst < limit)
	l.Crossed = l.Engine < limit && worst >= limit
}
