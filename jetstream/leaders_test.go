package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// Three partitions' streams all led by one node of three are spread, one
// step-down per pass, until each node leads one; a spread layout is left
// as it is.
func TestSpreadLeadersPutsEachPartitionOnItsOwnNode(t *testing.T) {
	c := natstest.Cluster(t, 3)
	nc := natstest.Connect(t, c.URLs())
	ctx := context.Background()
	var logs []*jetstream.Log
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		var err error
		logs, err = jetstream.OpenPartitions(ctx, nc, jetstream.LogConfig{Replicas: 3, Partitions: 3})
		return err
	})
	n0 := c.Servers()[0].Name()
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": n0}})
	for _, l := range logs {
		natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
			if c.StreamLeader("$G", l.StreamName()) == 0 {
				return nil
			}
			if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+l.StreamName(), body, 5*time.Second); err != nil {
				return err
			}
			return fmt.Errorf("%s not led by n0 yet", l.StreamName())
		})
	}
	moves := 0
	natstest.CheckFor(t, 90*time.Second, 500*time.Millisecond, func() error {
		s, err := jetstream.SpreadLeaders(ctx, logs)
		if err != nil {
			return err
		}
		if s.Moved != "" {
			moves++
			t.Logf("moved %s from %s to %s (leaders %v)", s.Moved, s.From, s.To, s.Leaders)
		}
		if !s.Distinct() {
			return fmt.Errorf("leaders %v", s.Leaders)
		}
		return nil
	})
	if moves < 2 {
		t.Fatalf("%d step-downs spread three streams led by one node, want at least 2", moves)
	}
	s, err := jetstream.SpreadLeaders(ctx, logs)
	if err != nil || s.Moved != "" || !s.Distinct() {
		t.Fatalf("a spread layout: %+v, %v, want no move", s, err)
	}
}
