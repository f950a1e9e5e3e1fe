package partition_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/partition"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

const (
	account    = "$G"
	partitions = 3
	waitBound  = 45 * time.Second
)

// layout is an engine over the partitions of one 3-node cluster: a log,
// a running projection and an eraser per partition behind the routers.
type layout struct {
	c    *natstest.JSCluster
	nc   *nats.Conn
	logs []*jetstream.Log
	eng  *service.Engine
}

func openLayout(t *testing.T) *layout {
	t.Helper()
	c := natstest.Cluster(t, 3)
	nc := natstest.Connect(t, c.URLs())
	ctx := context.Background()
	lay := &layout{c: c, nc: nc}
	// The cluster may have no JetStream leader yet: ask again.
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		var err error
		lay.logs, err = jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Replicas: 3, Partitions: partitions, AllowDeletes: true})
		return err
	})
	parts := make([]service.Ports, partitions)
	erasers := make([]service.Eraser, partitions)
	for p, l := range lay.logs {
		var (
			proj *projection.Projection
			x    *jetstream.Eraser
		)
		natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
			var err error
			if proj == nil {
				if proj, err = projection.Open(ctx, l, projection.Config{}); err != nil {
					return err
				}
			}
			x, err = l.NewEraser(ctx, nil)
			return err
		})
		runProjection(t, proj)
		parts[p], erasers[p] = service.JetStreamPorts(l, proj), x
	}
	ports, err := partition.NewPorts(parts...)
	if err != nil {
		t.Fatal(err)
	}
	lay.eng = service.NewFromPorts(ports, resolver.Default(), service.Config{})
	x, err := partition.NewEraser(erasers...)
	if err != nil {
		t.Fatal(err)
	}
	lay.eng.SetEraser(x)
	return lay
}

// lead moves the leader of partition p's event stream to node p, so that
// each partition is led by another node.
func (lay *layout) lead(t *testing.T) {
	t.Helper()
	for p, l := range lay.logs {
		want := lay.c.Servers()[p].Name()
		body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
		natstest.CheckFor(t, waitBound, 250*time.Millisecond, func() error {
			if lay.c.StreamLeader(account, l.StreamName()) == p {
				return nil
			}
			_, err := lay.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+l.StreamName(), body, 5*time.Second)
			if err != nil {
				return err
			}
			return fmt.Errorf("stream %s led by n%d, want n%d", l.StreamName(), lay.c.StreamLeader(account, l.StreamName()), p)
		})
	}
}

// sessionsOf returns n session ids of each partition.
func sessionsOf(n int) [][]string {
	out := make([][]string, partitions)
	for i := 0; slices.ContainsFunc(out, func(s []string) bool { return len(s) < n }); i++ {
		id := fmt.Sprintf("s-%03d", i)
		if p := events.Partition(id, partitions); len(out[p]) < n {
			out[p] = append(out[p], id)
		}
	}
	return out
}

var web = service.Origin{Channel: "web", Actor: "alice"}

func toggle(enabled bool) events.Payload { return events.ToolsToggled{Enabled: &enabled} }

