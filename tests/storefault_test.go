package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/wire"
)

// ackedLog counts acknowledged appends (by stream sequence and session)
// and checks them against the stream with a reader of its own: direct
// gets by sequence on a NATS connection of the test, not the engine's
// API (acked vs present by an independent reader).
type ackedLog map[uint64]string

// appendFresh appends one event to a new session and records it when
// acknowledged.
func (a ackedLog) appendFresh(ctx context.Context, c *client.Client, prefix string) error {
	s := fmt.Sprintf("%s-%d", prefix, len(a)+1)
	r, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}})
	if err == nil {
		a[r.LastSeq] = s
	}
	return err
}

// present reads every acknowledged sequence from the stream as the admin
// of p's embedded server and returns how many are there on their
// session's subject, and the missing ones.
func (a ackedLog) present(t *testing.T, p *engineProc, auth nats.Option) (int, []uint64) {
	t.Helper()
	nc := natstest.Connect(t, p.NATSURL, auth)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatalf("independent reader: stream TOOLS_EVENTS: %v", err)
	}
	n := 0
	var missing []uint64
	for seq, s := range a {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || m.Subject != "tools.events."+s {
			missing = append(missing, seq)
			continue
		}
		n++
	}
	return n, missing
}

// The disk fills under --min-free 0, space returns and the
// engine restarts JetStream in-process, more appends, then a normal
// restart: every acknowledged append is in the stream the restarted
// engine serves (counted by direct gets of the test's own), and no store
// sits in <data>/jetstream/jetstream. Before the fix the in-process
// restart moved the store there and the next start served an empty
// stream (1,410 acked, 0 present). Without root (no tmpfs) the disk
// cannot be filled: the in-process restart is then jetstream's
// TestReenableJetStreamKeepsStoreDir, and this test checks the restart
// path without the fault.
func TestStoreENOSPCRestartKeepsLog(t *testing.T) {
	ctx := context.Background()
	root := os.Geteuid() == 0
	dir := t.TempDir()
	if root {
		dir = diskFullTmpfs(t, 64<<20)
	}
	p := startEngine(t, dir, "--min-free", "0")
	stderrOnFailure(t, p)
	c := p.GoClient("row1")
	acked := ackedLog{}
	for range 40 {
		if err := acked.appendFresh(ctx, c, "before"); err != nil {
			t.Fatal(err)
		}
	}
	if root {
		filler := fillDisk(t, dir, 0)
		natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := acked.appendFresh(actx, c, "filling"); err == nil {
				return errors.New("append on a disk without a byte free succeeded (the store's page had room)")
			}
			return nil
		})
		rtReady(t, p, http.StatusServiceUnavailable, `"jetstream":{"ok":false`)
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		freed := time.Now()
		natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return acked.appendFresh(actx, c, "restarted")
		})
		t.Logf("JetStream restarted in-process: appends accepted %v after space returned", time.Since(freed).Round(time.Millisecond))
	}
	for range 40 {
		if err := acked.appendFresh(ctx, c, "after"); err != nil {
			t.Fatal(err)
		}
	}
	p.Stop(t)

	p = startEngine(t, dir, "--min-free", "0")
	stderrOnFailure(t, p)
	n, missing := acked.present(t, p, p.adminAuth(t))
	t.Logf("acked %d, present %d after the in-process JetStream restart and a normal restart", len(acked), n)
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged appends missing from the stream after a normal restart (e.g. seq %d)", len(missing), len(acked), missing[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream", "jetstream")); err == nil {
		t.Fatalf("a nested store %s exists", filepath.Join(dir, "jetstream", "jetstream"))
	}
}

// waitWatermark waits until dir's acknowledged watermark records the
// stream up to seq.
func waitWatermark(t *testing.T, dir string, seq uint64) {
	t.Helper()
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		w, err := jetstream.ReadWatermark(dir)
		if err != nil {
			return err
		}
		if m := w.Streams["TOOLS_EVENTS"]; m.LastSeq < seq {
			return fmt.Errorf("watermark at %d, want %d", m.LastSeq, seq)
		}
		return nil
	})
}

// While serving, the watermark follows the stream (at most a
// second behind), so a crash loses at most that much of the record.
func TestWatermarkFollowsStream(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	acked := ackedLog{}
	var last uint64
	for range 5 {
		if err := acked.appendFresh(ctx, p.GoClient("row1"), "wm"); err != nil {
			t.Fatal(err)
		}
	}
	for seq := range acked {
		last = max(last, seq)
	}
	start := time.Now()
	waitWatermark(t, dir, last)
	t.Logf("watermark at %d %v after the last append", last, time.Since(start).Round(time.Millisecond))
	p.Kill()
	w, err := jetstream.ReadWatermark(dir)
	if err != nil || w.Streams["TOOLS_EVENTS"].Messages < uint64(len(acked)) {
		t.Fatalf("watermark after SIGKILL: %+v, %v; want %d messages", w, err, len(acked))
	}
}

