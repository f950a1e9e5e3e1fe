package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// eraserOnNode opens, on its own connection to node i of c (and no other
// node), the 3-replica log and its eraser, waiting up to 60 s while the
// new cluster elects its leaders.
func eraserOnNode(t *testing.T, c *natstest.JSCluster, i int) (*jetstream.Log, *jetstream.Eraser) {
	t.Helper()
	ctx := context.Background()
	nc := natstest.Connect(t, c.ClientURL(i), nats.DontRandomize())
	var (
		l   *jetstream.Log
		x   *jetstream.Eraser
		err error
	)
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		if l == nil {
			if l, err = jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Replicas: 3, AllowDeletes: true}); err != nil {
				return err
			}
		}
		x, err = l.NewEraser(ctx, nil)
		return err
	})
	return l, x
}

// The erase path's reads (whether a session is erased, a session's last
// sequence, the erased ranges, the unfinished erases) ask again when
// their request went to a replica cut off without a word, so none waits
// out its caller's whole deadline. Direct gets are spread over the three
// replicas: in 4 rounds of 4 calls, about a third go to the silent
// follower.
func TestEraseReadsAskAgainWhenReplicaIsSilent(t *testing.T) {
	c := natstest.Cluster(t, 3)
	ctx := context.Background()
	l, x := eraserOnNode(t, c, 0)
	var last uint64
	for _, s := range []string{"gone", "kept"} {
		r, err := l.Append(ctx, s, 0, events.New(s, "web", "user:alice", events.ToolDisabled{Name: "bash"}))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	if err := x.Begin(ctx, "gone", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Erase(ctx, "gone", closeSession(t, l, "gone", last-1)); err != nil {
		t.Fatal(err)
	}
	audit, events := x.AuditStream(), l.StreamName()
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for i := 0; i < c.N(); i++ {
			for _, st := range []string{audit, events} {
				if !c.StreamCurrent(i, "$G", st) {
					return fmt.Errorf("node %d: %s not current", i, st)
				}
			}
		}
		return nil
	})
	// The silent node leads neither stream (a silent leader stops every
	// replica's reads until a new one is elected, which is not what this
	// test is about), and the client is on another node.
	al := c.WaitStreamLeader("$G", audit, 30*time.Second)
	el := c.WaitStreamLeader("$G", events, 30*time.Second)
	silent := 0
	for silent == al || silent == el {
		silent++
	}
	client := (silent + 1) % c.N()
	t.Logf("audit leader: node %d; events leader: node %d; silent: node %d; client on node %d", al, el, silent, client)
	l2, x2 := eraserOnNode(t, c, client)
	// Every replica answers direct gets once it is current: wait until the
	// silent node does for both streams, so that some reads go to it.
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, st := range []string{audit, events} {
			sz, err := c.Servers()[silent].Subsz(&server.SubszOptions{Account: "$G", Subscriptions: true, Test: "$JS.API.DIRECT.GET." + st + ".x"})
			if err != nil {
				return err
			}
			found := false
			for _, d := range sz.Subs {
				found = found || (d.Queue == "_sys_" && d.Subject == "$JS.API.DIRECT.GET."+st+".>")
			}
			if !found {
				return fmt.Errorf("node %d does not answer direct gets of %s yet", silent, st)
			}
		}
		return nil
	})
	c.Blackhole(silent)
	// Each call has its own deadline, far above the 1 s re-ask: a call
	// that reads several records may meet the silent node more than once
	// (the calls took 1-6 s).
	const deadline = 15 * time.Second
	call := func(round int, what string, read func(context.Context) error) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		if err := read(rctx); err != nil {
			t.Fatalf("round %d: %s: %v after %s", round, what, err, time.Since(start).Round(time.Millisecond))
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Logf("round %d: %s took %s", round, what, d.Round(time.Millisecond))
		}
	}
	for i := 0; i < 4; i++ {
		call(i, "erased", func(ctx context.Context) error {
			erased, err := x2.Erased(ctx, fmt.Sprintf("never-%d", i))
			if err == nil && erased {
				err = fmt.Errorf("never-%d reads as erased", i)
			}
			return err
		})
		call(i, "last sequence", func(ctx context.Context) error {
			seq, err := l2.LastSeq(ctx, "kept")
			if err == nil && seq == 0 {
				err = fmt.Errorf("kept reads as empty")
			}
			return err
		})
		call(i, "erased ranges", func(ctx context.Context) error {
			rs, err := l2.ErasedRanges(ctx)
			if err == nil && len(rs) != 1 {
				err = fmt.Errorf("%d ranges, want the one erase's", len(rs))
			}
			return err
		})
		call(i, "audit records", func(ctx context.Context) error {
			un, _, err := x2.Unfinished(ctx, 0)
			if err == nil && len(un) != 1 {
				err = fmt.Errorf("records of %d sessions, want gone's", len(un))
			}
			return err
		})
	}
}

