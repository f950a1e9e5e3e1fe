package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// A migration that cannot settle (a writer keeps appending to the one
// stream) refuses and stays recorded as under way: no engine opens the
// store, one stream or partitioned, until a second run finishes it, or
// --abort puts the one stream back.
func TestMigrateUnsettledStaysUnderWayUntilFinishedOrAborted(t *testing.T) {
	one, nc := openLog(t)
	ctx := context.Background()
	if _, err := one.Append(ctx, "s0", 0, toggled("s0")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			s := fmt.Sprintf("s%d", i)
			if _, err := one.Append(ctx, s, 0, toggled(s)); err == nil {
				writes.Add(1)
			}
		}
	})
	_, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3, Settle: 50 * time.Millisecond})
	close(stop)
	wg.Wait()
	if !errors.Is(err, jetstream.ErrServing) || !strings.Contains(err.Error(), "--abort") {
		t.Fatalf("migrate while a writer appends: %v, want ErrServing naming --abort", err)
	}
	for _, k := range []int{1, 3} {
		err := jetstream.ClaimLayout(ctx, nc, jetstream.LogConfig{Partitions: k})
		if !errors.Is(err, jetstream.ErrMigrating) || !strings.Contains(err.Error(), "engine migrate --partitions 3") {
			t.Fatalf("open as %d streams during the migration: %v, want ErrMigrating naming the command that finishes it", k, err)
		}
	}

	rep, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 1})
	if err != nil || !rep.Aborted {
		t.Fatalf("abort: %+v, %v", rep, err)
	}
	if err := jetstream.ClaimLayout(ctx, nc, jetstream.LogConfig{}); err != nil {
		t.Fatalf("one stream after the abort: %v", err)
	}
	if _, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 1}); !errors.Is(err, jetstream.ErrLayout) {
		t.Fatalf("abort with no migration under way: %v, want ErrLayout", err)
	}

	rep, err = jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3, Settle: 50 * time.Millisecond})
	if err != nil || rep.Sessions != int(writes.Load())+1 {
		t.Fatalf("migrate once the writer stopped: %+v, %v, want %d sessions kept", rep, err, writes.Load()+1)
	}
	again, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3})
	if err != nil || again.Sessions != rep.Sessions || again.LastSeq != rep.LastSeq {
		t.Fatalf("migrate a migrated store again: %+v, %v, want the first run's report %+v", again, err, rep)
	}
	if _, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 4}); !errors.Is(err, jetstream.ErrLayout) {
		t.Fatalf("migrate a migrated store to another K: %v, want ErrLayout", err)
	}
}

