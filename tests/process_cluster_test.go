// Faults on a cluster of separate nats-server processes killed with
// SIGKILL, with every client operation recorded and each session's history
// checked for linearizability with porcupine. Helpers are prefixed pc.

package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/service"
)

// pcLong reports whether the long fault runs are asked for (CLUSTER_LONG=1):
// longer load between faults, both fsync policies. The default is short
// enough for every CI run.
func pcLong() bool { return os.Getenv("CLUSTER_LONG") != "" }

// Operation kinds and outcomes of the recorded history.
const (
	pcAppend = "append"
	pcRead   = "read"

	pcOK       = "ok"       // stored (Seq) or a no-op at the expected sequence
	pcNoop     = "noop"     // nothing to write (decided on the engine's cached state)
	pcConflict = "conflict" // the session was not at expected: nothing written
	pcUnknown  = "unknown"  // transport error or timeout: may or may not be stored
)

// pcOp is one recorded operation: invocation and completion.
type pcOp struct {
	Client   int
	Session  string
	Kind     string
	Actor    string // append: the event's actor, unique per operation
	Expected uint64 // append: the sequence the session must be at
	Outcome  string
	Seq      uint64 // append ok: where it was stored
	Log      string // read ok: "actor@seq,..." of the session
	Call     int64  // ns since the start of the run
	Return   int64
}

// pcHistory collects operations from all writers.
type pcHistory struct {
	t0  time.Time
	mu  sync.Mutex
	ops []pcOp
}

func (h *pcHistory) now() int64 { return int64(time.Since(h.t0)) }

func (h *pcHistory) add(op pcOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// pcModel is a per-session log: appends with an expected last sequence
// (compare-and-set) and reads of the session's last event. The state is the
// session's log as "actor@seq,..." (a string: comparable, hashable). A
// conflict claims the session was not at the expected sequence.
var pcModel = pcNewModel(true)

// pcLenientModel is pcModel where a conflict claims nothing but that
// nothing was written: the engine decides a conflict on a read of the
// views and the log's tail that a lagging replica may answer, so a
// conflict can be spurious (safe: nothing written, the caller re-reads).
var pcLenientModel = pcNewModel(false)

func pcNewModel(strictConflicts bool) porcupine.Model {
	m := pcModelBase
	step := m.Step
	m.Step = func(state, input, output interface{}) (bool, interface{}) {
		if !strictConflicts && input.(pcOp).Kind == pcAppend && output.(pcOp).Outcome == pcConflict {
			return true, state
		}
		return step(state, input, output)
	}
	return m
}

var pcModelBase = porcupine.Model{
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st := state.(string)
		in, out := input.(pcOp), output.(pcOp)
		last := pcLastSeq(st)
		switch in.Kind {
		case pcRead: // the session's last event
			return out.Log == pcLastEntry(st), st
		case pcAppend:
			switch out.Outcome {
			case pcOK:
				if last != in.Expected || out.Seq <= last {
					return false, st
				}
				return true, pcJoin(st, in.Actor+"@"+strconv.FormatUint(out.Seq, 10))
			case pcNoop:
				// Nothing written. The engine decides a no-op on its
				// cached state without asking the log, so the no-op
				// says nothing about where the session was.
				return true, st
			case pcConflict:
				return last != in.Expected, st
			}
		}
		return false, st
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(pcOp), output.(pcOp)
		if in.Kind == pcRead {
			return "read_last() -> [" + out.Log + "]"
		}
		return fmt.Sprintf("append(%s, expect %d) -> %s %d", in.Actor, in.Expected, out.Outcome, out.Seq)
	},
}

func pcJoin(log, entry string) string {
	if log == "" {
		return entry
	}
	return log + "," + entry
}

func pcLastEntry(log string) string { return log[strings.LastIndexByte(log, ',')+1:] }