// An erase's audit record sent to a leader that goes silent (its routes
// stay open and carry nothing) is sent again, deduplicated by its
// message id, until the replicas left elect a new leader, so the erase
// goes through within its deadline rather than waiting it out.
func TestEraseRecordIsSentAgainWhenTheAuditLeaderIsSilent(t *testing.T) {
	c := natstest.Cluster(t, 3)
	ctx := context.Background()
	l, x := eraserOnNode(t, c, 0)
	if _, err := l.Append(ctx, "victim", 0, events.New("victim", "web", "user:alice", events.ToolDisabled{Name: "bash"})); err != nil {
		t.Fatal(err)
	}
	audit, events := x.AuditStream(), l.StreamName()
	al := c.WaitStreamLeader("$G", audit, 30*time.Second)
	client := (al + 1) % c.N()
	if el := c.WaitStreamLeader("$G", events, 30*time.Second); el == al {
		// The event stream's leader stays up: only the audit stream's
		// leader goes silent.
		t.Logf("the audit stream and the event stream share leader node %d; the client is on node %d", al, client)
	}
	l2, x2 := eraserOnNode(t, c, client)
	c.Blackhole(al)
	t.Cleanup(func() { c.Heal(al) })
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	if err := x2.Begin(bctx, "victim", 0); err != nil {
		t.Fatalf("begin the erase with the audit leader (node %d) silent: %v after %s", al, err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("begun in %s with the audit leader silent", time.Since(start).Round(time.Millisecond))
	// A replica behind the new leader may not hold the record yet.
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		un, _, err := x2.Unfinished(bctx, 0)
		if err != nil || len(un) != 1 || un["victim"].Phase != jetstream.PhaseBegun {
			return fmt.Errorf("audit records after the begin: %v %v, want victim's begun record", un, err)
		}
		return nil
	})
	js, err := natsjs.New(l2.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(bctx, audit)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(bctx, natsjs.WithSubjectFilter(x2.AuditSubject("victim")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[x2.AuditSubject("victim")]; n != 1 {
		t.Fatalf("the audit stream holds %d records of victim, want the begun record once", n)
	}
}

// The event stream's info (its last sequence: what a rebuild, a replay
// and the projection's catch-up start from) asked of a leader that goes
// silent is asked again until the replicas left elect a new leader, and
// answers with the stream's last sequence within the caller's deadline.
func TestStreamInfoIsAskedAgainWhenTheLeaderIsSilent(t *testing.T) {
	c := natstest.Cluster(t, 3)
	ctx := context.Background()
	var (
		l   *jetstream.Log
		err error
	)
	nc0 := natstest.Connect(t, c.ClientURL(0), nats.DontRandomize())
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		l, err = jetstream.OpenLog(ctx, nc0, jetstream.LogConfig{Replicas: 3})
		return err
	})
	r, err := l.Append(ctx, "s1", 0, events.New("s1", "web", "user:alice", events.ToolDisabled{Name: "bash"}))
	if err != nil {
		t.Fatal(err)
	}
	leader := c.WaitStreamLeader("$G", l.StreamName(), 30*time.Second)
	client := (leader + 1) % c.N()
	nc := natstest.Connect(t, c.ClientURL(client), nats.DontRandomize())
	l2, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.Blackhole(leader)
	t.Cleanup(func() { c.Heal(leader) })
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	last, err := l2.LastStreamSeq(sctx)
	if err != nil || last != r.Last {
		t.Fatalf("last sequence with the leader (node %d) silent: %d, %v after %s; want %d", leader, last, err, time.Since(start).Round(time.Millisecond), r.Last)
	}
	t.Logf("answered in %s with the leader silent", time.Since(start).Round(time.Millisecond))
}

// slowAPI forwards the JetStream API requests made on the prefix
// SLOW.API to the server; once on, it holds back those whose verb starts
// with held for delay (forever when delay is negative), and counts them.
type slowAPI struct {
	held  string
	delay time.Duration
	on    atomic.Bool
	asked atomic.Int64
}

func startSlowAPI(t *testing.T, url, held string, delay time.Duration) *slowAPI {
	t.Helper()
	nc := natstest.Connect(t, url)
	s := &slowAPI{held: held, delay: delay}
	_, err := nc.Subscribe("SLOW.API.>", func(m *nats.Msg) {
		verb := strings.TrimPrefix(m.Subject, "SLOW.API.")
		out := &nats.Msg{Subject: "$JS.API." + verb, Reply: m.Reply, Data: m.Data, Header: m.Header}
		if !s.on.Load() || !strings.HasPrefix(verb, s.held) {
			_ = nc.PublishMsg(out)
			return
		}
		s.asked.Add(1)
		if s.delay < 0 {
			return
		}
		time.AfterFunc(s.delay, func() { _ = nc.PublishMsg(out) })
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// A healthy server slower than the re-ask (2.5 s for a stream info or a
// purge, on a busy machine or a slow disk) still answers: the first ask
// stays open while the re-asks go out, at most two at a time, so the
// call returns with the first answer instead of abandoning each ask at
// one second until its deadline.
func TestSlowServerAnswersTheFirstAsk(t *testing.T) {
	for _, verb := range []string{"STREAM.INFO.", "STREAM.PURGE."} {
		srv := natstest.Server(t)
		s := startSlowAPI(t, srv.ClientURL(), verb, 2500*time.Millisecond)
		nc := natstest.Connect(t, srv.ClientURL())
		ctx := context.Background()
		l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{APIPrefix: "SLOW.API", AllowDeletes: true})
		if err != nil {
			t.Fatal(err)
		}
		x, err := l.NewEraser(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Append(ctx, "gone", 0, events.New("gone", "web", "user:alice", events.ToolDisabled{Name: "bash"}))
		if err != nil {
			t.Fatal(err)
		}
		deleted := closeSession(t, l, "gone", r.Last)
		s.on.Store(true)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		if verb == "STREAM.INFO." {
			last, err := l.LastStreamSeq(cctx)
			if err != nil || last != deleted {
				t.Fatalf("stream info answered in 2.5 s: last %d, %v after %s; want %d", last, err, time.Since(start).Round(time.Millisecond), deleted)
			}
		} else if rep, err := x.Erase(cctx, "gone", deleted); err != nil || rep.Purged != 1 {
			t.Fatalf("erase whose purge is answered in 2.5 s: %+v, %v after %s; want 1 event purged", rep, err, time.Since(start).Round(time.Millisecond))
		}
		cancel()
		took := time.Since(start)
		if took > 5*time.Second || s.asked.Load() > 4 {
			t.Fatalf("%s answered in 2.5 s: the call took %s and asked %d times; want the first ask's answer", verb, took.Round(time.Millisecond), s.asked.Load())
		}
		t.Logf("%s: %s, %d asks", verb, took.Round(time.Millisecond), s.asked.Load())
	}
}

// A request never answered, made without a deadline (the projection's
// catch-up, a replay), fails after the log's Timeout rather than asking
// again for ever.
func TestUnansweredRequestWithoutDeadlineFailsAfterTheLogsTimeout(t *testing.T) {
	srv := natstest.Server(t)
	s := startSlowAPI(t, srv.ClientURL(), "STREAM.INFO.", -1)
	nc := natstest.Connect(t, srv.ClientURL())
	l, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{APIPrefix: "SLOW.API", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.on.Store(true)
	start := time.Now()
	err = l.Replay(context.Background(), 0, func(logport.Record) error { return nil })
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 4*time.Second {
		t.Fatalf("replay with the stream info unanswered: %v after %s; want the 2 s timeout", err, took.Round(time.Millisecond))
	}
}

// readsOfALog are a log's reads over its two paths to direct gets: one
// message asked with ask (LastSeq), and the batched scan (ReadSession).
var readsOfALog = []struct {
	name string
	read func(context.Context, *jetstream.Log) (int, error)
}{
	{"last sequence", func(ctx context.Context, l *jetstream.Log) (int, error) {
		seq, err := l.LastSeq(ctx, "s1")
		return int(seq), err
	}},
	{"session scan", func(ctx context.Context, l *jetstream.Log) (int, error) {
		recs, err := l.ReadSession(ctx, "s1", 0, 0)
		return len(recs), err
	}},
}

// A read whose stream has no direct-get responder on the server yet (a
// stream just created, or given a new leader, before the replicas'
// interest reaches the asking client's server) is asked again shortly
// and answered once a replica serves it, rather than failing with "no
// responders". Here the stream is deleted and created again 100 ms after
// the read starts; the new stream is empty.
func TestReadAskedBeforeItsStreamServesIsAnsweredOnceItDoes(t *testing.T) {
	l, nc := openLog(t)
	ctx := context.Background()
	js := l.JetStream()
	for _, rd := range readsOfALog {
		if _, err := l.Append(ctx, "s1", 0, toggled("s1")); err != nil {
			t.Fatal(err)
		}
		if err := js.DeleteStream(ctx, l.StreamName()); err != nil {
			t.Fatal(err)
		}
		created := make(chan error, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
			created <- err
		}()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := rd.read(rctx, l)
		cancel()
		if err := <-created; err != nil {
			t.Fatalf("create the stream again: %v", err)
		}
		if err != nil || n != 0 {
			t.Fatalf("%s of s1 in the new, empty stream: %d, %v; want 0, nil", rd.name, n, err)
		}
	}
}

// A read whose stream never gets a responder (it does not exist) fails
// with "no responders" well before its caller's deadline.
func TestReadOfAMissingStreamFailsWithNoResponders(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	if err := l.JetStream().DeleteStream(ctx, l.StreamName()); err != nil {
		t.Fatal(err)
	}
	for _, rd := range readsOfALog {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := rd.read(rctx, l)
		late := rctx.Err() != nil
		cancel()
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("%s in a deleted stream: %v; want no responders", rd.name, err)
		}
		if late {
			t.Fatalf("%s waited out its caller's deadline", rd.name)
		}
	}
}
