package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// partitionIDs are session ids of every form the engine takes: ULIDs,
// short and maximal ids, and each token byte class.
func partitionIDs(n int) []string {
	ids := []string{"a", "Z", "0", "-", "_", "a-b_C9", strings.Repeat("x", events.MaxSessionLen), strings.Repeat("-_", events.MaxSessionLen/2)}
	for i := range n {
		ids = append(ids, ulid.Make().String(), fmt.Sprintf("session-%d", i))
	}
	return ids
}

// openPartitions opens the K logs of a partitioned layout on nc.
func openPartitions(t *testing.T, nc *nats.Conn, k int) []*jetstream.Log {
	t.Helper()
	logs := make([]*jetstream.Log, k)
	for p := range k {
		l, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{Partitions: k, Partition: p})
		if err != nil {
			t.Fatalf("open partition %d of %d: %v", p, k, err)
		}
		logs[p] = l
	}
	return logs
}

// A server's subject mapping partition(K,1) and events.Partition put every
// session in the same partition, so publishers through a mapping and the
// engine agree on where a session lives.
func TestPartitionAgreesWithServerMapping(t *testing.T) {
	srv := natstest.ServerWith(t, server.Options{})
	nc := natstest.Connect(t, srv.ClientURL())
	ids := partitionIDs(300)
	for _, k := range []int{2, 3, 7, 16} {
		prefix := fmt.Sprintf("map%d", k)
		if err := srv.GlobalAccount().AddMapping(prefix+".events.*", fmt.Sprintf("%s.events.{{partition(%d,1)}}.{{wildcard(1)}}", prefix, k)); err != nil {
			t.Fatalf("add mapping: %v", err)
		}
		sub, err := nc.SubscribeSync(prefix + ".events.*.*")
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := nc.Publish(prefix+".events."+id, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("K=%d: mapped message of %q: %v", k, id, err)
			}
			tok := strings.Split(m.Subject, ".")
			if tok[3] != id {
				t.Fatalf("K=%d: got %s, want the message of %q", k, m.Subject, id)
			}
			if want := fmt.Sprint(events.Partition(id, k)); tok[2] != want {
				t.Fatalf("K=%d: the server maps %q to partition %s, events.Partition says %s", k, id, tok[2], want)
			}
		}
		_ = sub.Unsubscribe()
	}
}