// A store emptied under the engine (its stream directory
// removed while it was stopped, the meta and views buckets kept or not)
// is not served as if whole: /readyz is 503 naming the gap and the
// fix, the log says it at error level, appends are refused with 507
// naming it; `engine rebuild` accepts the loss and the engine is ready
// again. Before, the engine created an empty stream and was ready.
func TestStoreEmptiedRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.GoClient("row1")
	acked := ackedLog{}
	var last uint64
	for range 30 {
		if err := acked.appendFresh(ctx, c, "gone"); err != nil {
			t.Fatal(err)
		}
	}
	for seq := range acked {
		last = max(last, seq)
	}
	p.Stop(t) // a clean stop records the watermark

	// The whole JetStream store goes (as the old in-process restart left
	// it): the projection's own watermark in the meta bucket goes too.
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	p = startEngineUnready(t, dir)
	stderrOnFailure(t, p)
	want := fmt.Sprintf(`"acknowledged":{"ok":false,"error":"the log holds less than the engine acknowledged: stream TOOLS_EVENTS in %s ends at sequence 0 (0 messages) but the engine acknowledged up to %d`, dir, last)
	body := rtReady(t, p, http.StatusServiceUnavailable, want)
	if !strings.Contains(body, "engine rebuild --data "+dir) {
		t.Fatalf("readyz does not name the fix: %s", body)
	}
	t.Logf("readyz: %s", body)
	c = p.GoClient("row1")
	_, err := c.Append(ctx, client.AppendRequest{Session: "gone-new", Commands: []client.Command{client.DisableTool("bash")}})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || !strings.Contains(ae.Message, "the log holds less than the engine acknowledged") {
		t.Fatalf("append on a short log: %v, want 507 naming the gap", err)
	}
	p.waitLog(t, `"level":"error"`, "the log holds less than the engine acknowledged")
	p.Stop(t)

	out, _, err := runEngine(t, "rebuild", "--data", dir)
	if err != nil || !strings.Contains(out, fmt.Sprintf("accepted the loss: the engine had acknowledged up to sequence %d", last)) {
		t.Fatalf("rebuild to accept the loss: %v\n%s", err, out)
	}
	t.Logf("rebuild: %s", strings.TrimSpace(out))
	p = startEngine(t, dir) // ready: the loss was accepted
	if _, err := p.GoClient("row1").Append(ctx, client.AppendRequest{Session: "gone-new", Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
		t.Fatalf("append after the loss was accepted: %v", err)
	}
}

