package tests

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// eventsDir is the event stream's block directory of a data directory.
func eventsDir(dir string) string {
	return filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "msgs")
}

// storeFixture is a stopped engine store of several blocks, written
// through the engine, with one acknowledged 2-event atomic append.
type storeFixture struct {
	dir       string
	acked     uint64 // the stream's last acknowledged sequence
	pairFirst uint64 // the 2-event append's first sequence
	blocks    int
}

// writeStore writes events through the built engine until its event
// stream spans at least minBlocks blocks (nats-server cuts a block at
// 8 MiB on a stream without limits), with a 2-event atomic append in the
// middle of the first block, then stops the engine gracefully (index.db
// written).
func writeStore(t *testing.T, minBlocks int) storeFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.Client("damage")
	on, off := true, false
	cmds := make([]events.Payload, 0, 100)
	for i := range 100 {
		cmds = append(cmds, events.ToolsToggled{Enabled: map[bool]*bool{true: &on, false: &off}[i%2 == 0]})
	}
	var fx storeFixture
	var mu sync.Mutex
	blocksNow := func() int {
		blks, _ := filepath.Glob(filepath.Join(eventsDir(dir), "*.blk"))
		return len(blks)
	}
	start := time.Now()
	for round := 0; blocksNow() < minBlocks || round < 2; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 25 {
					s := fmt.Sprintf("fill-%d-%d", w, i%5)
					r, err := c.Append(ctx, s, nil, cmds...)
					if err != nil {
						errs <- fmt.Errorf("append to %s: %w", s, err)
						return
					}
					mu.Lock()
					fx.acked = max(fx.acked, r.LastSeq)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if round == 0 {
			r, err := c.Append(ctx, "pair", nil, events.ToolDisabled{Name: "bash"}, events.ToolDisabled{Name: "grep"})
			if err != nil || r.LastSeq != r.FirstSeq+1 {
				t.Fatalf("2-event append: %+v, %v", r, err)
			}
			fx.pairFirst = r.FirstSeq
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("after %v: %d blocks, want %d", time.Since(start), blocksNow(), minBlocks)
		}
	}
	p.Stop(t)
	fx.dir, fx.blocks = dir, blocksNow()
	t.Logf("store: %d events acknowledged in %d blocks, written in %v; 2-event append at %d..%d",
		fx.acked, fx.blocks, time.Since(start).Round(time.Millisecond), fx.pairFirst, fx.pairFirst+1)
	return fx
}

