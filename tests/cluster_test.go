// Clustered JetStream faults under append load, and concurrent writers with
// deliberate conflicts. Nothing here mocks NATS. Helpers are prefixed cl.

package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/partition"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// clEngine is one engine process: its own connection, log, projection
// handle (for reads; at most one runs) and service. Over a partitioned
// layout log and proj are the first partition's, and logs and projs hold
// every partition's.
type clEngine struct {
	nc    *nats.Conn
	log   *jetstream.Log
	proj  *projection.Projection
	eng   *service.Engine
	logs  []*jetstream.Log
	projs []*projection.Projection
}

// logOf is the log holding session.
func (e *clEngine) logOf(session string) *jetstream.Log {
	if len(e.logs) < 2 {
		return e.log
	}
	return e.logs[events.Partition(session, len(e.logs))]
}

// partLogs are the engine's logs: one, or one per partition.
func (e *clEngine) partLogs() []*jetstream.Log {
	if e.logs == nil {
		return []*jetstream.Log{e.log}
	}
	return e.logs
}

// partProj is the projection handle of partLogs()[i].
func (e *clEngine) partProj(i int) *projection.Projection {
	if e.projs == nil {
		return e.proj
	}
	return e.projs[i]
}

// clOpenPartitioned is clOpenEngine over the lc.Partitions partitions of
// a layout: a log and a projection handle per partition, one service
// routing each session to its partition.
func clOpenPartitioned(t *testing.T, url, name string, lc jetstream.LogConfig, sc service.Config, opts ...nats.Option) *clEngine {
	t.Helper()
	nc := natstest.Connect(t, url, append([]nats.Option{nats.Name(name)}, opts...)...)
	ctx := context.Background()
	e := &clEngine{nc: nc}
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		var err error
		e.logs, err = jetstream.OpenPartitions(ctx, nc, lc)
		return err
	})
	ports := make([]service.Ports, len(e.logs))
	for i, l := range e.logs {
		var proj *projection.Projection
		natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
			var err error
			proj, err = projection.Open(ctx, l, projection.Config{})
			return err
		})
		e.projs = append(e.projs, proj)
		ports[i] = service.JetStreamPorts(l, proj)
	}
	routed, err := partition.NewPorts(ports...)
	if err != nil {
		t.Fatal(err)
	}
	e.log, e.proj = e.logs[0], e.projs[0]
	e.eng = service.NewFromPorts(routed, resolver.Default(), sc)
	return e
}

// clOpenEngine connects to url and opens the log, the views and an engine,
// retrying while the cluster has no leader for the JetStream API yet.
func clOpenEngine(t *testing.T, url, name string, lc jetstream.LogConfig, sc service.Config, opts ...nats.Option) *clEngine {
	t.Helper()
	nc := natstest.Connect(t, url, append([]nats.Option{nats.Name(name)}, opts...)...)
	var (
		l    *jetstream.Log
		proj *projection.Projection
	)
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		var err error
		if l == nil {
			if l, err = jetstream.OpenLog(context.Background(), nc, lc); err != nil {
				return err
			}
		}
		proj, err = projection.Open(context.Background(), l, projection.Config{})
		return err
	})
	return &clEngine{nc: nc, log: l, proj: proj, eng: service.New(l, proj, resolver.Default(), sc)}
}

// clRunProjection runs p until the test ends. Run returns only when its
// context ends: it restarts its own feed after transient failures, which
// the returned interruptions func reports (Projection.Interruptions: how
// many times the feed failed and was started again, and the last error).
func clRunProjection(t *testing.T, p *projection.Projection) (interruptions func() (uint64, error), stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projection Run returned %v, want nil at the end of its context", err)
		}
	})
	t.Cleanup(stop)
	return p.Interruptions, stop
}

// clReplayAll reads the whole log with the ordered consumer.
func clReplayAll(t *testing.T, l *jetstream.Log) []logport.Record {
	t.Helper()
	var recs []logport.Record
	var err error
	natstest.CheckFor(t, 30*time.Second, 500*time.Millisecond, func() error {
		recs = recs[:0]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = l.Replay(ctx, 0, func(r logport.Record) error {
			recs = append(recs, r)
			return nil
		})
		return err
	})
	return recs
}

// clStatesMatchLog checks that each returned state equals the fold of its session's
// log up to the sequence it was returned for: what Apply reports is what
// the log holds. want maps session → sequence → state returned there.
func clStatesMatchLog(recs []logport.Record, want map[string]map[uint64]aggregate.State) (checked, bad int, first string) {
	sts := map[string]aggregate.State{}
	for _, r := range recs {
		st, ok := sts[r.Session]
		if !ok {
			st = aggregate.State{Session: r.Session}
		}
		st.ApplyStored(aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}) //nolint:errcheck // recorded in st
		sts[r.Session] = st
		if w, ok := want[r.Session][r.Seq]; ok {
			checked++
			if !reflect.DeepEqual(w, st) {
				bad++
				if first == "" {
					first = fmt.Sprintf("session %s at %d:\nreturned %+v\nlog fold %+v", r.Session, r.Seq, w, st)
				}
			}
		}
	}
	return checked, bad, first
}