// Each partition has its own event stream, views, projection and history
// buckets; the idempotency keys bucket is shared by all.
func TestPartitionNamesStreamsAndBuckets(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	for p, l := range openPartitions(t, nc, 2) {
		suffix := fmt.Sprintf("_%d", p)
		if got, want := l.StreamName(), "TOOLS_EVENTS"+suffix; got != want {
			t.Fatalf("partition %d stream %s, want %s", p, got, want)
		}
		if got, want := l.Subject("s"), fmt.Sprintf("tools.events.%d.s", p); got != want {
			t.Fatalf("partition %d subject %s, want %s", p, got, want)
		}
		views, err := l.OpenViews(ctx, "VIEWS")
		if err != nil {
			t.Fatal(err)
		}
		meta, err := l.OpenMeta(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := l.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.OpenHistoryIndex(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.JetStream().Stream(ctx, "KV_TOOLS_HISTORY"+suffix); err != nil {
			t.Fatalf("partition %d history bucket TOOLS_HISTORY%s: %v", p, suffix, err)
		}
		got := []string{views.Bucket(), meta.Bucket(), keys.Bucket()}
		want := []string{"TOOLS_VIEWS" + suffix, "TOOLS_PROJECTION" + suffix, "TOOLS_KEYS"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("partition %d buckets %v, want %v", p, got, want)
		}
		if keys.Legacy(time.Now().Add(-time.Hour)) != 0 {
			t.Fatalf("partition %d: a partitioned layout has no keys from before the key index", p)
		}
	}
	if _, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{}); err != nil {
		t.Fatalf("the unpartitioned stream beside the partitions: %v", err)
	}
}

// A log refuses every call naming a session of another partition, with an
// error naming the session's partition, and stores nothing.
func TestPartitionLogRefusesOtherPartitionsSessions(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	logs := openPartitions(t, nc, 3)
	session := "refused-session"
	own := events.Partition(session, 3)
	other := logs[(own+1)%3]
	calls := map[string]func() error{
		"Append":             func() error { _, err := other.Append(ctx, session, 0, toggled(session)); return err },
		"LastSeq":            func() error { _, err := other.LastSeq(ctx, session); return err },
		"LeaderLastSeq":      func() error { _, err := other.LeaderLastSeq(ctx, session); return err },
		"ReadSession":        func() error { _, err := other.ReadSession(ctx, session, 0, 0); return err },
		"Watch":              func() error { _, err := other.Watch(ctx, session, 0); return err },
		"ReadSessionThrough": func() error { _, err := other.ReadSessionThrough(ctx, session, 0, 1); return err },
		"ScanSession": func() error {
			return other.ScanSession(ctx, session, 0, 0, func(logport.Record) error { return nil })
		},
		"StoredAt": func() error { _, err := other.StoredAt(ctx, session, 1, []string{"x"}); return err },
	}
	x, err := other.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls["Eraser.Begin"] = func() error { return x.Begin(ctx, session, 0) }
	calls["Eraser.Cancel"] = func() error { return x.Cancel(ctx, session) }
	calls["Eraser.Erase"] = func() error { _, err := x.Erase(ctx, session, 1); return err }
	calls["Eraser.Compact"] = func() error { _, err := x.Compact(ctx, session, 1); return err }
	for name, call := range calls {
		err := call()
		var wp *logport.WrongPartitionError
		if !errors.Is(err, logport.ErrWrongPartition) || !errors.As(err, &wp) || wp.Partition != own {
			t.Fatalf("%s of a session of partition %d on partition %d's log: %v, want ErrWrongPartition naming partition %d", name, own, (own+1)%3, err, own)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("partition %d of 3", own)) {
			t.Fatalf("%s: %q does not name the session's partition", name, err)
		}
	}
	for p, l := range logs {
		if last, err := l.LastStreamSeq(ctx); err != nil || last != 0 {
			t.Fatalf("partition %d holds %d events (%v) after the refusals, want 0", p, last, err)
		}
	}
	r, err := logs[own].Append(ctx, session, 0, toggled(session))
	if err != nil || r.First != 1 {
		t.Fatalf("append on the session's own partition: %+v, %v", r, err)
	}
}

// An event a publisher stored on the wrong partition's subjects reads back
// with an error naming the partition it belongs to, so no engine folds it;
// one published through the server's mapping lands in its own partition.
func TestPartitionEventOnAnotherPartitionsSubjectIsRefusedOnRead(t *testing.T) {
	srv := natstest.ServerWith(t, server.Options{})
	if err := srv.GlobalAccount().AddMapping("tools.events.*", "tools.events.{{partition(2,1)}}.{{wildcard(1)}}"); err != nil {
		t.Fatalf("add mapping: %v", err)
	}
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	logs := openPartitions(t, nc, 2)
	session := "direct-publisher"
	own := events.Partition(session, 2)
	publish := func(subject string) {
		t.Helper()
		env := toggled(session)
		data, err := events.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(subject)
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, env.ID)
		if _, err := logs[0].JetStream().PublishMsg(ctx, msg); err != nil {
			t.Fatalf("publish to %s: %v", subject, err)
		}
	}
	publish("tools.events." + session) // through the mapping
	recs, err := logs[own].ReadSession(ctx, session, 0, 0)
	if err != nil || len(recs) != 1 || recs[0].Err != nil {
		t.Fatalf("the mapped event on partition %d: %+v, %v", own, recs, err)
	}
	wrong := 1 - own
	publish(fmt.Sprintf("tools.events.%d.%s", wrong, session))
	var got []logport.Record
	if err := logs[wrong].ScanRange(ctx, 1, 0, func(r logport.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !errors.Is(got[0].Err, logport.ErrWrongPartition) {
		t.Fatalf("the event on partition %d's subjects read back as %+v, want one record with ErrWrongPartition", wrong, got)
	}
}

// A layout's partition count and partition are checked before anything
// is opened.
func TestPartitionConfigOutOfRange(t *testing.T) {
	for _, c := range []struct {
		cfg  jetstream.LogConfig
		want string
	}{
		{jetstream.LogConfig{Partitions: events.MaxPartitions + 1}, "partitions 257 out of range 1..256"},
		{jetstream.LogConfig{Partitions: -1}, "partitions -1 out of range"},
		{jetstream.LogConfig{Partitions: 3, Partition: 3}, "partition 3 out of range 0..2"},
		{jetstream.LogConfig{Partition: 1}, "partition 1 out of range 0..0"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}

// The first OpenPartitions records the store's layout; a later one asking
// for another number of partitions, one stream included, is refused with
// an error naming both, and creates nothing.
func TestOpenPartitionsRecordsTheLayoutAndRefusesAnother(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3})
	if err != nil || len(logs) != 3 {
		t.Fatalf("first open of 3 partitions: %d logs, %v", len(logs), err)
	}
	for p, l := range logs {
		if got, _ := l.Partition(); got != p || l.StreamName() != fmt.Sprintf("TOOLS_EVENTS_%d", p) {
			t.Fatalf("log %d holds partition %d on %s", p, got, l.StreamName())
		}
	}
	if _, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3}); err != nil {
		t.Fatalf("second open of the same layout: %v", err)
	}
	for _, k := range []int{4, 1} {
		_, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: k})
		if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), "over 3 event streams") || !strings.Contains(err.Error(), "open it as 3 event streams") {
			t.Fatalf("open with %d partitions of a store of 3: %v, want ErrLayout naming 3", k, err)
		}
	}
	js := logs[0].JetStream()
	for _, name := range []string{"TOOLS_EVENTS_3", "TOOLS_EVENTS"} {
		if _, err := js.Stream(ctx, name); err == nil {
			t.Fatalf("the refused opens created stream %s", name)
		}
	}
}