// copyOf copies the stopped fixture store to a new directory.
func (fx storeFixture) copyOf(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dst, os.DirFS(fx.dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// record is where a record of a block is.
type record struct {
	file     string
	off, len int64
	seq      uint64
}

// findRecord finds the record of seq in the event stream's blocks.
func findRecord(t *testing.T, dir string, seq uint64) record {
	t.Helper()
	blks, _ := filepath.Glob(filepath.Join(eventsDir(dir), "*.blk"))
	for _, blk := range blks {
		b, err := os.ReadFile(blk)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+22 <= len(b); {
			rl := int(binary.LittleEndian.Uint32(b[off:]) &^ (1 << 31))
			if s := binary.LittleEndian.Uint64(b[off+4:]) &^ (3 << 62); s == seq {
				return record{file: blk, off: int64(off), len: int64(rl), seq: s}
			}
			if rl <= 0 {
				break
			}
			off += rl
		}
	}
	t.Fatalf("no record of sequence %d in %s", seq, eventsDir(dir))
	return record{}
}

// refusal is how a start on a damaged store ended.
type refusal struct {
	err    error
	stderr string
	took   time.Duration
	peakKB int64 // VmHWM seen while it ran
	ready  bool  // it wrote its ready file
}

// startOnDamage starts `engine serve` on dir and waits (up to 90 s) for
// it to exit or to serve (write its ready file: it is then killed),
// reading its peak RSS (VmHWM) while it runs; above killKB it
// is killed (the memory guard: a damaged store must not take the
// machine).
func startOnDamage(t *testing.T, dir string, killKB int64, args ...string) refusal {
	t.Helper()
	readyFile := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(engineBin, append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--ready-file", readyFile}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var r refusal
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case r.err = <-done:
			r.took, r.stderr = time.Since(start), stderr.String()
			_, err := os.Stat(readyFile)
			r.ready = err == nil
			return r
		case <-tick.C:
			if _, err := os.Stat(readyFile); err == nil {
				// It serves the damaged store: stop it, the caller fails.
				_ = cmd.Process.Kill()
				r.err, r.took, r.stderr, r.ready = <-done, time.Since(start), stderr.String(), true
				return r
			}
			if kb := vmHWM(cmd.Process.Pid); kb > r.peakKB {
				r.peakKB = kb
			}
			if r.peakKB > killKB {
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("engine's peak RSS %d MiB after %v on the damaged store: over the %d MiB bound, killed\n%s",
					r.peakKB>>10, time.Since(start).Round(time.Millisecond), killKB>>10, tail(stderr.String()))
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("engine neither served nor exited within 90 s on the damaged store (peak RSS %d MiB)\n%s", r.peakKB>>10, tail(stderr.String()))
		}
	}
}

// vmHWM reads a process's peak resident set size in KiB (0 when gone).
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// mustRefuse asserts the engine exited non-zero without serving and that
// its error names every wanted part.
func mustRefuse(t *testing.T, r refusal, want ...string) {
	t.Helper()
	if r.err == nil || r.ready {
		t.Fatalf("engine on a damaged store: exit %v, ready file written %v; want a refusal\n%s", r.err, r.ready, tail(r.stderr))
	}
	for _, w := range append([]string{"refusing to load a damaged store", "restore the data directory from a backup or a replica", "--accept-store-damage"}, want...) {
		if !strings.Contains(r.stderr, w) {
			t.Fatalf("engine's error does not say %q:\n%s", w, tail(r.stderr))
		}
	}
	t.Logf("refused in %v, peak RSS %d MiB: %s", r.took.Round(time.Millisecond), r.peakKB>>10, lastLine(r.stderr))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Against the built binary: a stopped store damaged
// while index.db stays in place ((a) a block cut to half, (b) a block
// deleted, (c) one bit flipped in an acknowledged 2-event atomic append,
// and row 3's 2 KB of bytes overwritten mid-block with a garbage
// sequence) makes the engine refuse to start, naming the block file, the
// offset or sequences and what to do; it never serves the loss, and the
// garbage sequence does not make it grow without bound (peak RSS under
// 1 GiB). --accept-store-damage then starts it, and /readyz names the
// loss.
func TestDamagedStoreRefused(t *testing.T) {
	fx := writeStore(t, 3)
	const bound = 1 << 20 // KiB: 1 GiB
	start := time.Now()
	rep, err := jetstream.CheckStore(context.Background(), fx.dir, jetstream.StoreCheckConfig{})
	if err != nil || rep.Err() != nil {
		t.Fatalf("the intact store: %v, %v", err, rep.Err())
	}
	took := time.Since(start)
	t.Logf("intact store checked: %d records, %d MiB in %v (%.0f MiB/s, page cache warm)", rep.Records, rep.Bytes>>20,
		took.Round(time.Millisecond), float64(rep.Bytes)/(1<<20)/took.Seconds())

	t.Run("row 2a block cut to half", func(t *testing.T) {
		dir := fx.copyOf(t)
		blk := filepath.Join(eventsDir(dir), "2.blk")
		fi, err := os.Stat(blk)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(blk, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		mustRefuse(t, startOnDamage(t, dir, bound), "2.blk", "cut short", "are gone")
	})
	t.Run("row 2b block deleted", func(t *testing.T) {
		dir := fx.copyOf(t)
		if err := os.Remove(filepath.Join(eventsDir(dir), "2.blk")); err != nil {
			t.Fatal(err)
		}
		mustRefuse(t, startOnDamage(t, dir, bound), "2.blk", "the block is missing", "are gone")
	})
	t.Run("row 2c one bit of an atomic append", func(t *testing.T) {
		dir := fx.copyOf(t)
		rec := findRecord(t, dir, fx.pairFirst+1)
		flipAt(t, rec.file, rec.off+rec.len-20, 0x04) // in the body, before the checksum
		mustRefuse(t, startOnDamage(t, dir, bound), filepath.Base(rec.file), fmt.Sprintf("at offset %d", rec.off), "checksum mismatch")
	})
	t.Run("row 3 garbage sequence mid-block", func(t *testing.T) {
		dir := fx.copyOf(t)
		garbleMidBlock(t, dir)
		mustRefuse(t, startOnDamage(t, dir, bound), "checksum mismatch")
	})
	t.Run("accept the loss", func(t *testing.T) {
		dir := fx.copyOf(t)
		blk := filepath.Join(eventsDir(dir), "2.blk")
		fi, _ := os.Stat(blk)
		if err := os.Truncate(blk, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		p := startEngineUnready(t, dir, "--accept-store-damage")
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			if s := p.Stderr.String(); !strings.Contains(s, "accepted the loss") {
				return fmt.Errorf("no accepted-loss line yet:\n%s", tail(s))
			}
			return nil
		})
		// The views fold again from the log as it now is and stop at the
		// gap, naming it, until engine rebuild accepts it.
		body := rtReady(t, p, 503, "cannot be read from the stream")
		t.Logf("readyz after accepting: %s", body)
		p.Stop(t)
		if out, took, err := runEngine(t, "rebuild", "--data", dir); err != nil {
			t.Fatalf("rebuild after accepting: %v\n%s", err, out)
		} else {
			t.Logf("rebuild after accepting took %v: %s", took.Round(time.Millisecond), strings.TrimSpace(out))
		}
		// Ready now, and again after a restart: the accepted gap is not
		// reported again.
		startEngine(t, dir).Stop(t)
		p = startEngine(t, dir)
		// Acked vs present, by a reader of the stream: every acknowledged
		// event is in the stream or in the accepted loss.
		nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
		js, err := natsjs.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		si, err := js.Stream(context.Background(), "TOOLS_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, jetstream.AcceptedLossFile))
		if err != nil {
			t.Fatal(err)
		}
		var accepted []jetstream.AcceptedLoss
		if err := json.Unmarshal(data, &accepted); err != nil {
			t.Fatal(err)
		}
		var lost uint64
		for _, a := range accepted {
			if a.Count > 0 {
				lost += a.Count
			} else {
				lost += a.To - a.From + 1
			}
		}
		st := si.CachedInfo().State
		if st.Msgs+lost != fx.acked || st.LastSeq != fx.acked {
			t.Fatalf("acked %d, present %d (last %d), accepted as lost %d: do not add up", fx.acked, st.Msgs, st.LastSeq, lost)
		}
		t.Logf("acked %d = present %d + accepted as lost %d (%+v)", fx.acked, st.Msgs, lost, accepted)
		p.Stop(t)
	})
}

// flipAt xors one byte of file at off with mask.
func flipAt(t *testing.T, file string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// garbleMidBlock overwrites 2 KB in the middle of the event stream's last
// block, index.db intact: the first record there keeps its
// length and subject length but gets a garbage sequence (2^36, no flag
// bits), the rest is random bytes. nats-server (2.15.2) trusts the block's
// range from index.db, and when it indexes the block (rebuilding the
// dedupe window at start) it fills a hole of dbit entries from the block's
// first sequence up to the garbage one, without bound.
func garbleMidBlock(t *testing.T, dir string) {
	t.Helper()
	blks, _ := filepath.Glob(filepath.Join(eventsDir(dir), "*.blk"))
	last := blks[len(blks)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	var off int
	for o := 0; o+22 <= len(b); {
		if o >= len(b)/2 {
			off = o
			break
		}
		o += int(binary.LittleEndian.Uint32(b[o:]) &^ (1 << 31))
	}
	if off == 0 || off+2048 > len(b) {
		t.Fatalf("last block %s (%d bytes) has no record in its second half with 2 KB after it", last, len(b))
	}
	rl := int(binary.LittleEndian.Uint32(b[off:]) &^ (1 << 31))
	binary.LittleEndian.PutUint64(b[off+4:], 1<<36)
	rng := rand.New(rand.NewPCG(24, 3))
	for i := off + rl; i < off+2048; i++ {
		b[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(last, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// Against the built binary: a garbage state file of the
// projection's consumer (obs/views/o.dat) used to leave /readyz at
// "projection catching up: folded up to sequence 0" for ever while
// nats-server logged "error creating store for consumer". The start-up
// check finds it, moves the consumer aside and says so at error level;
// the projection folds every view again from the log, and the engine is
// ready with every acknowledged append readable. Another consumer's
// damaged state is named with its fix and does not stop the engine.
func TestDamagedConsumerState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.Client("damage")
	acked := map[string]uint64{}
	for i := range 40 {
		s := fmt.Sprintf("cs-%d", i%8)
		r, err := c.Append(ctx, s, nil, events.ToolDisabled{Name: []string{"bash", "grep", "web_fetch"}[i/8%3]})
		if err != nil {
			t.Fatal(err)
		}
		acked[s] = max(acked[s], r.LastSeq)
	}
	// Another durable consumer on the stream (an auditor's).
	nc := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "TOOLS_EVENTS", natsjs.ConsumerConfig{Durable: "auditor", AckPolicy: natsjs.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	p.Stop(t)
	other := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "obs", "auditor", "o.dat")
	if err := os.WriteFile(other, []byte("not a consumer state either"), 0o640); err != nil {
		t.Fatal(err)
	}
	odat := filepath.Join(dir, "jetstream", "$G", "streams", "TOOLS_EVENTS", "obs", "views", "o.dat")
	if _, err := os.Stat(odat); err != nil {
		t.Fatalf("the projection's consumer state: %v", err)
	}
	if err := os.WriteFile(odat, []byte("\x16\x02garbage that is not a consumer state"), 0o640); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p = startEngine(t, dir) // waits for /readyz 200
	t.Logf("ready %v after the start on a garbage consumer state", time.Since(start).Round(time.Millisecond))
	// The other consumer's damage is named with its fix; it does not
	// stop the engine.
	p.waitLog(t, `"level":"error"`, "o.dat", "consumer state unreadable", "moved aside", "folds every view again",
		"auditor", "its owner must create it again")
	c = p.Client("damage")
	for s, seq := range acked {
		v, err := c.Intent(ctx, s, seq)
		if err != nil || v.Seq != seq {
			t.Fatalf("%s after the refold: %+v, %v; want seq %d", s, v, err, seq)
		}
	}
	p.Stop(t)
}