// clViewsEqualFold compares every session's stored view (one KV get) with
// the fold, and the list of sessions with views with the fold's sessions.
func clViewsEqualFold(ctx context.Context, p *projection.Projection, want map[string]aggregate.State) error {
	got, err := p.Sessions(ctx)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("projection has %d sessions, fold has %d", len(got), len(want))
	}
	for s, w := range want {
		v, err := p.Read(ctx, s, projection.ReadOptions{})
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(v, w) {
			return fmt.Errorf("session %s:\nview %+v\nfold %+v", s, v, w)
		}
	}
	return nil
}

// clViewsDiffer counts the sessions whose stored view differs from the fold.
func clViewsDiffer(t *testing.T, p *projection.Projection, want map[string]aggregate.State, recs []logport.Record) int {
	t.Helper()
	n := 0
	for s, w := range want {
		v, err := p.Read(context.Background(), s, projection.ReadOptions{})
		if err != nil {
			t.Errorf("read view %s: %v", s, err)
			n++
			continue
		}
		if !reflect.DeepEqual(v, w) {
			n++
			skipped := "more than one event missing"
			if m := clMissingFrom(recs, s, v); len(m) > 0 && len(m) <= 3 {
				skipped = fmt.Sprintf("the fold without event %v equals the view", m)
			} else if len(m) > 3 {
				skipped = fmt.Sprintf("one of %d events missing", len(m))
			}
			t.Logf("view of %s: last seq %d, %d events; fold: last seq %d, %d events; %s", s, v.LastSeq, v.Events, w.LastSeq, w.Events, skipped)
		}
	}
	return n
}

// clMissingFrom finds which one event of the session, left out of the fold,
// yields the view (a diagnostic: "the projection skipped event N").
func clMissingFrom(recs []logport.Record, session string, view aggregate.State) []uint64 {
	var mine []logport.Record
	for _, r := range recs {
		if r.Session == session {
			mine = append(mine, r)
		}
	}
	var out []uint64
	for skip := range mine {
		st := aggregate.State{Session: session}
		for i, r := range mine {
			if i != skip {
				st.Apply(r.Seq, r.Envelope)
			}
		}
		if reflect.DeepEqual(st, view) {
			out = append(out, mine[skip].Seq)
		}
	}
	return out
}

// clPayloadName renders a payload for comparisons: type and tool name.
func clPayloadName(p events.Payload) string {
	v, ok := events.PayloadValue(p)
	if !ok {
		return fmt.Sprintf("%T", p)
	}
	switch x := v.(type) {
	case events.ToolDisabled:
		return "disable:" + x.Name
	case events.ToolEnabled:
		return "enable:" + x.Name
	}
	return string(v.EventType())
}

// on is a *bool (also used by other files of this package).
func on(b bool) *bool { return &b }

// ---------------------------------------------------------------------------
// Cluster faults under load.

// clusterAck is one acknowledged Apply of the cluster test. Each Apply has
// a unique actor, so its event is found in the log by actor; its ULID is
// the one stored there.
type clusterAck struct {
	writer  int
	actor   string
	channel string
	session string
	cmd     string
	seq     uint64
	dup     bool
	at      time.Time
	state   aggregate.State
}

type clFault struct {
	kind string
	node int
	at   time.Time
}

// clMaxGap is the longest pause between consecutive acknowledgements from
// the last one before from to the first one at or after to (so a window
// with no acknowledgement at all spans to the next one).
func clMaxGap(times []time.Time, from, to time.Time) (gap time.Duration, start time.Time) {
	idx := sort.Search(len(times), func(i int) bool { return !times[i].Before(from) })
	prev := from
	if idx > 0 {
		prev = times[idx-1]
	}
	for i := idx; i < len(times); i++ {
		if g := times[i].Sub(prev); g > gap {
			gap, start = g, prev
		}
		prev = times[i]
		if !times[i].Before(to) {
			return gap, start
		}
	}
	if g := to.Sub(prev); g > gap {
		gap, start = g, prev // nothing acknowledged until the end
	}
	return gap, start
}