// Layout reads the number of partitions the store recorded: none before
// the first partitioned open, K after it, whatever the reader asks for.
func TestLayoutReadsTheRecordedNumber(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	if k, err := jetstream.Layout(ctx, nc, jetstream.LogConfig{}); k != 0 || err != nil {
		t.Fatalf("layout of an empty store: %d, %v, want 0 (no record)", k, err)
	}
	if _, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 5}); err != nil {
		t.Fatal(err)
	}
	for _, asked := range []int{0, 2, 5} {
		if k, err := jetstream.Layout(ctx, nc, jetstream.LogConfig{Partitions: asked}); k != 5 || err != nil {
			t.Fatalf("layout read asking %d: %d, %v, want 5", asked, k, err)
		}
	}
}

// A store whose one stream holds events is not opened partitioned; an
// empty one is, and from then on it is a partitioned store.
func TestOpenPartitionsRefusesAOneStreamStoreWithEvents(t *testing.T) {
	for _, stored := range []bool{true, false} {
		srv := natstest.Server(t)
		nc := natstest.Connect(t, srv.ClientURL())
		ctx := context.Background()
		one, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if stored {
			if _, err := one.Append(ctx, "s", 0, toggled("s")); err != nil {
				t.Fatal(err)
			}
		}
		_, err = jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 2})
		if !stored {
			if err != nil {
				t.Fatalf("partitions over an empty one-stream store: %v", err)
			}
			continue
		}
		if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), "one event stream, TOOLS_EVENTS, holds sessions (messages: 1)") {
			t.Fatalf("partitions over a one-stream store with an event: %v, want ErrLayout naming TOOLS_EVENTS", err)
		}
		if _, err := one.JetStream().Stream(ctx, "TOOLS_EVENTS_0"); err == nil {
			t.Fatal("the refused open created TOOLS_EVENTS_0")
		}
		if _, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{}); err != nil {
			t.Fatalf("the one-stream store opened as one stream: %v", err)
		}
	}
}

// The audit stream is shared by the partitions; the erased ranges a
// partition reads (what explains its missing sequences) are its own.
func TestPartitionErasedRangesAreThePartitionsOwn(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	session := "erased"
	own := events.Partition(session, 2)
	var last uint64
	for range 3 {
		r, err := logs[own].Append(ctx, session, last, toggled(session))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	x, err := logs[own].NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Begin(ctx, session, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Erase(ctx, session, last); err != nil {
		t.Fatal(err)
	}
	mine, err := logs[own].ErasedRanges(ctx)
	if err != nil || len(mine) != 1 || mine[0] != (jetstream.SeqRange{First: 1, Last: last - 1}) {
		t.Fatalf("partition %d erased ranges %v (%v), want [1..%d]", own, mine, err, last-1)
	}
	if other, err := logs[1-own].ErasedRanges(ctx); err != nil || len(other) != 0 {
		t.Fatalf("partition %d erased ranges %v (%v), want none: the erase was partition %d's", 1-own, other, err, own)
	}
}

// A partition stream missing from a store whose layout was recorded a
// while ago is lost, not new: opening the layout refuses, naming it, and
// creates nothing. Under a record just made (another engine starting the
// store) the missing streams are created.
func TestOpenPartitionsRefusesAStreamLostFromAnOldLayout(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, njs.KeyValueConfig{Bucket: jetstream.LayoutBucket("tools")})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{"partitions": 3, "time": time.Now().Add(-time.Hour)})
	if _, err := kv.Create(ctx, "layout", old); err != nil {
		t.Fatal(err)
	}
	_, err = jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3})
	if !errors.Is(err, jetstream.ErrStreamMissing) || !strings.Contains(err.Error(), "missing: TOOLS_EVENTS_0, TOOLS_EVENTS_1, TOOLS_EVENTS_2") {
		t.Fatalf("open of a layout recorded an hour ago without its streams: %v, want ErrStreamMissing naming all three", err)
	}
	if _, err := js.Stream(ctx, "TOOLS_EVENTS_0"); !errors.Is(err, njs.ErrStreamNotFound) {
		t.Fatalf("the refused open created TOOLS_EVENTS_0: %v", err)
	}
	young, _ := json.Marshal(map[string]any{"partitions": 3, "time": time.Now()})
	if _, err := kv.Put(ctx, "layout", young); err != nil {
		t.Fatal(err)
	}
	if logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3}); err != nil || len(logs) != 3 {
		t.Fatalf("open under a record just made: %d logs, %v, want the three streams created", len(logs), err)
	}
}
