package jetstream_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// A migration's session set is stored even when the replicated object
// store has no leader at the time of the put (two of its three nodes
// down, as in the moment after its creation or a failover): the put
// is asked again until the nodes are back, and the set read back is the
// one stored.
func TestPutSessionSetWaitsForTheStoreToHaveALeader(t *testing.T) {
	c := natstest.Cluster(t, 3)
	nc := natstest.Connect(t, c.ClientURL(0))
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := jetstream.LogConfig{Prefix: "TOOLS", Replicas: 3}
	if err := jetstream.PutSessionSet(ctx, js, cfg, "first", jetstream.NewSessionSet([]string{"a"})); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	c.Stop(2)
	want := jetstream.NewSessionSet([]string{"kept-0", "kept-1", "kept-2"})
	done := make(chan error, 1)
	go func() { done <- jetstream.PutSessionSet(ctx, js, cfg, "second", want) }()
	select {
	case err := <-done:
		t.Fatalf("put without a leader returned %v before the nodes came back; want it to wait for them", err)
	case <-time.After(2 * time.Second):
	}
	c.Start(1)
	c.Start(2)
	if err := <-done; err != nil {
		t.Fatalf("put once the nodes are back: %v", err)
	}
	// Read back through the restarted cluster: a request that reaches
	// it while its leaders are still being chosen can go unanswered, so
	// each read has its own bound and is asked again.
	var got []byte
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		obs, err := js.ObjectStore(rctx, jetstream.SessionsBucket("TOOLS"))
		if err != nil {
			return err
		}
		got, err = obs.GetBytes(rctx, "second")
		return err
	})
	if !bytes.Equal(got, want.Marshaled()) {
		t.Fatalf("stored set of %d bytes, want the %d bytes put", len(got), len(want.Marshaled()))
	}
}
