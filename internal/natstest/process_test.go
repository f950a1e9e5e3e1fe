package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The process cluster runs separate nats-server processes; a
// SIGKILLed stream leader is replaced by another node and comes back on its
// store.
func TestProcessClusterKillLeader(t *testing.T) {
	c := StartProcessCluster(t, ProcessOptions{SyncAlways: true})
	nc := Connect(t, c.URLs())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PC", Subjects: []string{"pc.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "pc.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	leader := c.WaitLeaderOf("PC", 30*time.Second)
	c.Kill(leader)
	next := c.WaitLeaderOf("PC", 30*time.Second)
	if next == leader {
		t.Fatalf("leader n%d killed, still reported as leader", leader)
	}
	if _, err := js.Publish(ctx, "pc.a", []byte("2")); err != nil {
		t.Fatalf("publish after the kill: %v", err)
	}
	blocks, err := c.StreamBlocks(leader, "PC")
	if err != nil || len(blocks) == 0 {
		t.Fatalf("block files of the killed node: %v %v", blocks, err)
	}
	c.Start(leader)
	c.WaitFormed(60 * time.Second)
	CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if !c.StreamCurrent("PC") {
			return context.DeadlineExceeded
		}
		return nil
	})
}