// Every operation of one engine over three partitions, each led by another
// node of a 3-node cluster, lands on and reads from the session's own
// partition: appends, reads, turns, history, compaction, erase, and the
// list of sessions.
func TestPartitionedEngineServesEveryOperationOnAThreeNodeCluster(t *testing.T) {
	lay := openLayout(t)
	lay.lead(t)
	ctx := context.Background()
	leaders := map[int]bool{}
	for _, l := range lay.logs {
		leaders[lay.c.StreamLeader(account, l.StreamName())] = true
	}
	if len(leaders) != partitions {
		t.Fatalf("partition leaders on %d nodes, want %d", len(leaders), partitions)
	}
	bySession := sessionsOf(4)
	var all []string
	for p, ids := range bySession {
		var last uint64 // partition p's stream numbers its own events
		for _, id := range ids {
			all = append(all, id)
			for n := range 3 {
				res, err := lay.eng.Apply(ctx, id, web, nil, toggle(n%2 == 0))
				if err != nil {
					t.Fatalf("apply %d to %s (partition %d): %v", n, id, p, err)
				}
				if res.Last != last+1 {
					t.Fatalf("apply %d to %s: sequence %d, want %d, the next of partition %d", n, id, res.Last, last+1, p)
				}
				last = res.Last
			}
			if _, err := lay.eng.BeginTurn(ctx, id, web, service.ResolveRequest{}); err != nil {
				t.Fatalf("begin turn of %s: %v", id, err)
			}
			if _, err := lay.eng.EndTurn(ctx, id, web); err != nil {
				t.Fatalf("end turn of %s: %v", id, err)
			}
			var err error
			if last, err = lay.logs[p].LeaderLastSeq(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(all)
	for p, l := range lay.logs {
		info, err := l.JetStream().Stream(ctx, l.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		st, err := info.Info(ctx, njs.WithSubjectFilter(l.Subject("*")))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for subj := range st.State.Subjects {
			got = append(got, l.SessionOf(subj))
		}
		slices.Sort(got)
		if !slices.Equal(got, bySession[p]) {
			t.Fatalf("partition %d's stream holds sessions %v, want %v", p, got, bySession[p])
		}
	}
	for _, id := range all {
		last, err := lay.logs[events.Partition(id, partitions)].LeaderLastSeq(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := lay.eng.Session(ctx, id, last)
		if err != nil || st.LastSeq != last {
			t.Fatalf("session %s at %d: %+v, %v", id, last, st.LastSeq, err)
		}
		hist, _, err := lay.eng.History(ctx, id, service.Until{}, service.ResolveRequest{})
		if err != nil || len(hist) < 5 {
			t.Fatalf("history of %s: %d entries, %v; want the 3 toggles and the turn", id, len(hist), err)
		}
	}
	natstest.CheckFor(t, waitBound, 100*time.Millisecond, func() error {
		got, err := lay.eng.Sessions(ctx)
		if err != nil || !slices.Equal(got, all) {
			return fmt.Errorf("sessions %v (%v), want %v", got, err, all)
		}
		return nil
	})

	compacted, erased := bySession[1][0], bySession[2][0]
	cr, err := lay.eng.Compact(ctx, compacted, web, "test")
	if err != nil || cr.Count == 0 {
		t.Fatalf("compact %s: %+v, %v", compacted, cr, err)
	}
	if st, err := lay.eng.Session(ctx, compacted, cr.Seq); err != nil || st.LastSeq != cr.Seq {
		t.Fatalf("session %s after compaction: at %d, %v; want %d", compacted, st.LastSeq, err, cr.Seq)
	}
	if _, err := lay.eng.Erase(ctx, erased, web, "test"); err != nil {
		t.Fatalf("erase %s: %v", erased, err)
	}
	if _, err := lay.eng.Session(ctx, erased, 0); !errors.Is(err, service.ErrDeleted) {
		t.Fatalf("read of erased %s: %v, want ErrDeleted", erased, err)
	}
	if _, err := lay.eng.Apply(ctx, erased, web, nil, toggle(true)); !errors.Is(err, service.ErrDeleted) {
		t.Fatalf("write to erased %s: %v, want ErrDeleted", erased, err)
	}
	natstest.CheckFor(t, waitBound, 100*time.Millisecond, func() error {
		got, err := lay.eng.Sessions(ctx)
		want := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == erased })
		if err != nil || !slices.Equal(got, want) {
			return fmt.Errorf("sessions %v (%v), want %v", got, err, want)
		}
		return nil
	})
	if _, err := lay.eng.Watch(ctx, "", 0); !errors.Is(err, partition.ErrAllSessions) {
		t.Fatalf("watch of every session: %v, want ErrAllSessions", err)
	}
}

// Stopping the node that leads one partition under load loses no
// acknowledged append, and every partition, that one included, takes
// appends again after it.
func TestPartitionLeaderStopLosesNothingAndEveryPartitionServesAfter(t *testing.T) {
	lay := openLayout(t)
	lay.lead(t)
	ctx := context.Background()
	bySession := sessionsOf(3)
	type ack struct {
		session string
		seq     uint64
		id      string
	}
	var (
		mu      sync.Mutex
		acked   []ack
		okAfter [partitions]atomic.Int64 // appends acknowledged after the kill
		killed  atomic.Bool
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for p, ids := range bySession {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					actx, cancel := context.WithTimeout(ctx, 20*time.Second)
					res, err := lay.eng.Apply(actx, id, web, nil, toggle(n%2 == 0))
					cancel()
					if err != nil || len(res.EventIDs) == 0 {
						// Refused, or a no-op after a try that stored
						// more than it told: nothing new acknowledged.
						time.Sleep(50 * time.Millisecond)
						continue
					}
					mu.Lock()
					acked = append(acked, ack{id, res.Last, res.EventIDs[len(res.EventIDs)-1]})
					mu.Unlock()
					if killed.Load() {
						okAfter[p].Add(1)
					}
				}
			}()
		}
	}
	countAcks := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	natstest.CheckFor(t, waitBound, 50*time.Millisecond, func() error {
		if n := countAcks(); n < 150 {
			return fmt.Errorf("%d appends acknowledged before the kill, want 150", n)
		}
		return nil
	})
	victim := lay.c.StreamLeader(account, lay.logs[0].StreamName())
	killed.Store(true)
	lay.c.Stop(victim)
	t.Logf("stopped n%d, the leader of partition 0", victim)
	// Partition 0 elects a new leader and takes appends again; the others
	// keep taking them meanwhile.
	natstest.CheckFor(t, waitBound, 100*time.Millisecond, func() error {
		for p := range partitions {
			if n := okAfter[p].Load(); n < 20 {
				return fmt.Errorf("partition %d: %d appends acknowledged since the kill, want 20", p, n)
			}
		}
		return nil
	})
	close(stop)
	wg.Wait()
	lay.c.Start(victim)
	lay.c.WaitFormed(waitBound)

	// Every acknowledged append is in its session's partition, at its
	// sequence, with its id, on the new leaders.
	mu.Lock()
	defer mu.Unlock()
	upTo := map[string]uint64{}
	for _, a := range acked {
		upTo[a.session] = max(upTo[a.session], a.seq)
	}
	byID := map[string]map[uint64]string{}
	for _, a := range acked {
		if byID[a.session] == nil {
			recs, err := lay.logs[events.Partition(a.session, partitions)].ReadSessionThrough(ctx, a.session, 0, upTo[a.session])
			if err != nil {
				t.Fatalf("read %s: %v", a.session, err)
			}
			byID[a.session] = map[uint64]string{}
			for _, r := range recs {
				byID[a.session][r.Seq] = r.MsgID
			}
		}
		if got := byID[a.session][a.seq]; got != a.id {
			t.Fatalf("acknowledged event %s of %s at %d: the log holds %q there", a.id, a.session, a.seq, got)
		}
	}
	t.Logf("%d acknowledged appends all stored; after the kill: %d, %d, %d per partition", len(acked), okAfter[0].Load(), okAfter[1].Load(), okAfter[2].Load())
}
