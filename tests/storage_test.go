package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolintent/engine/api"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// runEngine runs an engine subcommand to its end with a deadline and
// returns its combined output, how long it ran and its error.
func runEngine(t *testing.T, args ...string) (string, time.Duration, error) {
	t.Helper()
	return runEngineWithin(t, 60*time.Second, args...)
}

// runEngineWithin is runEngine with its own deadline (a command expected
// to exit at once: a serve that keeps serving is killed after d).
func runEngineWithin(t *testing.T, d time.Duration, args ...string) (string, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, engineBin, args...).CombinedOutput()
	return string(out), time.Since(start), err
}

// A second process on a live data directory (serve, rebuild,
// stream repair) is refused with the holder's pid, and the first keeps
// serving; rebuild on a directory without a store and registry push
// without --nats refuse instead of creating an empty store.
func TestDataDirOneOwner(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.Client("owner")
	ctx := context.Background()
	if _, err := c.Append(ctx, "owner-s1", nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatalf("append: %v", err)
	}
	pid := strconv.Itoa(p.cmd.Process.Pid)
	for _, args := range [][]string{
		{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"},
		{"rebuild", "--data", dir},
		{"stream", "repair", "--data", dir},
	} {
		out, took, err := runEngine(t, args...)
		if err == nil {
			t.Fatalf("%v on a live data dir succeeded:\n%s", args, out)
		}
		want := "data dir " + dir + " is in use by pid " + pid + " (engine serve"
		if !strings.Contains(out, want) || !strings.Contains(out, "stop it or pass --data") {
			t.Fatalf("%v refused without naming the holder: want %q in\n%s", args, want, out)
		}
		t.Logf("%s on a live data dir: refused in %v", args[0], took.Round(time.Millisecond))
	}
	// The first engine still serves and its log is whole.
	if _, err := c.Append(ctx, "owner-s1", nil, events.ToolEnabled{Name: "bash"}); err != nil {
		t.Fatalf("append after the refused second owner: %v", err)
	}
	p.Stop(t)

	// Once stopped, the directory is free again.
	if out, _, err := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("rebuild of a stopped engine's dir: %v\n%s", err, out)
	}

	empty := filepath.Join(t.TempDir(), "wrong-dir")
	out, _, err := runEngine(t, "rebuild", "--data", empty)
	if err == nil || !strings.Contains(out, "holds no event stream") {
		t.Fatalf("rebuild of a dir without a store: err %v\n%s", err, out)
	}
	if matches, _ := filepath.Glob(filepath.Join(empty, "jetstream", "*", "streams", "*")); len(matches) > 0 {
		t.Fatalf("rebuild created streams in a dir without a store: %v", matches)
	}
	out, _, err = runEngine(t, "registry", "push", "--data", dir, filepath.Join("..", "resolver", "default_registry.json"))
	if err == nil || !strings.Contains(out, "needs --nats") {
		t.Fatalf("registry push without --nats: err %v\n%s", err, out)
	}
}

// With NATS down, liveness stays ok (an orchestrator must not
// restart the engine for a NATS blip) while readiness fails naming the
// NATS check.
func TestProbesNATSDown(t *testing.T) {
	srv := natstest.Server(t)
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL())
	srv.Shutdown()
	body := rtReady(t, p, http.StatusServiceUnavailable, `"nats":{"ok":false,"error":"NATS connection is`)
	t.Logf("readyz with NATS down: %s", body)
	st, live := rtDo(t, "GET", p.HTTPURL+"/healthz", nil)
	if st != http.StatusOK {
		t.Fatalf("healthz with NATS down: %d %s, want 200", st, live)
	}
}

