package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/jetstream"
)

// Line names of the scale-restart step.
const (
	nameScaleClean   = "restart after a clean stop, %s sessions: engine serve ready"
	nameScaleKill    = "restart after kill -9, %s sessions: engine serve ready"
	nameScaleRebuild = "engine rebuild, %s sessions"
	nameScaleAfter   = "restart after engine rebuild, %s sessions: engine serve ready"
)

// scaleRestartLineNames names the lines of the scale-restart step.
func scaleRestartLineNames(cfg Config) []string {
	label := sessionsLabel(cfg.ScaleSessions)
	return []string{
		fmt.Sprintf(nameScaleClean, label),
		fmt.Sprintf(nameScaleKill, label),
		fmt.Sprintf(nameScaleRebuild, label),
		fmt.Sprintf(nameScaleAfter, label),
	}
}

// enginePrefix is the stream prefix of `engine serve` by default.
const enginePrefix = "tools"

// scaleRestart measures restart and rebuild of an engine holding
// ScaleSessions sessions, the engine running as its own process
// (Config.EngineBin serve) on its embedded server, as an operator runs it:
//
//   - its sessions' events (one each, with the headers the engine puts
//     on a session's first event) are published to the running engine,
//     which folds them into its views as they come;
//   - restart after a clean stop (SIGTERM): time from exec to /readyz
//     200, beside the embedded server alone started on the same data
//     directory until the event stream answers (the floor: the server
//     loading the stores);
//   - restart after kill -9 (SIGKILL of the whole process, server
//     included), beside the server alone started on a copy of the killed
//     process's data directory;
//   - engine rebuild (exec to exit) and the restart after it.
//
// Each restart reads the events its projection folded before it reported
// nothing pending (engine_projection_folded_total): the views hold every
// event, so a restart that refolds any misses the target. After each
// restart one session is read over HTTP to check its view.
func (h *harness) scaleRestart(ctx context.Context) error {
	bin := h.cfg.EngineBin
	if bin == "" {
		return errors.New("scale-restart runs the engine as a child process: set Config.EngineBin (engine bench sets it to its own executable)")
	}
	n := h.cfg.ScaleSessions
	names := scaleRestartLineNames(h.cfg)
	root := filepath.Join(h.dir, "scale")
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(root, 0o750); err != nil {
		return err
	}
	logs := 0
	logPath := func() string { logs++; return filepath.Join(root, fmt.Sprintf("engine-%02d.log", logs)) }

	// Fill: the sessions' events, folded live by the running engine.
	start := time.Now()
	c, err := startChild(ctx, bin, data, logPath())
	if err != nil {
		return err
	}
	firstReady := time.Since(start)
	if err := h.scaleFill(ctx, c, n); err != nil {
		c.kill()
		return err
	}
	fill := time.Since(start) - firstReady
	h.progress("scale-restart: %d sessions published to engine serve (ready in %.1f s) and folded in %.1f s (%.0f events/s)", n, firstReady.Seconds(), fill.Seconds(), float64(n)/fill.Seconds())
	stopStart := time.Now()
	if err := c.stop(); err != nil {
		return err
	}
	stopDur := time.Since(stopStart)
	cr, err := jetstream.ReadCredentials(data)
	if err != nil {
		return err
	}
	probe := sessionNames("r-", n)[n-1]

	// Restart after a clean stop, beside the server alone.
	var cleanFolded []float64
	var rss uint64
	engine := func(ctx context.Context, _ int) (float64, error) {
		d, folded, r, err := h.scaleRestartOnce(ctx, bin, data, logPath(), probe)
		cleanFolded, rss = append(cleanFolded, folded), r
		return d, err
	}
	var sizes storeSizes
	raw := func(ctx context.Context, _ int) (float64, error) {
		d, sz, err := serverReady(ctx, data, &cr, uint64(n))
		sizes = sz
		return d, err
	}
	l, err := h.scalePair(ctx, names[0], false, engine, raw)
	if err != nil {
		return err
	}
	refoldTarget(&l, cleanFolded, n)
	l.Note = fmt.Sprintf("engine = exec of engine serve on the data directory of %d sessions (one event each, folded live as they were published; every view written), SIGTERM'd at rest (it stopped in %.1f s), until /readyz answers 200 (the projection caught up), then SIGTERM; events folded at each restart %v; raw = the embedded server alone on the same directory (StartEmbedded, then the event stream's info), shut down; stored: event stream %.0f B per session, views bucket %.0f B per session; engine serve's RSS once ready and its session read: %.0f MB", n, stopDur.Seconds(), cleanFolded, float64(sizes.events)/float64(n), float64(sizes.views)/float64(n), float64(rss)/1e6)
	h.add(l)

	// Restart after kill -9: the process is killed once it is ready and
	// idle; the raw side starts the server on a copy of what it left.
	var killFolded []float64
	killed := filepath.Join(root, "killed")
	prepare := func(ctx context.Context) error {
		c, err := startChild(ctx, bin, data, logPath())
		if err != nil {
			return err
		}
		c.kill()
		_ = os.RemoveAll(killed)
		return os.CopyFS(killed, os.DirFS(data))
	}
	engine = func(ctx context.Context, _ int) (float64, error) {
		if err := prepare(ctx); err != nil {
			return 0, err
		}
		d, folded, _, err := h.scaleRestartOnce(ctx, bin, data, logPath(), probe)
		killFolded = append(killFolded, folded)
		return d, err
	}
	raw = func(ctx context.Context, _ int) (float64, error) {
		d, _, err := serverReady(ctx, killed, &cr, uint64(n))
		_ = os.RemoveAll(killed)
		return d, err
	}
	// The raw side of a run needs the copy the engine side made: engine
	// first in every run.
	if l, err = h.scalePair(ctx, names[1], true, engine, raw); err != nil {
		return err
	}
	refoldTarget(&l, killFolded, n)
	l.Note = fmt.Sprintf("engine = engine serve started on the same directory, ready, then SIGKILLed (the embedded server with it: no index written, nothing flushed), then started again until /readyz answers 200; events folded at each restart %v; raw = the embedded server alone started on a copy of the killed process's directory, until the event stream answers (the server's own recovery)", killFolded)
	h.add(l)

	// engine rebuild, then a restart.
	rl, err := rebuildLine(ctx, bin, data, names[2], n)
	if err != nil {
		return err
	}
	h.add(rl)
	var afterFolded []float64
	d, f, _, err := h.scaleRestartOnce(ctx, bin, data, logPath(), probe)
	if err != nil {
		return err
	}
	afterFolded = append(afterFolded, f)
	al := Line{Name: names[3], Unit: "s", Engine: d, Runs: 1, EngineRuns: []float64{d}}
	refoldTarget(&al, afterFolded, n)
	al.Note = fmt.Sprintf("engine serve on the rebuilt directory until /readyz answers 200; events folded %v (the rebuild moved the projection's feed past what it folded); one run", afterFolded)
	h.add(al)
	return os.RemoveAll(root)
}

