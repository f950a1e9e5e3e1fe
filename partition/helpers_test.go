package partition_test

import (
	"context"
	"testing"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/partition"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// runProjection runs proj until the test ends.
func runProjection(t *testing.T, proj *projection.Projection) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = proj.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// localLayout is an engine over k partitions on one in-process server:
// each partition's log and projection, opened and not run.
type localLayout struct {
	logs  []*jetstream.Log
	projs []*projection.Projection
	eng   *service.Engine
}

func openLocal(t *testing.T, k int) *localLayout {
	t.Helper()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx := context.Background()
	logs, err := jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Partitions: k})
	if err != nil {
		t.Fatal(err)
	}
	lay := &localLayout{logs: logs, projs: make([]*projection.Projection, k)}
	parts := make([]service.Ports, k)
	for p, l := range logs {
		if lay.projs[p], err = projection.Open(ctx, l, projection.Config{}); err != nil {
			t.Fatal(err)
		}
		parts[p] = service.JetStreamPorts(l, lay.projs[p])
	}
	ports, err := partition.NewPorts(parts...)
	if err != nil {
		t.Fatal(err)
	}
	lay.eng = service.NewFromPorts(ports, resolver.Default(), service.Config{})
	return lay
}