// On a migrated store the kept sessions are the one stream's and every
// other session its partition's: each log refuses the other side's
// sessions, an event stored on the wrong side reads back refused, and
// the logs OpenPartitions returns end with the one stream's.
func TestMigratedLogsRefuseTheOtherSidesSessions(t *testing.T) {
	one, nc := openLog(t)
	ctx := context.Background()
	if _, err := one.Append(ctx, "kept", 0, toggled("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3, Settle: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 4 || logs[3].StreamName() != "TOOLS_EVENTS" || logs[3].OneStreamSessions() == nil || logs[0].OneStreamSessions() != nil {
		t.Fatalf("OpenPartitions of a migrated store: %d logs, last %s, want the 3 partitions and then TOOLS_EVENTS", len(logs), logs[len(logs)-1].StreamName())
	}
	kept, part := logs[3], logs[events.Partition("kept", 3)]
	if _, err := part.Append(ctx, "kept", 0, toggled("kept")); !errors.Is(err, logport.ErrWrongPartition) || !strings.Contains(err.Error(), "TOOLS_EVENTS") {
		t.Fatalf("append of the kept session to its hash's partition: %v, want ErrWrongPartition naming TOOLS_EVENTS", err)
	}
	if _, err := kept.Append(ctx, "fresh", 0, toggled("fresh")); !errors.Is(err, logport.ErrWrongPartition) {
		t.Fatalf("append of a new session to the one stream: %v, want ErrWrongPartition", err)
	}
	if r, err := kept.Append(ctx, "kept", 1, toggled("kept")); err != nil || r.Last <= 1 {
		t.Fatalf("append of the kept session to the one stream: %+v, %v", r, err)
	}
	// A publisher that writes a new session to the one stream.
	data, err := events.Encode(toggled("rogue"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("tools.events.rogue", data, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	recs, err := kept.ReadSessionThrough(ctx, "kept", 1, 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("the kept session's events: %d, %v, want 2", len(recs), err)
	}
	var refused int
	if err := kept.ScanRange(ctx, 1, 0, func(rec logport.Record) error {
		if rec.Session == "rogue" && errors.Is(rec.Err, logport.ErrWrongPartition) {
			refused++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if refused != 1 {
		t.Fatalf("the event stored for rogue on the one stream read back refused %d times, want once", refused)
	}
}

// An event a writer nobody stopped stores on the one stream after its
// sessions were listed, for a session the listing did not hold, is not
// served after the migration: Migrate says so, naming the session.
func TestMigrateNamesSessionsWrittenAfterTheListing(t *testing.T) {
	one, nc := openLog(t)
	ctx := context.Background()
	if _, err := one.Append(ctx, "early", 0, toggled("early")); err != nil {
		t.Fatal(err)
	}
	rep, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 2, Settle: time.Millisecond, Progress: func(step string) {
		if strings.HasPrefix(step, "stored the") {
			if _, err := one.Append(ctx, "late", 0, toggled("late")); err != nil {
				t.Error(err)
			}
		}
	}})
	if !errors.Is(err, jetstream.ErrServing) || !strings.Contains(err.Error(), "late") || strings.Contains(err.Error(), "early") {
		t.Fatalf("migrate with a session written after the listing: %v, want ErrServing naming late alone", err)
	}
	if rep.Sessions != 1 {
		t.Fatalf("migrate kept %d sessions, want 1 (early)", rep.Sessions)
	}
}

// On a 3-node cluster the partitions and the stored session set get the
// replicas of the one stream whose sessions they take over, whatever
// the migration's own configuration says.
func TestMigrateGivesThePartitionsTheOneStreamsReplicas(t *testing.T) {
	c := natstest.Cluster(t, 3)
	nc := natstest.Connect(t, c.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	one, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Append(ctx, "kept", 0, toggled("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3, Settle: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	js := one.JetStream()
	for _, name := range []string{"TOOLS_EVENTS_0", "TOOLS_EVENTS_1", "TOOLS_EVENTS_2", "OBJ_" + jetstream.SessionsBucket("")} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("%s has %d replicas, want the one stream's 3", name, r)
		}
	}
}

// A session a writer nobody stopped adds between the listing and the
// stored set is kept on the one stream (and the run warns); two runs at
// once leave one recorded set the store opens with.
func TestMigrateKeepsLateSessionsAndConcurrentRunsLeaveOneSet(t *testing.T) {
	one, nc := openLog(t)
	ctx := context.Background()
	if _, err := one.Append(ctx, "early", 0, toggled("early")); err != nil {
		t.Fatal(err)
	}
	var warned atomic.Bool
	progress := func(step string) {
		if strings.HasPrefix(step, "created") {
			if _, err := one.Append(ctx, "between", 0, toggled("between")); err != nil && !errors.Is(err, logport.ErrConflict) {
				t.Error(err)
			}
		}
		if strings.Contains(step, "WARNING") && strings.Contains(step, "between") {
			warned.Store(true)
		}
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	run := func(progress func(string)) {
		rep, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 3, Settle: 20 * time.Millisecond, Progress: progress})
		if err == nil && rep.Sessions == 2 {
			ok.Add(1)
		} else if err != nil && !errors.Is(err, jetstream.ErrLayout) {
			t.Errorf("a concurrent migrate failed otherwise than losing the record's race: %v", err)
		}
	}
	// The second run starts once the first recorded the migration: it
	// resumes it, and both list, store a set and race to record theirs.
	wg.Go(func() {
		run(func(step string) {
			progress(step)
			if strings.HasPrefix(step, "recorded that a migration") {
				wg.Go(func() { run(progress) })
			}
		})
	})
	wg.Wait()
	if ok.Load() == 0 || !warned.Load() {
		t.Fatalf("%d runs kept both sessions, warned %v: want at least one, and a warning naming the late session", ok.Load(), warned.Load())
	}
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3})
	if err != nil {
		t.Fatalf("open after two runs at once: %v", err)
	}
	if set := logs[3].OneStreamSessions(); !set.Has("early") || !set.Has("between") {
		t.Fatal("the recorded set lacks a session the one stream held before the record")
	}
}

// An event stored after the late sessions were read, in the moment
// before the set is stored, is never lost silently: the set holds every
// session with an event through the sequence the read reached, and the
// final check names the one written after it.
func TestMigrateNamesASessionWrittenRightAfterTheLateRead(t *testing.T) {
	one, nc := openLog(t)
	ctx := context.Background()
	if _, err := one.Append(ctx, "early", 0, toggled("early")); err != nil {
		t.Fatal(err)
	}
	appendOn := func(step, prefix, session string) {
		if strings.HasPrefix(step, prefix) {
			if _, err := one.Append(ctx, session, 0, toggled(session)); err != nil {
				t.Error(err)
			}
		}
	}
	_, err := jetstream.Migrate(ctx, nc, jetstream.LogConfig{}, jetstream.Migration{Partitions: 2, Settle: time.Millisecond, Progress: func(step string) {
		appendOn(step, "created", "between")
		appendOn(step, "WARNING", "gap")
	}})
	if !errors.Is(err, jetstream.ErrServing) || !strings.Contains(err.Error(), "gap") || strings.Contains(err.Error(), "between") {
		t.Fatalf("migrate with a session written right after the late read: %v, want ErrServing naming gap alone", err)
	}
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	if set := logs[2].OneStreamSessions(); !set.Has("between") || set.Has("gap") {
		t.Fatalf("kept set: between %v, gap %v; want between kept and gap named instead", set.Has("between"), set.Has("gap"))
	}
}