// scaleRuns is how many runs the restart lines take: Runs, at most 3 (a
// run of the kill -9 line starts the engine twice and copies the store).
func (h *harness) scaleRuns() int { return min(h.cfg.Runs, 3) }

// scalePair is pair with scaleRuns runs, in seconds, never profiled;
// engineFirst as alternate's.
func (h *harness) scalePair(ctx context.Context, name string, engineFirst bool, engine, raw sample) (Line, error) {
	l := Line{Name: name, Unit: "s", Runs: h.scaleRuns()}
	var err error
	if l.EngineRuns, l.RawRuns, err = alternate(ctx, l.Runs, engineFirst, engine, raw); err != nil {
		return l, err
	}
	l.setMedians()
	return l, nil
}

// refoldTarget sets the target every restart line holds: no event the
// views hold is folded again.
func refoldTarget(l *Line, folded []float64, n int) {
	l.Target = fmt.Sprintf("refolds none of the %d events the views hold", n)
	met := true
	for _, f := range folded {
		met = met && f == 0
	}
	l.Met = bptr(met)
}

// scaleRestartOnce starts engine serve on data, waits until it is ready
// and its projection has nothing pending, reads probe's view over HTTP,
// and stops it with SIGTERM. It returns the time to ready (s), the
// events its projection folded and its RSS before the stop.
func (h *harness) scaleRestartOnce(ctx context.Context, bin, data, logPath, probe string) (float64, float64, uint64, error) {
	c, err := startChild(ctx, bin, data, logPath)
	if err != nil {
		return 0, 0, 0, err
	}
	folded, err := c.waitFolded(ctx, 0, 10*time.Minute)
	if err == nil {
		err = checkProbe(ctx, c, probe)
	}
	if err != nil {
		c.kill()
		return 0, 0, 0, err
	}
	rss := c.rss()
	if err := c.stop(); err != nil {
		return 0, 0, 0, err
	}
	return c.readyDur.Seconds(), folded, rss, nil
}

// checkProbe reads session's view over the child's HTTP API: it must
// hold the session's one event.
func checkProbe(ctx context.Context, c *engineChild, session string) error {
	s, err := client.NewHTTP(c.httpURL, client.WithActor(origin.Actor), client.WithTimeout(30*time.Second)).Intent(ctx, client.IntentRequest{Session: session})
	if err != nil {
		return fmt.Errorf("read session %s after the restart: %w", session, err)
	}
	if s.Seq == 0 || s.Events != 1 {
		return fmt.Errorf("session %s after the restart: seq %d, %d events, want its one event", session, s.Seq, s.Events)
	}
	return nil
}