func pcLastSeq(log string) uint64 {
	if log == "" {
		return 0
	}
	_, s, _ := strings.Cut(log[strings.LastIndexByte(log, ',')+1:], "@")
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// pcCheck checks each session's history against pcModel. Appends whose
// outcome is unknown are resolved with the final log, which only grows
// (deletes are denied): stored at seq s, the append took effect at some
// point after its invocation (completion open-ended); absent, it took no
// effect and is left out. It returns operations checked, sessions not
// linearizable and, for the first of them, its history.
func pcCheck(t *testing.T, model porcupine.Model, h *pcHistory, final map[string]uint64) (ops int, bad []string, firstBad string) {
	t.Helper()
	bySession := map[string][]porcupine.Operation{}
	for _, op := range h.ops {
		out := op
		ret := op.Return
		if op.Kind == pcAppend && op.Outcome == pcUnknown {
			seq, stored := final[op.Actor]
			if !stored {
				continue
			}
			out.Outcome, out.Seq = pcOK, seq
			ret = 1 << 62
		}
		bySession[op.Session] = append(bySession[op.Session], porcupine.Operation{
			ClientId: op.Client, Input: op, Output: out, Call: op.Call, Return: ret,
		})
		ops++
	}
	sessions := make([]string, 0, len(bySession))
	for s := range bySession {
		sessions = append(sessions, s)
	}
	sort.Strings(sessions)
	for _, s := range sessions {
		hist := bySession[s]
		res, info := porcupine.CheckOperationsVerbose(model, hist, time.Minute)
		if res == porcupine.Ok {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s(%s)", s, res))
		if firstBad == "" {
			firstBad = pcSmallest(hist, info)
		}
	}
	return ops, bad, firstBad
}

// pcSmallest describes the longest linearizable prefix the checker found
// and the operations concurrent with where it stopped.
func pcSmallest(hist []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := info.PartialLinearizationsOperations()
	var b strings.Builder
	longest := []porcupine.Operation{}
	for _, p := range parts {
		for _, l := range p {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	fmt.Fprintf(&b, "%d operations; longest linearization %d; its last 5:", len(hist), len(longest))
	for _, op := range longest[max(0, len(longest)-5):] {
		fmt.Fprintf(&b, " [%s]", pcModelBase.DescribeOperation(op.Input, op.Output))
	}
	b.WriteString("; next calls:")
	if len(longest) > 0 {
		end := longest[len(longest)-1].Return
		n := 0
		for _, op := range hist {
			if op.Call >= longest[len(longest)-1].Call && op.Call <= end+int64(time.Second) && n < 6 {
				fmt.Fprintf(&b, " [%s @%dms]", pcModelBase.DescribeOperation(op.Input, op.Output), op.Call/1e6)
				n++
			}
		}
	}
	return b.String()
}

// pcChannels are the writers' channels (load from several).
var pcChannels = []string{"web", "slack", "tui"}

// pcFault is one fault and when it was injected.
type pcFault struct {
	name string
	node int
	at   time.Time
}

// pcResult are one run's figures.
type pcResult struct {
	acked, lost, duplicated, unknown, ops int
	linearizable                          bool
	pauses                                map[string]time.Duration
}

// Four writers (their own
// connections, each first on a different node) append with expected
// sequences to 16 sessions and read them back while the stream leader, the
// leader of the views bucket and a follower (restarted with a damaged block
// file) are killed with SIGKILL, the stream leader is partitioned from the
// others and healed, and two of three nodes are killed (loss of quorum)
// and restarted. Every acknowledged append is in the log
// exactly once at the sequence returned, and every session's history of
// appends and reads is linearizable.
func TestProcessClusterSIGKILL(t *testing.T) {
	runs := []bool{false}
	if pcLong() {
		runs = []bool{false, true, false, true}
	}
	for i, always := range runs {
		name := fmt.Sprintf("run%d-sync-default", i)
		if always {
			name = fmt.Sprintf("run%d-sync-always", i)
		}
		t.Run(name, func(t *testing.T) { pcRun(t, always, 1) })
	}
}

// The same faults on a layout of 3 partitions, aimed at the first
// partition's stream and views: every acknowledged append is in its
// session's partition exactly once at the sequence returned, and every
// session's appends are linearizable.
func TestProcessClusterSIGKILLPartitioned(t *testing.T) {
	pcRun(t, false, 3)
}

func pcRun(t *testing.T, syncAlways bool, partitions int) pcResult {
	const (
		nWriters  = 4
		nSessions = 16
		waitBound = 45 * time.Second
	)
	hold := 2 * time.Second // load between faults
	if pcLong() {
		hold = 15 * time.Second
	}
	c := natstest.StartProcessCluster(t, natstest.ProcessOptions{SyncAlways: syncAlways})
	lc := jetstream.LogConfig{Replicas: 3, Partitions: partitions}
	open := clOpenEngine
	if partitions > 1 {
		open = clOpenPartitioned
	}
	var reconnects atomic.Int64
	writers := make([]*clEngine, nWriters)
	for w := range writers {
		writers[w] = open(t, c.URLsFrom(w%c.N()), fmt.Sprintf("writer-%d", w), lc, service.Config{},
			nats.DontRandomize(), nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) }))
	}
	// The faults aim at the first partition's stream and views; every
	// stream and views bucket must be current after each.
	stream := writers[0].log.StreamName()
	views := "KV_" + writers[0].proj.Views().Bucket()
	var current []string
	for i, l := range writers[0].partLogs() {
		proj := writers[0].partProj(i)
		current = append(current, l.StreamName(), "KV_"+proj.Views().Bucket())
		_, stopProj := clRunProjection(t, proj)
		defer stopProj()
	}
	sessions := make([]string, nSessions)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("pc-%02d", i)
	}
	tools := []string{"bash", "grep", "glob", "list_dir", "web_fetch", "todo_write"}

	h := &pcHistory{t0: time.Now()}
	var (
		mu       sync.Mutex
		ackTimes []time.Time
		perW     = make([][]time.Time, nWriters) // each writer's acknowledgements
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eng := writers[w]
			r := rand.New(rand.NewPCG(uint64(w)+1, 20))
			known := map[string]uint64{} // session → last sequence this writer saw
			for i := 0; !stop.Load(); i++ {
				s := sessions[r.IntN(len(sessions))]
				if r.IntN(8) == 0 {
					pcReadOp(h, eng, w, s, known)
					continue
				}
				actor := fmt.Sprintf("w%d-%06d", w, i)
				var cmd events.Payload = events.ToolDisabled{Name: tools[r.IntN(len(tools))]}
				if r.IntN(2) == 0 {
					cmd = events.ToolEnabled{Name: tools[r.IntN(len(tools))]}
				}
				exp := known[s]
				op := pcOp{Client: w, Session: s, Kind: pcAppend, Actor: actor, Expected: exp, Call: h.now()}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := eng.eng.Apply(ctx, s, service.Origin{Channel: pcChannels[w%len(pcChannels)], Actor: actor}, &exp, cmd)
				cancel()
				op.Return = h.now()
				switch {
				case err == nil && res.Last == 0:
					op.Outcome = pcNoop
				case err == nil:
					op.Outcome, op.Seq = pcOK, res.Last
					known[s] = res.Last
					now := time.Now()
					mu.Lock()
					ackTimes = append(ackTimes, now)
					perW[w] = append(perW[w], now)
					mu.Unlock()
				case errors.Is(err, logport.ErrConflict):
					op.Outcome = pcConflict
					pcReadOp(h, eng, w, s, known)
				default:
					op.Outcome = pcUnknown
					t.Logf("+%5.1fs unknown outcome of %s on %s after %.1fs: %v", time.Since(h.t0).Seconds(), actor, s, float64(h.now()-op.Call)/1e9, err)
					pcReadOp(h, eng, w, s, known)
				}
				h.add(op)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	acksSince := func(since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		return len(ackTimes) - sort.Search(len(ackTimes), func(i int) bool { return !ackTimes[i].Before(since) })
	}
	waitAcks := func(what string, since time.Time, n int) {
		t.Helper()
		deadline := time.Now().Add(waitBound)
		for acksSince(since) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: fewer than %d appends acknowledged within %s (leaders now: meta n%d, events n%d, views n%d; -1: none)", what, n, waitBound,
					c.MetaLeader(), c.LeaderOf(stream, time.Second), c.LeaderOf(views, time.Second))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCurrent := func(what string) {
		t.Helper()
		natstest.CheckFor(t, waitBound, 100*time.Millisecond, func() error {
			for _, name := range current {
				if !c.StreamCurrent(name) {
					return fmt.Errorf("%s: replicas of %s not current", what, name)
				}
			}
			return nil
		})
	}
	var faults []pcFault
	mark := func(name string, node int) {
		faults = append(faults, pcFault{name: name, node: node, at: time.Now()})
		t.Logf("+%5.1fs %s n%d (acknowledged so far: %d; leaders: meta n%d, events n%d, views n%d)", time.Since(h.t0).Seconds(), name, node, acksSince(h.t0),
			c.MetaLeader(), c.LeaderOf(stream, time.Second), c.LeaderOf(views, time.Second))
	}
	last := func() time.Time { return faults[len(faults)-1].at }
	settle := func(what string) {
		t.Helper()
		waitAcks(what, last(), 20)
		time.Sleep(time.Until(last().Add(hold))) // load between faults, not synchronisation
	}

	waitAcks("warm-up", h.t0, 50)

	// Fault 1: SIGKILL the stream leader; restart it on its store.
	leader := c.WaitLeaderOf(stream, waitBound)
	mark("kill-stream-leader", leader)
	c.Kill(leader)
	settle("after killing the stream leader")
	c.Start(leader)
	c.WaitFormed(waitBound)
	waitCurrent("after restarting the stream leader")

	// Fault 2: SIGKILL the leader of the views bucket; restart it.
	vl := c.WaitLeaderOf(views, waitBound)
	mark("kill-views-leader", vl)
	c.Kill(vl)
	settle("after killing the views leader")
	c.Start(vl)
	c.WaitFormed(waitBound)
	waitCurrent("after restarting the views leader")

	// Fault 3: partition a node from the other two (through the route
	// proxies), then heal. The long runs cut off the stream leader; the
	// short run a follower that leads neither the stream nor the meta
	// group: cutting off a node that led both has left the majority
	// without a stream leader for more than 45 s in several runs (an open
	// finding, see docs/durability.md), which a run in every CI would turn into
	// a flaky failure.
	pl := c.WaitLeaderOf(stream, waitBound)
	what := "partition-stream-leader"
	if !pcLong() {
		ml := c.MetaLeader()
		for i := 0; i < c.N(); i++ {
			if i != pl && i != ml {
				pl, what = i, "partition-follower"
				break
			}
		}
	}
	mark(what, pl)
	c.Partition(pl)
	settle("after the partition") // the majority acknowledges
	mark("heal", pl)
	c.Heal(pl)
	waitCurrent("after healing the partition")
	settle("after healing the partition")

	// Fault 4: loss of quorum: SIGKILL two of three nodes; appends cannot
	// be acknowledged (their outcome is unknown) until both are back.
	q1 := c.WaitLeaderOf(stream, waitBound)
	q2 := (q1 + 1) % c.N()
	mark("kill-quorum", q1)
	c.Kill(q1)
	c.Kill(q2)
	time.Sleep(2 * time.Second) // the outage lasts: not synchronisation
	mark("restore-quorum", q1)
	c.Start(q1)
	c.Start(q2)
	c.WaitFormed(waitBound)
	waitCurrent("after restoring quorum")
	settle("after restoring quorum")

	// Fault 5 (last: a leader partitioned soon after this restart has
	// been seen to leave the two-node majority without a stream leader
	// for more than 45 s, reported in docs/durability.md): SIGKILL a follower of
	// the stream; damage its newest block file while it is down and
	// restart it: it must repair from the leader and lose nothing.
	sl := c.WaitLeaderOf(stream, waitBound)
	follower := (sl + 1) % c.N()
	mark("kill-follower", follower)
	c.Kill(follower)
	blocks, err := c.StreamBlocks(follower, stream)
	if err != nil || len(blocks) == 0 {
		t.Fatalf("no block files of %s on n%d: %v", stream, follower, err)
	}
	damaged := pcDamage(t, blocks[len(blocks)-1])
	t.Logf("flipped %d bytes in %s", damaged, blocks[len(blocks)-1])
	settle("after killing a follower")
	mark("restart-damaged-follower", follower)
	c.Start(follower)
	c.WaitFormed(waitBound)
	waitCurrent("after restarting the damaged follower")
	settle("after restarting the damaged follower")

	stop.Store(true)
	wg.Wait()
	loadEnd := time.Now()

	// The log, replayed from a fresh connection.
	verifier := open(t, c.URLs(), "verifier", lc, service.Config{})
	var recs []logport.Record
	for _, l := range verifier.partLogs() {
		recs = append(recs, clReplayAll(t, l)...)
	}
	stored := map[string][]logport.Record{}
	for _, r := range recs {
		if r.Err != nil {
			t.Errorf("record %d undecodable: %v", r.Seq, r.Err)
			continue
		}
		stored[r.Envelope.Actor] = append(stored[r.Envelope.Actor], r)
	}
	res := pcResult{pauses: map[string]time.Duration{}}
	final := map[string]uint64{}
	for actor, rs := range stored {
		final[actor] = rs[0].Seq
		if len(rs) > 1 {
			res.duplicated += len(rs) - 1
			t.Errorf("append of %s stored %d times", actor, len(rs))
		}
	}
	for _, op := range h.ops {
		if op.Kind != pcAppend {
			continue
		}
		switch op.Outcome {
		case pcOK:
			res.acked++
			rs := stored[op.Actor]
			if len(rs) == 0 {
				res.lost++
				t.Errorf("acknowledged append of %s (session %s, seq %d) is not in the log", op.Actor, op.Session, op.Seq)
			} else if rs[0].Seq != op.Seq || rs[0].Session != op.Session {
				t.Errorf("acknowledged %s on %s at %d, log has it on %s at %d", op.Actor, op.Session, op.Seq, rs[0].Session, rs[0].Seq)
			}
		case pcUnknown:
			res.unknown++
		}
	}
	sort.Slice(ackTimes, func(i, j int) bool { return ackTimes[i].Before(ackTimes[j]) })
	for i, f := range faults {
		to := loadEnd
		if i+1 < len(faults) {
			to = faults[i+1].at
		}
		all, _ := clMaxGap(ackTimes, f.at, to)
		var one time.Duration // the longest a single writer waited
		for w, ts := range perW {
			g, gs := clMaxGap(ts, f.at, to)
			if g > one && g > 2*time.Second && os.Getenv("PC_DEBUG") != "" {
				from, until := int64(gs.Sub(h.t0)), int64(gs.Add(g).Sub(h.t0))
				for _, op := range h.ops {
					if op.Client == w && op.Return >= from && op.Call <= until {
						t.Logf("debug w%d: %s %s %s exp=%d -> %s %d [%dms..%dms]", w, op.Kind, op.Session, op.Actor, op.Expected, op.Outcome, op.Seq, op.Call/1e6, op.Return/1e6)
					}
				}
			}
			one = max(one, g)
		}
		res.pauses[f.name] = one
		t.Logf("process-fault: %s n%d: longest pause of a writer %.2fs, of all writers %.2fs", f.name, f.node, one.Seconds(), all.Seconds())
	}
	if dump := os.Getenv("PC_DUMP"); dump != "" { // the history, for a look by hand
		f, err := os.Create(dump)
		if err == nil {
			enc := json.NewEncoder(f)
			for _, op := range h.ops {
				_ = enc.Encode(op)
			}
			_ = f.Close()
		}
	}
	// An append answered "conflict" or "no-op" wrote nothing.
	for _, op := range h.ops {
		if op.Kind == pcAppend && (op.Outcome == pcConflict || op.Outcome == pcNoop) {
			if seq, ok := final[op.Actor]; ok {
				t.Errorf("append of %s on %s was answered %s but is stored at %d", op.Actor, op.Session, op.Outcome, seq)
			}
		}
	}
	// The appends (compare-and-set on the session's last sequence) are
	// the engine's guarantee: their history must be linearizable.
	appends := &pcHistory{t0: h.t0}
	for _, op := range h.ops {
		if op.Kind == pcAppend {
			appends.ops = append(appends.ops, op)
		}
	}
	ops, bad, first := pcCheck(t, pcLenientModel, appends, final)
	res.ops = ops
	res.linearizable = len(bad) == 0
	if !res.linearizable {
		t.Errorf("the appends of %d sessions are not linearizable: %v; first: %s", len(bad), bad, first)
	}
	// Reported, not failed: with the reads of the stream leader (which a
	// leader cut off by a partition may still answer, stale, until it
	// steps down), and with every conflict taken at its word (the engine
	// decides a conflict on reads a lagging replica may answer).
	allOps, readBad, readFirst := pcCheck(t, pcLenientModel, h, final)
	if len(readBad) > 0 {
		t.Logf("process-reads: %d sessions not linearizable with their reads: %v; first: %s", len(readBad), readBad, readFirst)
	}
	_, strictBad, strictFirst := pcCheck(t, pcModel, appends, final)
	if len(strictBad) > 0 {
		t.Logf("process-strict: %d sessions have a conflict reported while the session was at the expected sequence: %v; first: %s", len(strictBad), strictBad, strictFirst)
	}
	t.Logf("process-figures: sync_always=%v acknowledged=%d lost=%d duplicated=%d unknown=%d append_operations=%d linearizable=%v with_reads(%d ops)=%v strict_conflicts=%v reconnects=%d",
		syncAlways, res.acked, res.lost, res.duplicated, res.unknown, res.ops, res.linearizable, allOps, len(readBad) == 0, len(strictBad) == 0, reconnects.Load())
	if res.acked < 200 {
		t.Errorf("only %d appends acknowledged: the load did not hold", res.acked)
	}
	return res
}

// pcReadOp reads the session's last event from the stream leader (a
// JetStream message get, which only the leader answers; direct gets may be
// answered by a replica that lags) as a recorded operation, and updates
// what the writer knows of the session.
func pcReadOp(h *pcHistory, eng *clEngine, w int, s string, known map[string]uint64) {
	op := pcOp{Client: w, Session: s, Kind: pcRead, Call: h.now()}
	l := eng.logOf(s)
	req, _ := json.Marshal(map[string]string{"last_by_subj": l.Subject(s)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	m, err := eng.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+l.StreamName(), req)
	cancel()
	op.Return = h.now()
	if err != nil {
		return // a failed read has no effect: nothing to check
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code    int `json:"code"`
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		op.Log = ""
	case resp.Error != nil || resp.Message == nil:
		return // no leader now, or another refusal: no effect
	default:
		env, err := events.Decode(resp.Message.Data)
		if err != nil {
			return
		}
		op.Log = env.Actor + "@" + strconv.FormatUint(resp.Message.Seq, 10)
	}
	op.Outcome = pcOK
	known[s] = pcLastSeq(op.Log)
	h.add(op)
}

// pcDamage flips bytes in the middle of a block file (the node is down)
// and returns how many.
func pcDamage(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 64 {
		t.Fatalf("block %s has only %d bytes", path, len(b))
	}
	n := 0
	for i := len(b) / 2; i < len(b)/2+32; i++ {
		b[i] ^= 0xff
		n++
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// A follower's death must not stall the writers connected to
// it for the per-attempt publish timeout: their connections fail over in
// milliseconds and the appends in flight are re-sent at once (same ULIDs,
// deduplicated). Each round, eight writers connected first to a follower
// of the stream append in a loop and the follower is SIGKILLed (then
// restarted). Every writer acknowledges again after each kill and no
// append fails; the longest pause a writer sees is logged as the figure
// (a measurement, not an assertion: timing under a loaded machine is not
// a test's to judge). Before the re-send it was the 5 s attempt timeout.
func TestProcessClusterFollowerKillPause(t *testing.T) {
	rounds := 3
	if pcLong() {
		rounds = 10
	}
	c := natstest.StartProcessCluster(t, natstest.ProcessOptions{})
	lc := jetstream.LogConfig{Replicas: 3}
	setup := clOpenEngine(t, c.URLs(), "setup", lc, service.Config{})
	stream := setup.log.StreamName()
	var worst time.Duration
	var pauses []string
	var fails int64
	for r := 0; r < rounds; r++ {
		leader := c.WaitLeaderOf(stream, 45*time.Second)
		follower := (leader + 1) % c.N()
		p, f := pcFollowerKillRound(t, c, lc, stream, follower, r)
		worst = max(worst, p)
		fails += f
		pauses = append(pauses, fmt.Sprintf("%.2fs", p.Seconds()))
		c.Start(follower)
		c.WaitFormed(45 * time.Second)
		natstest.CheckFor(t, 45*time.Second, 100*time.Millisecond, func() error {
			if !c.StreamCurrent(stream) {
				return errors.New("stream replicas not current")
			}
			return nil
		})
	}
	t.Logf("follower-kill: rounds=%d pauses=%s worst=%.2fs failed_applies=%d", rounds, strings.Join(pauses, ","), worst.Seconds(), fails)
	if fails != 0 {
		t.Errorf("%d appends failed across follower kills: a re-sent append must complete", fails)
	}
}

// pcFollowerKillRound runs eight writers connected first to follower,
// SIGKILLs it under their load and returns the longest pause of a writer
// and how many of their applies failed.
func pcFollowerKillRound(t *testing.T, c *natstest.ProcessCluster, lc jetstream.LogConfig, stream string, follower, round int) (time.Duration, int64) {
	t.Helper()
	const nWriters = 8
	writers := make([]*clEngine, nWriters)
	for w := range writers {
		writers[w] = clOpenEngine(t, c.URLsFrom(follower), fmt.Sprintf("writer-%d-%d", round, w), lc, service.Config{}, nats.DontRandomize())
	}
	var (
		mu    sync.Mutex
		times = make([][]time.Time, nWriters)
		stop  atomic.Bool
		wg    sync.WaitGroup
		fails atomic.Int64
		errs  []string // the first failures, for the log
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tools := []string{"bash", "grep"}
			for i := 0; !stop.Load(); i++ {
				var cmd events.Payload = events.ToolDisabled{Name: tools[i%2]}
				if i%4 >= 2 {
					cmd = events.ToolEnabled{Name: tools[i%2]}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := writers[w].eng.Apply(ctx, fmt.Sprintf("fk-%d", w), service.Origin{Channel: "web", Actor: fmt.Sprintf("r%d-w%d-%d", round, w, i)}, nil, cmd)
				cancel()
				if err != nil {
					fails.Add(1)
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, fmt.Sprintf("writer %d at %s: %v", w, time.Now().Format("15:04:05.000"), err))
					}
					mu.Unlock()
					continue
				}
				mu.Lock()
				times[w] = append(times[w], time.Now())
				mu.Unlock()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		for w, ts := range times {
			if len(ts) < 20 {
				return fmt.Errorf("writer %d: %d appends acknowledged", w, len(ts))
			}
		}
		return nil
	})
	if l := c.WaitLeaderOf(stream, 45*time.Second); l == follower {
		t.Fatalf("n%d became the stream leader: not a follower kill", follower)
	}
	at := time.Now()
	c.Kill(follower)
	// Every writer acknowledges again, well after the kill.
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		for w, ts := range times {
			if len(ts) == 0 || ts[len(ts)-1].Before(at.Add(time.Second)) {
				return fmt.Errorf("writer %d has not acknowledged since the kill", w)
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Logf("round %d (n%d killed at %s): append failed: %s", round, follower, at.Format("15:04:05.000"), e)
	}
	var p time.Duration
	for _, ts := range times {
		g, _ := clMaxGap(ts, at, time.Now())
		p = max(p, g)
	}
	return p, fails.Load()
}