// diskFullTmpfs mounts a tmpfs of size bytes on a fresh directory
// (root only), unmounted at cleanup.
func diskFullTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs on %s: %v %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk allocates a file under dir leaving about leave bytes free,
// and returns its path. The engine writes meanwhile, so an allocation
// that no longer fits is retried with what is free then, then halved.
func fillDisk(t *testing.T, dir string, leave uint64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var off int64
	shift := 0 // halvings after allocations that did not fit
	for range 256 {
		free, err := jetstream.StatfsFree(dir)
		if err != nil {
			t.Fatal(err)
		}
		if free <= leave {
			break
		}
		n := max(int64(free-leave)>>shift, 4096)
		err = syscall.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == nil:
			off += n
		case errors.Is(err, syscall.ENOSPC) && n <= 4096:
			return path
		case errors.Is(err, syscall.ENOSPC):
			shift++
		default:
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	return path
}

// A full disk is reported as such (507 storage_full naming the free
// bytes) within a second, readiness fails naming the disk, and the engine
// accepts appends again without a restart when space returns; without the
// floor (--min-free 0) too, also after a restart on the full disk.
// As root the disk is a real tmpfs filled with a file; otherwise the
// engine is given a floor above the disk's free space (recovery is then
// shown by jetstream's TestAppendDiskFull).
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		p := startEngineUnready(t, dir, "--min-free", "1000000GiB")
		start := time.Now()
		_, err := p.Client("disk").Append(ctx, "disk-s1", nil, events.ToolDisabled{Name: "bash"})
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || ae.Code != api.CodeStorageFull || !strings.Contains(ae.Message, "disk full:") {
			t.Fatalf("append with the disk below --min-free: %v", err)
		}
		t.Logf("refused in %v: %s", time.Since(start).Round(time.Millisecond), ae.Message)
		rtReady(t, p, http.StatusServiceUnavailable, `"disk":{"ok":false,"error":"disk full:`)
		return
	}
	dir := diskFullTmpfs(t, 256<<20)
	p := startEngine(t, dir, "--min-free", "32MiB")
	stderrOnFailure(t, p)
	c := p.Client("disk")
	if _, err := c.Append(ctx, "disk-s1", nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir, 16<<20)
	filled := time.Now()
	var refused time.Duration
	n := 0
	fresh := func() string { n++; return fmt.Sprintf("disk-fresh-%d", n) } // a new session: always an event to append
	acked := map[string]uint64{}
	appendFresh := func(actx context.Context) error {
		s := fresh()
		r, err := c.Append(actx, s, nil, events.ToolDisabled{Name: "bash"})
		if err == nil {
			acked[s] = r.LastSeq
		}
		return err
	}
	natstest.CheckFor(t, time.Second, 10*time.Millisecond, func() error {
		_, err := c.Append(ctx, fresh(), nil, events.ToolDisabled{Name: "bash"})
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || ae.Code != api.CodeStorageFull || !strings.Contains(ae.Message, "disk full:") {
			return fmt.Errorf("append on a full disk: %v, want 507 storage_full", err)
		}
		refused = time.Since(filled)
		t.Logf("full disk: %s", ae.Message)
		return nil
	})
	t.Logf("appends refused %v after the disk filled", refused.Round(time.Millisecond))
	rtReady(t, p, http.StatusServiceUnavailable, `"disk":{"ok":false,"error":"disk full:`)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error { return appendFresh(ctx) })
	t.Logf("appends accepted %v after space returned", time.Since(freed).Round(time.Millisecond))
	rtReady(t, p, http.StatusOK, `"disk":{"ok":true}`)
	t.Logf("ready %v after space returned", time.Since(freed).Round(time.Millisecond))

	// Without the floor (--min-free 0) the store itself hits ENOSPC and
	// its file store refuses every later write: readiness names it, and
	// the engine restarts JetStream once space returns, no restart of
	// the engine.
	p.Stop(t)
	p = startEngine(t, dir, "--min-free", "0")
	stderrOnFailure(t, p)
	c = p.Client("disk")
	filler = fillDisk(t, dir, 0)
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := appendFresh(actx); err == nil {
			return errors.New("append on a disk without a byte free succeeded (the store's page had room)")
		}
		return nil
	})
	body := rtReady(t, p, http.StatusServiceUnavailable, `"jetstream":{"ok":false,"error":"the store failed a write`)
	t.Logf("ENOSPC in the store: %s", body)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed = time.Now()
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return appendFresh(actx)
	})
	t.Logf("after ENOSPC: appends accepted %v after space returned (JetStream restarted in-process)", time.Since(freed).Round(time.Millisecond))
	rtReady(t, p, http.StatusOK, `"jetstream":{"ok":true}`)
	// Nothing acknowledged was lost on the way.
	for s, seq := range acked {
		v, err := c.Intent(ctx, s, seq)
		if err != nil || v.Seq != seq {
			t.Fatalf("acknowledged append to %s at %d: read %+v, %v", s, seq, v, err)
		}
	}
	t.Logf("%d acknowledged appends all readable", len(acked))

	// A restart on a full disk, still without the floor: the engine
	// starts, is not ready while the store takes no write, and takes
	// appends again within seconds of space returning, no restart.
	p.Stop(t)
	filler = fillDisk(t, dir, 0)
	p = startEngineUnready(t, dir, "--min-free", "0")
	stderrOnFailure(t, p)
	c = p.Client("disk")
	body = rtReady(t, p, http.StatusServiceUnavailable, "the store takes no write")
	t.Logf("restarted on a full disk: %s", body)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed = time.Now()
	natstest.CheckFor(t, 5*time.Second, 50*time.Millisecond, func() error {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return appendFresh(actx)
	})
	t.Logf("restarted on a full disk: appends accepted %v after space returned", time.Since(freed).Round(time.Millisecond))
	rtReady(t, p, http.StatusOK, `"stream":{"ok":true}`)
	for s, seq := range acked {
		v, err := c.Intent(ctx, s, seq)
		if err != nil || v.Seq != seq {
			t.Fatalf("acknowledged append to %s at %d: read %+v, %v", s, seq, v, err)
		}
	}
}