// The engine on a JetStream cluster, stream and views at three replicas;
// every acknowledged append stored exactly once (CAS and ULID dedupe across
// a leader failover); the projection equal to a fresh fold of the log: shut
// down the stream leader (gracefully, in process)
// under append load from three channels, restart it on its store,
// partition the next leader from the other two nodes and heal it; appends
// resume within a bounded time after each fault and the engines reconnect
// by themselves.
func TestClusterLeaderKillUnderLoad(t *testing.T) {
	const (
		account      = "$G"
		nSessions    = 50
		perChannel   = 2
		applyTimeout = 30 * time.Second
		resumeBound  = 30 * time.Second // election timeout (4–9 s) + publish timeout (5 s) + back-off, with room
		waitBound    = 45 * time.Second
	)
	c := natstest.Cluster(t, 3)
	lc := jetstream.LogConfig{Replicas: 3}
	channels := []string{"web", "slack", "tui"}
	// Each writer toggles its own two tools, so it knows what each command
	// changes; sessions are shared by all writers.
	tools := [][]string{
		{"bash", "grep"}, {"glob", "list_dir"}, {"web_fetch", "todo_write"},
		{"read_file", "write_file"}, {"edit_file", "notebook_edit"}, {"memory_read", "memory_write"},
	}
	nWriters := len(channels) * perChannel
	sessions := make([]string, nSessions)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("sess-%02d", i)
	}

	var reconnects, disconnects atomic.Int64
	writers := make([]*clEngine, nWriters)
	for w := range writers {
		// Writer w connects to node w%3 first and fails over to the
		// others, so every fault hits some writer's connection.
		writers[w] = clOpenEngine(t, c.URLsFrom(w%3), fmt.Sprintf("writer-%d", w), lc, service.Config{},
			nats.DontRandomize(),
			nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) }),
			nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
	}
	stream := writers[0].log.StreamName()
	if info, err := writers[0].log.JetStream().Stream(context.Background(), stream); err != nil {
		t.Fatal(err)
	} else if r := info.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("stream %s has %d replicas, want 3", stream, r)
	}
	if st, err := writers[0].proj.Views().KV().Status(context.Background()); err != nil {
		t.Fatal(err)
	} else if st.Config().Replicas != 3 {
		t.Fatalf("views bucket has %d replicas, want 3", st.Config().Replicas)
	}
	projInterruptions, stopProj := clRunProjection(t, writers[0].proj)

	var (
		mu       sync.Mutex
		acks     []clusterAck
		failed   = map[string]error{} // actor → error of an Apply that was not acknowledged
		noops    int
		stopLoad atomic.Bool
		wg       sync.WaitGroup
	)
	loadStart := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env, ch := writers[w], channels[w%len(channels)]
			r := rand.New(rand.NewPCG(uint64(w)+1, 27))
			disabled := map[string]map[string]bool{} // session → my tool → disabled
			for i := 0; !stopLoad.Load(); i++ {
				s := sessions[r.IntN(len(sessions))]
				tool := tools[w][r.IntN(len(tools[w]))]
				var cmd events.Payload = events.ToolDisabled{Name: tool}
				if disabled[s][tool] {
					cmd = events.ToolEnabled{Name: tool}
				}
				actor := fmt.Sprintf("%s-w%d-%06d", ch, w, i)
				ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
				res, err := env.eng.Apply(ctx, s, service.Origin{Channel: ch, Actor: actor}, nil, cmd)
				cancel()
				now := time.Now()
				if err != nil {
					mu.Lock()
					failed[actor] = err
					if len(failed) <= 20 {
						t.Logf("+%5.1fs %s on %s failed: %v", now.Sub(loadStart).Seconds(), actor, s, err)
					}
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if disabled[s] == nil {
					disabled[s] = map[string]bool{}
				}
				for _, tl := range tools[w] {
					disabled[s][tl] = slices.Contains(res.State.Intent.Disabled, tl)
				}
				mu.Lock()
				if res.Last == 0 {
					noops++ // nothing to change in the state it was decided on
				} else {
					acks = append(acks, clusterAck{writer: w, actor: actor, channel: ch, session: s, cmd: clPayloadName(cmd),
						seq: res.Last, dup: res.Duplicate, at: now, state: res.State})
				}
				mu.Unlock()
			}
		}()
	}
	defer func() { stopLoad.Store(true); wg.Wait() }()

	acksAfter := func(since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for i := len(acks) - 1; i >= 0 && !acks[i].at.Before(since); i-- {
			n++
		}
		return n
	}
	waitAcks := func(what string, since time.Time, n int) {
		t.Helper()
		deadline := time.Now().Add(waitBound)
		for acksAfter(since) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: fewer than %d appends acknowledged within %s", what, n, waitBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCurrent := func(what string, node int) {
		t.Helper()
		deadline := time.Now().Add(waitBound)
		for !c.StreamCurrent(node, account, stream) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: n%d's replica of %s not current within %s", what, node, stream, waitBound)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Watch the leaders of the stream, the views and the meta group.
	watchDone := make(chan struct{})
	watchStop := make(chan struct{})
	go func() {
		defer close(watchDone)
		prev := ""
		for {
			cur := fmt.Sprintf("meta=n%d events=n%d views=n%d", c.MetaLeader(), c.StreamLeader(account, stream), c.StreamLeader(account, "KV_"+writers[0].proj.Views().Bucket()))
			if cur != prev {
				t.Logf("+%5.1fs leaders: %s", time.Since(loadStart).Seconds(), strings.ReplaceAll(cur, "n-1", "none"))
				prev = cur
			}
			select {
			case <-watchStop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	stopWatch := sync.OnceFunc(func() { close(watchStop); <-watchDone })
	defer stopWatch()
	var faults []clFault
	mark := func(kind string, node int) {
		faults = append(faults, clFault{kind: kind, node: node, at: time.Now()})
		t.Logf("+%5.1fs %s n%d (acknowledged so far: %d)", time.Since(loadStart).Seconds(), kind, node, acksAfter(loadStart))
	}
	last := func() time.Time { return faults[len(faults)-1].at }

	// waitLeaderNot waits until the nodes that can be reached elect a
	// stream leader other than node, and returns it.
	waitLeaderNot := func(what string, node int) int {
		t.Helper()
		deadline := time.Now().Add(waitBound)
		for {
			if l := c.StreamLeader(account, stream); l >= 0 && l != node {
				return l
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no stream leader other than n%d within %s", what, node, waitBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Between faults the load runs until a number of appends is
	// acknowledged (an event, not a fixed sleep): steadyAcks before
	// the first fault, faultAcks after each fault's recovery event.
	const steadyAcks, faultAcks = 300, 150

	// Warm up.
	waitAcks("warm-up", loadStart, steadyAcks)

	// Fault 1: shut down the stream leader mid-load; the others elect a
	// new one and appends resume.
	killed := c.WaitStreamLeader(account, stream, waitBound)
	mark("stop-leader", killed)
	c.Stop(killed)
	elected := waitLeaderNot("after stopping the leader", killed)
	t.Logf("+%5.1fs new stream leader n%d", time.Since(loadStart).Seconds(), elected)
	waitAcks("after stopping the leader", last(), faultAcks)

	// Fault 2: restart it on its store; it rejoins and catches up.
	mark("restart", killed)
	c.Start(killed)
	c.WaitFormed(waitBound)
	waitCurrent("after restart", killed)
	waitAcks("after restart", last(), faultAcks)

	// Fault 3: partition the current leader (another node than the one
	// killed) from the other two, for longer than an election timeout.
	target := c.WaitStreamLeader(account, stream, waitBound)
	if target == killed {
		target = (killed + 1) % c.N()
	}
	mark("partition", target)
	c.Partition(target)
	// The partition lasts past an election: the majority elects another
	// leader, and appends go on through it.
	elected = waitLeaderNot("after the partition", target)
	t.Logf("+%5.1fs new stream leader n%d", time.Since(loadStart).Seconds(), elected)
	waitAcks("after the partition", last(), faultAcks)

	// Fault 4: heal; the node rejoins as a follower and catches up.
	mark("heal", target)
	c.Heal(target)
	waitCurrent("after heal", target)
	waitAcks("after heal", last(), faultAcks)

	stopLoad.Store(true)
	wg.Wait()
	loadEnd := time.Now()
	stopWatch()

	// Every replica converges.
	for i := 0; i < c.N(); i++ {
		waitCurrent("after the load", i)
	}

	verifier := clOpenEngine(t, c.URLs(), "verifier", lc, service.Config{})
	recs := clReplayAll(t, verifier.log)
	byActor := map[string][]logport.Record{}
	byULID := map[string]int{}
	undecodable := 0
	for _, r := range recs {
		if r.Err != nil {
			undecodable++
			t.Errorf("record %d undecodable: %v", r.Seq, r.Err)
			continue
		}
		byActor[r.Envelope.Actor] = append(byActor[r.Envelope.Actor], r)
		byULID[r.Envelope.ID]++
	}
	duplicated := 0
	for id, n := range byULID {
		if n > 1 {
			duplicated += n - 1
			t.Errorf("event %s stored %d times", id, n)
		}
	}
	lost, reapplied := 0, 0
	acked := map[string]bool{}
	ackTimes := make([]time.Time, 0, len(acks))
	returned := map[string]map[uint64]aggregate.State{}
	dupAcks := 0
	for _, a := range acks {
		acked[a.actor] = true
		ackTimes = append(ackTimes, a.at)
		if a.dup {
			dupAcks++
		}
		if returned[a.session] == nil {
			returned[a.session] = map[uint64]aggregate.State{}
		}
		returned[a.session][a.seq] = a.state
		rs := byActor[a.actor]
		switch {
		case len(rs) == 0:
			lost++
			t.Errorf("acknowledged event of %s (session %s, seq %d) is not in the log", a.actor, a.session, a.seq)
			continue
		case len(rs) > 1:
			reapplied += len(rs) - 1
			t.Errorf("command of %s stored %d times (seqs %d, %d, ...)", a.actor, len(rs), rs[0].Seq, rs[1].Seq)
		}
		r := rs[0]
		if r.Seq != a.seq || r.Session != a.session || r.Envelope.Channel != a.channel || clPayloadName(r.Envelope.Payload) != a.cmd {
			t.Errorf("acknowledged %s %s on %s at %d, log has %s on %s at %d (channel %s)",
				a.actor, a.cmd, a.session, a.seq, clPayloadName(r.Envelope.Payload), r.Session, r.Seq, r.Envelope.Channel)
		}
	}
	unackedStored := 0
	for actor, rs := range byActor {
		if !acked[actor] {
			unackedStored += len(rs)
		}
	}
	sort.Slice(ackTimes, func(i, j int) bool { return ackTimes[i].Before(ackTimes[j]) })

	// What each Apply returned is the fold of the log up to its event.
	checked, bad, firstBad := clStatesMatchLog(recs, returned)
	if bad > 0 {
		t.Errorf("%d of %d returned states differ from the log's fold; first: %s", bad, checked, firstBad)
	}

	// Reads of one session (batched direct gets, served by any replica)
	// agree with the replay.
	fold := natstest.FoldRecords(recs)
	perSession := map[string][]string{}
	for _, r := range recs {
		perSession[r.Session] = append(perSession[r.Session], fmt.Sprintf("%d/%s", r.Seq, r.Envelope.ID))
	}
	natstest.CheckFor(t, 30*time.Second, 500*time.Millisecond, func() error {
		for s, want := range perSession {
			got, err := verifier.log.ReadSession(context.Background(), s, 0, 0)
			if err != nil {
				return err
			}
			ids := make([]string, len(got))
			for i, r := range got {
				ids[i] = fmt.Sprintf("%d/%s", r.Seq, r.Envelope.ID)
			}
			if !slices.Equal(ids, want) {
				return fmt.Errorf("ReadSession(%s) = %d events, replay has %d", s, len(ids), len(want))
			}
		}
		return nil
	})

	// The projection (one engine runs it) equals a fresh fold. Views are
	// read with KV gets, which any replica may answer: allow followers a
	// moment to catch up.
	lastSeq := recs[len(recs)-1].Seq
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := writers[0].proj.WaitApplied(wctx, lastSeq); err != nil {
		n, perr := projInterruptions()
		t.Fatalf("projection: %v (its feed was interrupted %d times, last error %v)", err, n, perr)
	}
	var projErr error
	for deadline := time.Now().Add(30 * time.Second); ; {
		projErr = clViewsEqualFold(context.Background(), writers[0].proj, fold)
		if projErr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	stopProj()
	applied, folded := writers[0].proj.Applied(), writers[0].proj.Folded()
	viewsBad := 0
	if projErr != nil {
		viewsBad = clViewsDiffer(t, writers[0].proj, fold, recs)
		// Tell a wrong log from a wrong incremental fold: a projection
		// rebuilt from the same log under a fresh durable.
		rebuilt, err := projection.Open(context.Background(), verifier.log, projection.Config{Durable: "rebuild", Bucket: "REBUILD"})
		if err != nil {
			t.Fatal(err)
		}
		_, stopRebuild := clRunProjection(t, rebuilt)
		rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = rebuilt.WaitApplied(rctx, lastSeq)
		rcancel()
		if err == nil {
			natstest.CheckFor(t, 30*time.Second, 500*time.Millisecond, func() error {
				return clViewsEqualFold(context.Background(), rebuilt, fold)
			})
		}
		stopRebuild()
		t.Errorf("the live projection differs from the fold of the log in %d of %d sessions (each view has the right last sequence but misses events; applied %d, folded %d); "+
			"a projection rebuilt from the same log equals the fold (%v), so the log is right and the live feed skipped events across the faults. First difference: %v",
			viewsBad, len(fold), applied, folded, err, projErr)
	}

	// Appends resumed after each fault.
	var maxResume time.Duration
	var names []string
	for i, f := range faults {
		to := loadEnd
		if i+1 < len(faults) {
			to = faults[i+1].at
		}
		g, gs := clMaxGap(ackTimes, f.at, to)
		maxResume = max(maxResume, g)
		names = append(names, fmt.Sprintf("%s(n%d)", f.kind, f.node))
		t.Logf("cluster-fault: %s n%d at +%.1fs: longest pause between acknowledged appends %.2fs (from +%.1fs)",
			f.kind, f.node, f.at.Sub(loadStart).Seconds(), g.Seconds(), gs.Sub(loadStart).Seconds())
		if g > resumeBound {
			t.Errorf("after %s n%d appends paused %.1fs, more than %s", f.kind, f.node, g.Seconds(), resumeBound)
		}
	}
	steady, _ := clMaxGap(ackTimes, loadStart, faults[0].at)
	pr, perr := projInterruptions()
	load := loadEnd.Sub(loadStart)
	t.Logf("cluster-figures: acknowledged=%d lost=%d duplicated=%d max_resume=%.1fs faults=%s",
		len(acks), lost, duplicated+reapplied, maxResume.Seconds(), strings.Join(names, ","))
	t.Logf("cluster-projection: sessions=%d views_differing=%d applied=%d folded=%d", len(fold), viewsBad, applied, folded)
	t.Logf("cluster-load: writers=%d channels=%s sessions=%d load=%.1fs rate=%.0f/s stored=%d unacked_stored=%d failed_applies=%d noops=%d duplicate_acks=%d reconnects=%d disconnects=%d projection_interruptions=%d steady_max_gap=%.3fs",
		nWriters, strings.Join(channels, "+"), nSessions, load.Seconds(), float64(len(acks))/load.Seconds(),
		len(recs), unackedStored, len(failed), noops, dupAcks, reconnects.Load(), disconnects.Load(), pr, steady.Seconds())
	if perr != nil {
		t.Logf("cluster-load: last projection interruption: %v", perr)
	}
	if len(acks) < 500 {
		t.Errorf("only %d appends acknowledged: the load did not hold", len(acks))
	}
	if reconnects.Load() == 0 {
		t.Errorf("no writer connection reconnected: the leader kill did not hit a client")
	}
	if lost+duplicated+reapplied+undecodable > 0 {
		t.Errorf("lost %d, duplicated %d, re-applied %d, undecodable %d", lost, duplicated, reapplied, undecodable)
	}
}

// ---------------------------------------------------------------------------
// Concurrency with hot sessions.

type clHotAck struct {
	actor       string
	session     string
	first, last uint64
	state       aggregate.State
}

// Many goroutines on three engines (channels web, slack, tui, each its
// own connection, as three processes would be) write many sessions, with
// deliberate conflicts on three hot sessions. Retry-safe commands
// (ToolDisabled, ToolEnabled, WebSearchSet) are retried by the engine; a
// command with a stale expected sequence, or a turn command that lost a
// race, returns ErrConflict and writes nothing; the final view of every
// session equals a serial fold of the log. Run it with -race.
func TestConcurrentHotSessions(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	channels := []string{"web", "slack", "tui"}
	var retried, returnedConflicts atomic.Int64
	hooks := service.Hooks{Conflict: func(r bool) {
		if r {
			retried.Add(1)
		} else {
			returnedConflicts.Add(1)
		}
	}}
	envs := make([]*clEngine, len(channels))
	for i, ch := range channels {
		envs[i] = clOpenEngine(t, srv.ClientURL(), "engine-"+ch, jetstream.LogConfig{}, service.Config{Hooks: hooks})
	}
	_, stopProj := clRunProjection(t, envs[0].proj)

	hot := []string{"hot-a", "hot-b", "hot-c"}
	var cold []string
	for i := 0; i < 30; i++ {
		cold = append(cold, fmt.Sprintf("cold-%02d", i))
	}
	names := []string{"bash", "grep", "glob", "list_dir", "web_fetch", "todo_write"}
	presets := append(resolver.Default().PresetNames(), "")
	tri := []*bool{nil, on(true), on(false)}
	const (
		perEngine = 6
		ops       = 30
	)

	var (
		mu                                           sync.Mutex
		acks                                         []clHotAck
		staleTried, pinnedConflicts, turnConflicts   int
		safeExhausted, noops, retriesSeen, batchAcks int
	)
	var wg sync.WaitGroup
	for g := 0; g < perEngine*len(envs); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env, ch := envs[g%len(envs)], channels[g%len(envs)]
			r := rand.New(rand.NewPCG(uint64(g)+1, 23))
			for i := 0; i < ops; i++ {
				s := cold[r.IntN(len(cold))]
				if r.IntN(2) == 0 {
					s = hot[r.IntN(len(hot))]
				}
				origin := service.Origin{Channel: ch, Actor: fmt.Sprintf("g%02d-%03d", g, i)}
				var (
					cmds     []events.Payload
					expected *uint64
					kind     string
				)
				switch k := r.IntN(10); {
				case k < 6:
					kind = "safe"
					switch r.IntN(3) {
					case 0:
						cmds = []events.Payload{events.ToolDisabled{Name: names[r.IntN(len(names))]}}
					case 1:
						cmds = []events.Payload{events.ToolEnabled{Name: names[r.IntN(len(names))]}}
					default:
						cmds = []events.Payload{events.WebSearchSet{Enabled: tri[r.IntN(3)]}}
					}
				case k == 6:
					kind = "safe-batch" // two events, one atomic append
					cmds = []events.Payload{events.ToolDisabled{Name: names[r.IntN(len(names))]}, events.WebSearchSet{Enabled: tri[r.IntN(3)]}}
				case k == 7:
					kind = "pinned" // expects the sequence just read: may lose a race
					last, err := env.log.LastSeq(ctx, s)
					if err != nil {
						t.Error(err)
						return
					}
					expected = &last
					cmds = []events.Payload{events.PresetChosen{Preset: presets[r.IntN(len(presets))]}}
				case k == 8:
					kind = "stale" // expects a sequence the session has left
					last, err := env.log.LastSeq(ctx, s)
					if err != nil {
						t.Error(err)
						return
					}
					if last == 0 {
						kind = "safe"
						cmds = []events.Payload{events.ToolDisabled{Name: names[r.IntN(len(names))]}}
						break
					}
					stale := last - 1
					expected = &stale
					cmds = []events.Payload{events.ToolDisabled{Name: names[r.IntN(len(names))]}}
				default:
					kind = "turn" // not retry-safe: a lost race is returned
					cmds = []events.Payload{events.TurnStarted{}}
				}
				res, err := env.eng.Apply(ctx, s, origin, expected, cmds...)
				mu.Lock()
				switch {
				case err == nil && kind == "stale":
					t.Errorf("%s: Apply with stale expected sequence %d on %s succeeded: %+v", origin.Actor, *expected, s, res)
				case err == nil:
					retriesSeen += res.Retries
					if res.Last == 0 {
						noops++
						break
					}
					if len(cmds) > 1 {
						batchAcks++
					}
					acks = append(acks, clHotAck{actor: origin.Actor, session: s, first: res.First, last: res.Last, state: res.State})
				case !errors.Is(err, service.ErrConflict):
					t.Errorf("%s: %s Apply on %s: %v", origin.Actor, kind, s, err)
				case kind == "stale":
					staleTried++
					var ce *logport.ConflictError
					if !errors.As(err, &ce) || ce.Actual <= *expected {
						t.Errorf("%s: stale conflict %v does not carry the session's sequence", origin.Actor, err)
					}
				case kind == "pinned":
					pinnedConflicts++
				case kind == "turn":
					turnConflicts++
					if res.Retries != 0 {
						t.Errorf("%s: a turn command was retried %d times after a conflict", origin.Actor, res.Retries)
					}
				default:
					safeExhausted++ // retry-safe, but the retries ran out
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	// Deterministic coda on each hot session, with two engines: an
	// engine's cached state goes stale when the other one writes.
	a, b := envs[0], envs[1]
	coda := func(env *clEngine, ch, actor, s string, expected *uint64, cmds ...events.Payload) (service.CommandResult, error) {
		res, err := env.eng.Apply(ctx, s, service.Origin{Channel: ch, Actor: actor}, expected, cmds...)
		if err == nil && res.Last > 0 {
			acks = append(acks, clHotAck{actor: actor, session: s, first: res.First, last: res.Last, state: res.State})
		}
		return res, err
	}
	must := func(step string, res service.CommandResult, err error, minRetries int) {
		t.Helper()
		if err != nil || res.Last == 0 || res.Retries < minRetries {
			t.Fatalf("coda %s: %+v, %v; want applied after at least %d retries", step, res, err, minRetries)
		}
	}
	for _, s := range hot {
		res, err := coda(a, "web", "coda1-"+s, s, nil, events.ToolDisabled{Name: "gpu_run"})
		must("1", res, err, 0)
		res, err = coda(b, "slack", "coda2-"+s, s, nil, events.ToolDisabled{Name: "browser_open"})
		must("2", res, err, 0)
		before := res.Last
		// A's cache is stale: a turn command is returned as a conflict,
		// not retried.
		res, err = coda(a, "web", "coda3-"+s, s, nil, events.TurnStarted{})
		if !errors.Is(err, service.ErrConflict) || res.Retries != 0 {
			t.Fatalf("coda 3: turn command on a stale cache = %+v, %v; want a conflict returned without retry", res, err)
		}
		res, err = coda(a, "web", "coda4-"+s, s, nil, events.ToolEnabled{Name: "gpu_run"})
		must("4", res, err, 0)
		// Stale caches: retry-safe commands are retried and applied.
		res, err = coda(b, "slack", "coda5-"+s, s, nil, events.ToolDisabled{Name: "image_generate"})
		must("5", res, err, 1)
		res, err = coda(a, "web", "coda6-"+s, s, nil, events.ToolDisabled{Name: "image_describe"})
		must("6", res, err, 1)
		// A pinned stale sequence is a conflict carrying the session's
		// sequence, and writes nothing.
		last := res.Last
		stale := before
		_, err = coda(b, "slack", "coda7-"+s, s, &stale, events.ToolEnabled{Name: "browser_open"})
		var ce *logport.ConflictError
		if !errors.Is(err, service.ErrConflict) || !errors.As(err, &ce) || ce.Actual != last {
			t.Fatalf("coda 7: stale expected %d (session at %d) = %v; want a conflict at %d", stale, last, err, last)
		}
		if now, _ := a.log.LastSeq(ctx, s); now != last {
			t.Fatalf("coda 7: the refused command moved %s from %d to %d", s, last, now)
		}
	}
	recs := clReplayAll(t, envs[0].log)

	// Every stored event belongs to an acknowledged Apply, at the
	// sequences it was acknowledged at, and no ULID is stored twice.
	bySeq := map[uint64]logport.Record{}
	ids := map[string]bool{}
	for _, r := range recs {
		if r.Err != nil {
			t.Fatalf("record %d undecodable: %v", r.Seq, r.Err)
		}
		if ids[r.Envelope.ID] {
			t.Errorf("event %s stored twice", r.Envelope.ID)
		}
		ids[r.Envelope.ID] = true
		bySeq[r.Seq] = r
	}
	want := 0
	returned := map[string]map[uint64]aggregate.State{}
	for _, ak := range acks {
		for seq := ak.first; seq <= ak.last; seq++ {
			want++
			r, ok := bySeq[seq]
			if !ok || r.Session != ak.session || r.Envelope.Actor != ak.actor {
				t.Errorf("acknowledged %s on %s at %d: log has %+v", ak.actor, ak.session, seq, r)
			}
		}
		if returned[ak.session] == nil {
			returned[ak.session] = map[uint64]aggregate.State{}
		}
		returned[ak.session][ak.last] = ak.state
	}
	if want != len(recs) {
		t.Errorf("log holds %d events, acknowledged Applies account for %d: something was written without an acknowledgement", len(recs), want)
	}
	checked, bad, firstBad := clStatesMatchLog(recs, returned)
	if bad > 0 {
		t.Errorf("%d of %d returned states differ from the log's fold; first: %s", bad, checked, firstBad)
	}

	// Final views: the serial fold of each session's log (read with
	// ReadSession) equals the replay's fold, every engine's
	// read-your-writes view and the projection's stored view.
	fold := natstest.FoldRecords(recs)
	lastSeq := recs[len(recs)-1].Seq
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := envs[0].proj.WaitApplied(wctx, lastSeq); err != nil {
		t.Fatal(err)
	}
	for s, w := range fold {
		rs, err := envs[1].log.ReadSession(ctx, s, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		stored := make([]aggregate.Stored, len(rs))
		for i, r := range rs {
			stored[i] = aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}
		}
		if serial := aggregate.Fold(s, stored); !reflect.DeepEqual(serial, w) {
			t.Fatalf("session %s: serial fold %+v, replay fold %+v", s, serial, w)
		}
		for i, e := range envs {
			v, err := e.eng.Session(ctx, s, w.LastSeq)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, w) {
				t.Fatalf("session %s: engine %d reads %+v, fold %+v", s, i, v, w)
			}
		}
	}
	if err := clViewsEqualFold(ctx, envs[0].proj, fold); err != nil {
		t.Fatal(err)
	}
	stopProj()

	if retried.Load() == 0 {
		t.Error("no conflict was retried by the engine: the hot sessions were not contended")
	}
	if staleTried == 0 {
		t.Error("no stale expected sequence was tried")
	}
	t.Logf("concurrency-figures: goroutines=%d engines=%d sessions=%d hot=%d applies=%d acknowledged=%d events=%d batches=%d noops=%d conflicts_retried=%d retries_in_results=%d conflicts_returned=%d (stale=%d pinned=%d turn=%d retry_safe_exhausted=%d)",
		perEngine*len(envs), len(envs), len(fold), len(hot), perEngine*len(envs)*ops, len(acks), len(recs), batchAcks, noops,
		retried.Load(), retriesSeen, returnedConflicts.Load(), staleTried, pinnedConflicts, turnConflicts, safeExhausted)
}