// A data directory whose store an old engine's in-process
// restart moved to <data>/jetstream/jetstream is refused at start, naming
// the nested store and the command that moves it back; once moved back,
// every acknowledged append is served.
func TestStoreNestedRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.GoClient("row1")
	acked := ackedLog{}
	for range 10 {
		if err := acked.appendFresh(ctx, c, "nested"); err != nil {
			t.Fatal(err)
		}
	}
	p.Stop(t)
	// What the old restart left: the account under jetstream/jetstream.
	js := filepath.Join(dir, "jetstream")
	if err := os.MkdirAll(filepath.Join(js, "jetstream"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(js, "$G"), filepath.Join(js, "jetstream", "$G")); err != nil {
		t.Fatal(err)
	}
	out, _, err := runEngineWithin(t, 20*time.Second, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	want := fmt.Sprintf("mv '%s' '%s'", filepath.Join(js, "jetstream", "$G"), filepath.Join(js, "$G"))
	if err == nil || !strings.Contains(out, "JetStream store in a nested jetstream directory") || !strings.Contains(out, want) {
		t.Fatalf("serve on a nested store: %v, want a refusal naming %q:\n%s", err, want, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(out))
	if err := os.Rename(filepath.Join(js, "jetstream", "$G"), filepath.Join(js, "$G")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(js, "jetstream")); err != nil {
		t.Fatal(err)
	}
	p = startEngine(t, dir)
	if n, missing := acked.present(t, p, p.adminAuth(t)); len(missing) > 0 {
		t.Fatalf("after moving the store back: %d of %d present, missing %v", n, len(acked), missing)
	}
}

// Appends while the store is out of space (--min-free 0: the
// store itself hit ENOSPC) answer 507 storage_full, every one, well
// within the client's timeout; before, 28 of 60 got no answer in 20 s.
// As root only (a tmpfs filled with a file); without root the refusal
// below --min-free is TestDiskFull's.
func TestAppendsOnFullStoreFail507(t *testing.T) {
	ctx := context.Background()
	if os.Geteuid() != 0 {
		p := startEngineUnready(t, t.TempDir(), "--min-free", "1000000GiB")
		for i := range 20 {
			_, err := p.GoClient("row8").Append(ctx, client.AppendRequest{Session: fmt.Sprintf("full-%d", i), Commands: []client.Command{client.DisableTool("bash")}})
			if !errors.Is(err, client.ErrStorageFull) {
				t.Fatalf("append %d below --min-free: %v, want 507", i, err)
			}
		}
		return
	}
	dir := diskFullTmpfs(t, 64<<20)
	p := startEngine(t, dir, "--min-free", "0")
	stderrOnFailure(t, p)
	acked := ackedLog{}
	c := p.GoClient("row8")
	for range 10 {
		if err := acked.appendFresh(ctx, c, "full"); err != nil {
			t.Fatal(err)
		}
	}
	fillDisk(t, dir, 0)
	clientTimeout := 10 * time.Second
	// The append whose write meets the full disk gets no reply from the
	// server (stream.go: an I/O error is not answered): its outcome is
	// unknown, and the engine says so as soon as the store's fault is
	// recorded (TestAppendsInFlightOnENOSPCAnswer), not after its try.
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		actx, cancel := context.WithTimeout(ctx, clientTimeout)
		defer cancel()
		start := time.Now()
		err := acked.appendFresh(actx, c, "filling")
		if err == nil {
			return errors.New("append on a disk without a byte free succeeded (the store's page had room)")
		}
		var ae *client.Error
		if !errors.As(err, &ae) || (ae.Status != http.StatusInsufficientStorage && ae.Code != wire.CodeOutcomeUnknown) {
			t.Fatalf("first append to meet the full store: %v after %v, want 507 storage_full or 503 outcome_unknown", err, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("first append to meet the full store: %d %s after %v: %s", ae.Status, ae.Code, time.Since(start).Round(time.Millisecond), ae.Message)
		return nil
	})
	const n = 30
	var slowest time.Duration
	for i := range n {
		actx, cancel := context.WithTimeout(ctx, clientTimeout)
		start := time.Now()
		_, err := c.Append(actx, client.AppendRequest{Session: fmt.Sprintf("full-late-%d", i), Commands: []client.Command{client.DisableTool("bash")}})
		took := time.Since(start)
		cancel()
		slowest = max(slowest, took)
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || ae.Code != wire.CodeStorageFull {
			t.Fatalf("append %d of %d on the full store: %v after %v, want 507 storage_full within the client's %v", i+1, n, err, took.Round(time.Millisecond), clientTimeout)
		}
		if i == 0 {
			t.Logf("507: %s", ae.Message)
		}
	}
	t.Logf("%d appends on the full store: all 507, slowest %v", n, slowest.Round(time.Millisecond))
}

// `engine rebuild --data D` on a directory served with --server-config
// (the store in the config's account TOOLS), run without that config, is
// refused: it names the stream it looked for and the streams it found,
// exits non-zero and creates no store and no users file; with the same
// --server-config and login it rebuilds the real store. Before, it
// created an empty $G store beside the real one and printed "rebuilt
// views from 0 events", exit 0.
func TestRebuildRefusesForeignStore(t *testing.T) {
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	dir := t.TempDir()
	login := []string{"--server-config", conf, "--nats-user", "engine", "--nats-password", pw["engine"].password}
	p := startEngine(t, dir, login...)
	for i := range 5 {
		if _, err := p.GoClient("web").Append(context.Background(), client.AppendRequest{Session: fmt.Sprintf("foreign-%d", i), Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
	}
	p.Stop(t)

	out, _, err := runEngine(t, "rebuild", "--data", dir)
	if err == nil || !strings.Contains(out, "no event stream TOOLS_EVENTS") || !strings.Contains(out, "TOOLS/TOOLS_EVENTS") || !strings.Contains(out, "--server-config") {
		t.Fatalf("rebuild without the store's --server-config: %v, want a refusal naming TOOLS_EVENTS and what was found:\n%s", err, out)
	}
	t.Logf("refused: %s", out[strings.Index(out, "data dir "):])
	if m, _ := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", "*")); len(m) > 0 {
		t.Fatalf("the refused rebuild created streams %v", m)
	}
	if _, err := os.Stat(jetstream.CredentialsPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused rebuild wrote %s into a --server-config store (%v)", jetstream.CredentialsFile, err)
	}
	out, _, err = runEngine(t, append([]string{"rebuild", "--data", dir}, login...)...)
	if err != nil || !strings.Contains(out, "rebuilt views from 5 events") {
		t.Fatalf("rebuild with the store's --server-config: %v\n%s", err, out)
	}
}

// --server-config without --nats-user is refused before
// anything starts, naming the flag and the config's users; before it died
// with "io: read/write on closed pipe".
func TestServerConfigNeedsUser(t *testing.T) {
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	out, took, err := runEngineWithin(t, 20*time.Second, "serve", "--data", t.TempDir(), "--server-config", conf, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	if err == nil || !strings.Contains(out, "--nats-user and --nats-password") || !strings.Contains(out, "engine") || strings.Contains(out, "closed pipe") {
		t.Fatalf("serve --server-config without --nats-user: %v\n%s", err, out)
	}
	t.Logf("refused in %v: %s", took.Round(time.Millisecond), strings.TrimSpace(out))
	// A wrong password names the user and the config.
	out, took, err = runEngineWithin(t, 30*time.Second, "serve", "--data", t.TempDir(), "--server-config", conf, "--nats-user", "engine", "--nats-password", "wrong",
		"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	if err == nil || !strings.Contains(out, `embedded server of --server-config `+conf+` as user "engine"`) {
		t.Fatalf("serve --server-config with a wrong password: %v\n%s", err, out)
	}
	t.Logf("wrong password, refused in %v: %s", took.Round(time.Millisecond), strings.TrimSpace(out))
}

// Writers in parallel on a store whose disk fills (--min-free
// 0: the store's own write meets ENOSPC) each get an answer within the
// client's 2 s timeout, the appends in flight when the write fails
// included: nats-server never answers the publish whose write failed, and
// the engine used to wait its whole try (5 s) for it. Every acknowledged
// append is in the stream once space returns (an independent reader).
func TestAppendsInFlightOnENOSPCAnswer(t *testing.T) {
	ctx := context.Background()
	if os.Geteuid() != 0 {
		t.Log("not root: no tmpfs to fill; the refusal below --min-free is TestAppendsOnFullStoreFail507's")
		return
	}
	dir := diskFullTmpfs(t, 64<<20)
	p := startEngine(t, dir, "--min-free", "0")
	stderrOnFailure(t, p)
	const writers = 6
	const clientTimeout = 2 * time.Second
	var (
		mu        sync.Mutex
		acked     = ackedLog{}
		slowest   time.Duration
		firstFail time.Duration // time to answer of the first append refused or left unknown
		slowUnk   time.Duration // the slowest outcome_unknown: an append in flight when the write failed
		unknown   int
		refused   int
		failures  []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.GoClient("row8")
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s := fmt.Sprintf("inflight-%d-%d", w, i)
				actx, cancel := context.WithTimeout(ctx, clientTimeout)
				start := time.Now()
				r, err := c.Append(actx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}})
				took := time.Since(start)
				cancel()
				var ae *client.Error
				mu.Lock()
				slowest = max(slowest, took)
				switch {
				case err == nil:
					acked[r.LastSeq] = s
				case errors.As(err, &ae) && (ae.Code == wire.CodeStorageFull || ae.Code == wire.CodeOutcomeUnknown):
					if unknown+refused == 0 {
						firstFail = took
					}
					if ae.Code == wire.CodeOutcomeUnknown {
						unknown++
						slowUnk = max(slowUnk, took)
					} else {
						refused++
					}
				default:
					failures = append(failures, fmt.Sprintf("append to %s: %v after %v", s, err, took.Round(time.Millisecond)))
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // writers under way before the disk fills
	filler := fillDisk(t, dir, 0)
	// Until every writer has met the full store a few times.
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if refused < 5*writers {
			return fmt.Errorf("%d refusals so far", refused)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	t.Logf("%d writers: %d acked, %d 507, %d outcome_unknown (slowest %v); first refused or unknown answered in %v, slowest answer %v",
		writers, len(acked), refused, unknown, slowUnk.Round(time.Millisecond), firstFail.Round(time.Millisecond), slowest.Round(time.Millisecond))
	if len(failures) > 0 {
		t.Fatalf("%d appends got no answer within the client's %v or a wrong one, e.g. %s", len(failures), clientTimeout, failures[0])
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c := p.GoClient("row8")
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		actx, cancel := context.WithTimeout(ctx, clientTimeout)
		defer cancel()
		r, err := c.Append(actx, client.AppendRequest{Session: "inflight-after", Commands: []client.Command{client.DisableTool("bash")}})
		if err == nil {
			acked[r.LastSeq] = "inflight-after"
		}
		return err
	})
	n, missing := acked.present(t, p, p.adminAuth(t))
	t.Logf("after space returned: acked %d, present %d", len(acked), n)
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged appends missing from the stream (e.g. seq %d)", len(missing), len(acked), missing[0])
	}
}