// stderrOnFailure logs the engine's stderr (with its exit status, if it
// exited) when the test fails: a crash under a fault is otherwise
// only "connection refused" (the TestDiskFull flake).
func stderrOnFailure(t *testing.T, p *engineProc) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		select {
		case <-p.exited:
			t.Logf("engine (pid %d) exited: %v (killed by the test: %v); its stderr:\n%s", p.cmd.Process.Pid, p.exitErr, p.killed, p.Stderr)
		default:
			t.Logf("engine (pid %d) still running; its stderr:\n%s", p.cmd.Process.Pid, p.Stderr)
		}
	})
}

// startEngineUnready starts `engine serve` and waits for its ready file
// only (not for /readyz).
func startEngineUnready(t *testing.T, dataDir string, args ...string) *engineProc {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(engineBin, append([]string{"serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--ready-file", ready}, args...)...)
	p := &engineProc{cmd: cmd, DataDir: dataDir, Stderr: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.Kill)
	var info struct {
		NATSURL  string `json:"nats_url"`
		HTTPAddr string `json:"http_addr"`
	}
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-p.exited:
			t.Fatalf("engine exited: %v\n%s", p.exitErr, p.Stderr)
		default:
		}
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &info)
	})
	p.NATSURL, p.HTTPURL = info.NATSURL, "http://"+info.HTTPAddr
	return p
}

// damageBlock flips bytes in the stopped store's last events block: a
// tenth of it from fraction at (or the last 64 bytes when at is 1), and,
// when crashed, removes the stream's index as a crash leaves it.
func damageBlock(t *testing.T, dir string, at float64, crashed bool) {
	t.Helper()
	blks, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "TOOLS_EVENTS", "msgs", "*.blk"))
	if len(blks) == 0 {
		t.Fatalf("no events block under %s", dir)
	}
	blk := blks[len(blks)-1]
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	from, n := int(float64(len(b))*at), max(64, len(b)/10)
	if at >= 1 {
		from, n = len(b)-64, 64
	}
	for i := from; i < from+n && i < len(b); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(blk, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if crashed {
		_ = os.Remove(filepath.Join(filepath.Dir(blk), "index.db"))
	}
}

