package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// engineChild is one `engine serve` process of the scale-restart step, on
// an embedded server over its own data directory, as an operator runs it.
type engineChild struct {
	cmd      *exec.Cmd
	natsURL  string
	httpURL  string
	stderr   *os.File
	exited   chan struct{}
	exitErr  error
	dataDir  string
	hc       *http.Client
	readyDur time.Duration // from exec to /readyz answering 200
}

// childReadyWithin bounds how long a child may take to become ready: a
// fresh start on a million sessions folds them first.
const childReadyWithin = 20 * time.Minute

// startChild runs `bin serve` on dataDir (random loopback ports) and
// waits until /readyz answers 200. Its stderr goes to stderrPath.
func startChild(ctx context.Context, bin, dataDir, stderrPath string) (*engineChild, error) {
	ready := dataDir + ".ready.json"
	_ = os.Remove(ready)
	errf, err := os.Create(stderrPath)
	if err != nil {
		return nil, fmt.Errorf("engine stderr file: %w", err)
	}
	cmd := exec.Command(bin, "serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--ready-file", ready, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = errf, errf
	c := &engineChild{cmd: cmd, stderr: errf, exited: make(chan struct{}), dataDir: dataDir, hc: &http.Client{Timeout: 10 * time.Second}}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		errf.Close()
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	go func() { c.exitErr = cmd.Wait(); close(c.exited) }()
	wctx, cancel := context.WithTimeout(ctx, childReadyWithin)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.exited:
			errf.Close()
			return nil, fmt.Errorf("engine serve exited before ready (%v): %s", c.exitErr, tail(stderrPath))
		case <-wctx.Done():
			c.kill()
			return nil, fmt.Errorf("engine serve not ready within %s: %s", childReadyWithin, tail(stderrPath))
		case <-tick.C:
		}
		if c.httpURL == "" {
			var info struct {
				NATSURL  string `json:"nats_url"`
				HTTPAddr string `json:"http_addr"`
			}
			data, err := os.ReadFile(ready)
			if err != nil || json.Unmarshal(data, &info) != nil || info.HTTPAddr == "" {
				continue
			}
			c.natsURL, c.httpURL = info.NATSURL, "http://"+info.HTTPAddr
		}
		resp, err := c.hc.Get(c.httpURL + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			c.readyDur = time.Since(start)
			return c, nil
		}
	}
}

// metric reads one sample of the child's /metrics (a counter or gauge
// without labels).
func (c *engineChild) metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.httpURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("engine metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("engine metrics: %w", err)
	}
	return 0, fmt.Errorf("engine metrics: no sample %s", name)
}

// Metric names the step reads.
const (
	metricFolded = "engine_projection_folded_total"
	metricLag    = "engine_projection_lag_events"
)

// waitFolded waits until the child's projection has folded at least min
// events and has nothing pending, and returns the events it folded since
// it started.
func (c *engineChild) waitFolded(ctx context.Context, min float64, within time.Duration) (float64, error) {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		folded, ferr := c.metric(wctx, metricFolded)
		lag, lerr := c.metric(wctx, metricLag)
		if ferr == nil && lerr == nil && folded >= min && lag == 0 {
			return folded, nil
		}
		select {
		case <-c.exited:
			return 0, fmt.Errorf("engine serve exited (%v): %s", c.exitErr, tail(c.stderr.Name()))
		case <-wctx.Done():
			return 0, fmt.Errorf("engine projection has not folded %.0f events with nothing pending within %s (folded %.0f, %v; lag %.0f, %v)", min, within, folded, ferr, lag, lerr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the child with SIGTERM (a clean stop: the projection writes
// and acknowledges what it folded, the server writes its indexes) and
// waits for it to exit.
func (c *engineChild) stop() error {
	defer c.stderr.Close()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-c.exited:
	case <-time.After(2 * time.Minute):
		c.kill()
		return fmt.Errorf("engine serve did not stop within 2 minutes of SIGTERM: %s", tail(c.stderr.Name()))
	}
	if c.exitErr != nil {
		return fmt.Errorf("engine serve after SIGTERM: %v: %s", c.exitErr, tail(c.stderr.Name()))
	}
	return nil
}

// kill ends the child with SIGKILL (a crash: nothing is flushed, the
// server's indexes are not written) and waits for it to exit.
func (c *engineChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
	c.stderr.Close()
}

// rss is the child's resident set size in bytes (Linux /proc; 0
// elsewhere).
func (c *engineChild) rss() uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// tail is the end of a log file, for an error message.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	if s == "" {
		return "(empty log)"
	}
	return s
}
