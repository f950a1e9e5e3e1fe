package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/server"
)

// An engine serving one stream does not start on a store laid out in
// partitions: it would serve every session from a stream that holds none
// of them. The refusal names the layout and creates nothing.
func TestServeRefusesAPartitionedStore(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = server.Run(rctx, server.Config{Store: server.Store{NATS: srv.ClientURL(), Data: t.TempDir()}})
	if !errors.Is(err, jetstream.ErrLayout) || !strings.Contains(err.Error(), "over 3 event streams") {
		t.Fatalf("serve on a store of 3 partitions: %v, want ErrLayout naming 3 event streams", err)
	}
	if _, err := logs[0].JetStream().Stream(ctx, jetstream.EventStreamName("")); err == nil {
		t.Fatal("the refused serve created the one-stream event stream")
	}
}