// Against the built binary: a store that lost acknowledged
// events is not ready, says "damaged log" naming the gap in /readyz and
// at error level in its log; `engine rebuild` always terminates (also
// when the stream's last sequence cannot be read) and accepts the loss.
func TestDamagedStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.Client("damage")
	var last uint64
	for i := range 300 {
		r, err := c.Append(ctx, fmt.Sprintf("dmg-%d", i%30), nil, events.ToolDisabled{Name: []string{"bash", "grep", "web_fetch"}[i/30%3]})
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, r.LastSeq)
	}
	// A session whose every event is at the end of the block: the damage
	// takes all of them.
	for _, tool := range []string{"bash", "grep"} {
		r, err := c.Append(ctx, "dmg-late", nil, events.ToolDisabled{Name: tool})
		if err != nil {
			t.Fatal(err)
		}
		last = r.LastSeq
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var live struct {
			Info struct {
				Applied uint64 `json:"applied_seq"`
			} `json:"info"`
		}
		_, body := rtDo(t, "GET", p.HTTPURL+"/healthz", nil)
		if err := json.Unmarshal(body, &live); err != nil || live.Info.Applied < last {
			return fmt.Errorf("projection at %d of %d (%v)", live.Info.Applied, last, err)
		}
		return nil
	})
	p.Stop(t)

	damageBlock(t, dir, 0.5, true)
	start := time.Now()
	// The start-up store check refuses the damaged block; accepting the
	// damage drops only the damaged records (those after them stay), names
	// what it dropped at error level, and the engine is not ready while the
	// log holds fewer events than it acknowledged.
	p = startEngineUnready(t, dir, "--accept-store-damage")
	body := rtReady(t, p, http.StatusServiceUnavailable, "acknowledged events are missing from the middle of the log")
	t.Logf("damage reported in %v: %s", time.Since(start).Round(time.Millisecond), body)
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if s := p.Stderr.String(); !strings.Contains(s, `"level":"error"`) || !strings.Contains(s, "dropped damaged bytes") || !strings.Contains(s, "tools.events.dmg-") {
			return fmt.Errorf("no error-level line naming the dropped records and their sessions in stderr:\n%s", s)
		}
		return nil
	})
	p.Stop(t)

	out, took, err := runEngine(t, "rebuild", "--data", dir)
	if err != nil {
		t.Fatalf("rebuild of the damaged store: %v\n%s", err, out)
	}
	t.Logf("rebuild of the truncated store took %v: %s", took.Round(time.Millisecond), strings.TrimSpace(out))
	p = startEngine(t, dir) // ready again: the loss was accepted
	// Sessions that lost events take appends again (their views no
	// longer claim sequences the log lost: no 409 on every append).
	c = p.Client("damage")
	on := true
	for i := range 31 {
		s := fmt.Sprintf("dmg-%d", i)
		if i == 30 {
			s = "dmg-late"
		}
		// No session has toggled its tools: the append changes each.
		r, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: &on})
		if err != nil {
			t.Fatalf("append to %s after the rebuild: %v", s, err)
		}
		if r.LastSeq == 0 {
			t.Fatalf("append to %s after the rebuild stored nothing: %+v", s, r)
		}
	}
	p.Stop(t)

	// The stream's last sequence unreadable (its index intact): rebuild
	// used to wait for it forever.
	damageBlock(t, dir, 1, false)
	out, took, err = runEngine(t, "rebuild", "--data", dir)
	t.Logf("rebuild with the last sequence unreadable: %v in %v: %s", err, took.Round(time.Millisecond), strings.TrimSpace(out))
	if took > 45*time.Second {
		t.Fatalf("rebuild took %v", took)
	}
}

// healthInfo reads /healthz's info.
func healthInfo(t *testing.T, p *engineProc) (runner bool, applied uint64) {
	t.Helper()
	var live struct {
		Info struct {
			Runner  bool   `json:"projection_runner"`
			Applied uint64 `json:"applied_seq"`
		} `json:"info"`
	}
	_, body := rtDo(t, "GET", p.HTTPURL+"/healthz", nil)
	if err := json.Unmarshal(body, &live); err != nil {
		t.Fatalf("healthz %s: %v", body, err)
	}
	return live.Info.Runner, live.Info.Applied
}

// Against the built binary: two engines on one stream elect
// one projection runner; SIGKILL it and the other takes over within
// seconds and folds what is appended after, with no engine told to run
// or not run the projection.
func TestRunnerTakeoverBinary(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Server(t)
	a := startEngine(t, t.TempDir(), "--nats", srv.ClientURL())
	b := startEngine(t, t.TempDir(), "--nats", srv.ClientURL())
	var runner, standby *engineProc
	natstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		ra, _ := healthInfo(t, a)
		rb, _ := healthInfo(t, b)
		switch {
		case ra && !rb:
			runner, standby = a, b
		case rb && !ra:
			runner, standby = b, a
		default:
			return fmt.Errorf("runners: a %v, b %v; want exactly one", ra, rb)
		}
		return nil
	})
	c := standby.Client("elect")
	if _, err := c.Append(ctx, "elect-s1", nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	runner.Kill()
	killed := time.Now()
	natstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if r, _ := healthInfo(t, standby); !r {
			return errors.New("the standby has not taken over")
		}
		return nil
	})
	t.Logf("took over %v after SIGKILL of the runner", time.Since(killed).Round(time.Millisecond))
	res, err := c.Append(ctx, "elect-s1", nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, applied := healthInfo(t, standby); applied < res.LastSeq {
			return fmt.Errorf("new runner folded up to %d, want %d", applied, res.LastSeq)
		}
		return nil
	})
}
