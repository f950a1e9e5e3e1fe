package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/partition"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// prefixParts is the subject prefix of the partitioned layout of the
// scale-out step.
const prefixParts = "parts"

// benchPartitions is the number of partitions of the partitioned line: one
// per node of the bench cluster.
const benchPartitions = 3

// partitioned is the engines of the partitioned line, one per node, each
// over every partition of the layout (its own connection's logs and views)
// and running the projection of the partition its node leads.
type partitioned struct {
	engines []*service.Engine
	streams []string
	stops   []func()
}

func (p *partitioned) close() {
	for _, stop := range p.stops {
		stop()
	}
}

// startPartitioned opens the layout of benchPartitions streams with 3
// replicas on the scale-out engines' connections, puts partition p's
// stream and views leaders on node p, and builds one engine per node.
func (s *scaleRun) startPartitioned(ctx context.Context) (*partitioned, error) {
	out := &partitioned{}
	for i, ce := range s.engines {
		logs, err := openRetry(ctx, func(ctx context.Context) ([]*jetstream.Log, error) {
			return jetstream.OpenPartitions(ctx, ce.nc, jetstream.LogConfig{Prefix: prefixParts, Replicas: 3, Partitions: benchPartitions})
		})
		if err != nil {
			return out, fmt.Errorf("partitioned streams on the cluster: %w", err)
		}
		parts := make([]service.Ports, len(logs))
		for p, l := range logs {
			proj, err := projection.Open(ctx, l, projection.Config{})
			if err != nil {
				return out, err
			}
			if i == 0 {
				out.streams = append(out.streams, l.StreamName())
				for _, stream := range []string{l.StreamName(), "KV_" + proj.Views().Bucket()} {
					if err := leaderOn(ctx, ce.nc, stream, fmt.Sprintf("b%d", p)); err != nil {
						return out, err
					}
				}
			}
			if p == i { // the engine on node p folds partition p
				rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
				done := make(chan error, 1)
				go func() { done <- proj.Run(rctx) }()
				out.stops = append(out.stops, func() { cancel(); <-done })
			}
			parts[p] = service.JetStreamPorts(l, proj)
		}
		ports, err := partition.NewPorts(parts...)
		if err != nil {
			return out, err
		}
		out.engines = append(out.engines, service.NewFromPorts(ports, resolver.Default(), service.Config{}))
	}
	return out, nil
}

// partitionLine adds the line of the scale-out engines writing through a
// layout of benchPartitions streams, each led by another node, against the
// same engines writing to one stream led by node 0 (the 3-engine
// scale-out line's work): the same goroutines, sessions per goroutine and
// appends, through service.Engine on both sides.
func (s *scaleRun) partitionLine(ctx context.Context) error {
	start := time.Now()
	pt, err := s.startPartitioned(ctx)
	defer pt.close()
	if err != nil {
		return err
	}
	k := len(s.engines)
	s.h.progress("scale-out: %d partitions (%s), leaders on nodes 0..%d, in %.1f s", benchPartitions, strings.Join(pt.streams, ", "), benchPartitions-1, time.Since(start).Seconds())
	n := k * s.perEngineClients
	var perPart [benchPartitions]atomic.Int64
	counted := func(session string) { perPart[events.Partition(session, benchPartitions)].Add(int64(s.per)) }
	// Both sides write sessions of their own, new to the run.
	l, err := s.h.pair(ctx, namePartitioned, "events/s", true, s.appendSample("part-e", pt.engines, n, counted), s.appendSample("part-b", s.oneStream(k), n, nil))
	if err != nil {
		return err
	}
	var total int64
	for i := range perPart {
		total += perPart[i].Load()
	}
	shares := make([]string, benchPartitions)
	for i := range perPart {
		shares[i] = fmt.Sprintf("%.0f%%", 100*float64(perPart[i].Load())/float64(max(total, 1)))
	}
	l.Note = fmt.Sprintf("in-process 3-node JetStream cluster, 3 replicas (all nodes share this machine's %d cores); %d engines, one per node, %d goroutines each on their own sessions, %d appends/run; engine: %d partitioned streams, partition p's stream and views led by node p and folded by the engine on node p, the appends per partition %s; baseline: the same engines, goroutines and appends on one stream whose stream and views leaders are node 0 (the %d-engine scale-out line's set-up)",
		cpuCount(), k, s.perEngineClients, n*s.per, benchPartitions, strings.Join(shares, " / "), k)
	s.h.add(l)
	return nil
}