// scaleFill publishes one event to each of n sessions through the
// child's embedded server (its engine user) and waits until its
// projection has folded them all.
func (h *harness) scaleFill(ctx context.Context, c *engineChild, n int) error {
	cr, err := jetstream.ReadCredentials(c.dataDir)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(c.natsURL, nats.UserInfo(cr.Engine.User, cr.Engine.Password), nats.Name("bench-scale"))
	if err != nil {
		return fmt.Errorf("connect to engine serve's server: %w", err)
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		return err
	}
	if err := generateFirst(ctx, js, enginePrefix, sessionNames("r-", n)); err != nil {
		return err
	}
	_, err = c.waitFolded(ctx, float64(n), 20*time.Minute)
	return err
}

// generateFirst publishes one event to each session with the headers the
// engine puts on a session's first event: the event id as Nats-Msg-Id and
// the expected last subject sequence 0 (a projection then knows the
// session had no view before it).
func generateFirst(ctx context.Context, js njs.JetStream, prefix string, sessions []string) error {
	return publishPipelined(ctx, js, len(sessions), 2048, func(i int) (*nats.Msg, error) {
		m, err := genMsg(prefix, sessions[i], 0)
		if err != nil {
			return nil, err
		}
		m.Header.Set(njs.ExpectedLastSubjSeqHeader, "0")
		return m, nil
	})
}

// storeSizes are the bytes the event stream and the views bucket store.
type storeSizes struct{ events, views uint64 }

// serverReady starts the embedded server alone on dir, waits until its
// event stream answers with n messages, shuts it down, and returns the
// time from the start to the answer (s), and the stores' sizes.
func serverReady(ctx context.Context, dir string, cr *jetstream.Credentials, n uint64) (float64, storeSizes, error) {
	var sz storeSizes
	start := time.Now()
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir, Host: "127.0.0.1", Credentials: cr, Command: "engine bench"})
	if err != nil {
		return 0, sz, err
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(cr.Engine.User, cr.Engine.Password), nats.Name("bench-scale-raw"))
	if err != nil {
		return 0, sz, err
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		return 0, sz, err
	}
	s, err := js.Stream(ctx, jetstream.EventStreamName(enginePrefix))
	if err != nil {
		return 0, sz, fmt.Errorf("event stream on the restarted server: %w", err)
	}
	d := time.Since(start).Seconds()
	st := s.CachedInfo().State
	if st.Msgs != n {
		return 0, sz, fmt.Errorf("event stream on the restarted server holds %d messages, want %d", st.Msgs, n)
	}
	sz.events = st.Bytes
	if v, err := js.Stream(ctx, "KV_"+strings.ToUpper(enginePrefix)+"_VIEWS"); err == nil {
		sz.views = v.CachedInfo().State.Bytes
	}
	return d, sz, nil
}

// rebuildLine runs engine rebuild on data (the engine stopped) and
// returns its line: the time from exec to exit, and, from its log, the
// part until the projection released its lease (the fold: server start,
// feed deleted, every view folded again from the first event) and the
// rest (the views checked against the log, server stop).
func rebuildLine(ctx context.Context, bin, data, name string, n int) (Line, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "rebuild", "--data", data, "--log-level", "info")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return Line{}, fmt.Errorf("engine rebuild: %w: %s%s", err, stdout.String(), stderr.String())
	}
	total := time.Since(start).Seconds()
	folded := rebuiltEvents(stdout.String())
	fold := -1.0
	if at, ok := logTime(stderr.String(), "projection runner: lease released"); ok {
		fold = at.Sub(start).Seconds()
	}
	return Line{Name: name, Unit: "s", Engine: total, Runs: 1, EngineRuns: []float64{total},
		Target: fmt.Sprintf("folds the %d events once", n), Met: bptr(folded == n),
		Note: fmt.Sprintf("exec of engine rebuild --data on the stopped engine's directory to its exit: %d events folded; %.1f s to the end of the fold (server start, feed deleted, every view folded again from the first event: %.0f events/s), %.1f s after it (every view checked against the log's last sequence of its session, then the server stopped); one run", folded, fold, float64(folded)/fold, total-fold)}, nil
}

// rebuiltEvents reads the events engine rebuild reports folded.
func rebuiltEvents(out string) int {
	m := regexp.MustCompile(`rebuilt views from (\d+) events`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// logTime is the time of the first JSON log line whose message is msg.
func logTime(log, msg string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Time    time.Time `json:"time"`
			Message string    `json:"message"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == msg {
			return rec.Time, true
		}
	}
	return time.Time{}, false
}
