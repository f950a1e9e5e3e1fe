package natstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// majorityServeWait bounds how long the majority may take to serve again
// after the stream leader is partitioned: an election (4–9 s with
// nats-server's default timings) plus a margin.
const majorityServeWait = 15 * time.Second

// After the first stream leader is
// stopped and restarted, partitioning the next one leaves a majority that
// elects a leader and serves appends and KV direct gets to a client on
// one of its nodes within majorityServeWait; the harness's proxied routes
// between the majority stay up (no route flapping stalls it).
func TestClusterPartitionLeaderMajorityServes(t *testing.T) {
	c := Cluster(t, 3)
	nc := Connect(t, c.URLs())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "PV", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// as in TestClusterLeaderKillUnderLoad: the first leader is stopped and
	// restarted, then the next one is partitioned
	first := c.WaitStreamLeader("$G", "P", 30*time.Second)
	c.Stop(first)
	leader := c.WaitStreamLeader("$G", "P", 30*time.Second)
	c.Start(first)
	c.WaitFormed(clusterFormWait)
	other := (leader + 1) % 3
	onc := Connect(t, c.ClientURL(other), nats.DontRandomize())
	ojs, err := jetstream.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	okv, err := ojs.KeyValue(ctx, "PV")
	if err != nil {
		t.Fatal(err)
	}
	// light load through the node that stays in the majority
	for i := 0; i < 20; i++ {
		if _, err := ojs.Publish(ctx, "p.a", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	c.Partition(leader)
	t.Logf("partitioned n%d (stream leader), client on n%d", leader, other)
	start := time.Now()
	deadline := start.Add(majorityServeWait)
	var pubErr, getErr error = fmt.Errorf("not tried"), fmt.Errorf("not tried")
	for time.Now().Before(deadline) && (pubErr != nil || getErr != nil) {
		if pubErr != nil {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, pubErr = ojs.Publish(pctx, "p.a", []byte("y"))
			pcancel()
		}
		if getErr != nil {
			gctx, gcancel := context.WithTimeout(ctx, time.Second)
			_, getErr = okv.Get(gctx, "k")
			gcancel()
		}
	}
	if pubErr != nil || getErr != nil {
		t.Fatalf("majority did not serve within %s of partitioning n%d: publish: %v, get: %v (stream leader now n%d)", majorityServeWait, leader, pubErr, getErr, c.StreamLeader("$G", "P"))
	}
	t.Logf("majority served after %s", time.Since(start).Round(10*time.Millisecond))
}
