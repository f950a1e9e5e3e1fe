package natstest

// What a process cluster's nodes say of themselves: monitoring
// endpoints, the meta and stream leaders, stream currency.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsz is the part of a node's /jsz monitoring reply the helpers read.
type jsz struct {
	Meta *struct {
		Leader      string `json:"leader"`
		ClusterSize int    `json:"cluster_size"`
		Replicas    []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
			Offline bool   `json:"offline"`
		} `json:"replicas"`
	} `json:"meta_cluster"`
}

var monClient = &http.Client{Timeout: 2 * time.Second}

func (c *ProcessCluster) monitor(i int, path string, v any) error {
	resp, err := monClient.Get(fmt.Sprintf("http://127.0.0.1:%d%s", c.nodes[i].httpPort, path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func (c *ProcessCluster) index(name string) int {
	for i, nd := range c.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// MetaLeader is the index of the node every running, unpartitioned node
// names as JetStream meta leader, -1 when they do not agree or have none.
func (c *ProcessCluster) MetaLeader() int {
	leader := ""
	for i := range c.nodes {
		c.mu.Lock()
		stopped := c.nodes[i].cmd == nil
		c.mu.Unlock()
		if stopped || c.mesh.isPartitioned(i) {
			continue
		}
		var j jsz
		if err := c.monitor(i, "/jsz", &j); err != nil || j.Meta == nil || j.Meta.Leader == "" {
			return -1
		}
		if leader != "" && leader != j.Meta.Leader {
			return -1
		}
		leader = j.Meta.Leader
	}
	return c.index(leader)
}

// WaitFormed waits until every running, unpartitioned node agrees on a
// meta leader that sees all peers (none offline) and JetStream answers.
func (c *ProcessCluster) WaitFormed(wait time.Duration) {
	c.t.Helper()
	poll(c.t, wait, 100*time.Millisecond, "natstest: process cluster not formed", c.formed)
}

func (c *ProcessCluster) formed() error {
	l := c.MetaLeader()
	if l < 0 {
		return errors.New("no meta leader all running nodes agree on")
	}
	var j jsz
	if err := c.monitor(l, "/jsz", &j); err != nil {
		return err
	}
	if j.Meta.ClusterSize != len(c.nodes) {
		return fmt.Errorf("meta group has %d peers, want %d", j.Meta.ClusterSize, len(c.nodes))
	}
	for _, r := range j.Meta.Replicas {
		i := c.index(r.Name)
		if i >= 0 && c.Running(i) && (r.Offline || !r.Current) {
			return fmt.Errorf("meta peer %s is not current", r.Name)
		}
	}
	return nil
}

// conn is the helpers' own client connection, used to ask JetStream who
// leads what.
func (c *ProcessCluster) conn() *nats.Conn {
	c.ncOnce.Do(func() {
		nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Name("natstest-observer"))
		if err != nil {
			c.t.Fatalf("natstest: observer connection: %v", err)
		}
		c.nc = nc
	})
	return c.nc
}

// LeaderOf is the index of the node that leads stream (as JetStream's
// stream info says, asked within timeout), -1 when there is none or the
// question timed out. The KV bucket B is stream KV_B.
func (c *ProcessCluster) LeaderOf(stream string, timeout time.Duration) int {
	js, err := jetstream.New(c.conn())
	if err != nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	ci := s.CachedInfo().Cluster
	if ci == nil {
		return -1
	}
	i := c.index(ci.Leader)
	if i >= 0 && !c.Running(i) {
		return -1 // the answer predates the kill
	}
	return i
}

// WaitLeaderOf waits until stream has a leader and returns it.
func (c *ProcessCluster) WaitLeaderOf(stream string, wait time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if i := c.LeaderOf(stream, time.Second); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: no leader for stream %s after %s", stream, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StreamCurrent reports whether every replica of stream is current (and
// none offline), as its leader reports.
func (c *ProcessCluster) StreamCurrent(stream string) bool {
	js, err := jetstream.New(c.conn())
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	ci := s.CachedInfo().Cluster
	if ci == nil || ci.Leader == "" || len(ci.Replicas) != len(c.nodes)-1 {
		return false
	}
	for _, r := range ci.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// StreamBlocks lists node i's message block files of stream (account $G),
// oldest first by name.
func (c *ProcessCluster) StreamBlocks(i int, stream string) ([]string, error) {
	return filepath.Glob(filepath.Join(c.StoreDir(i), "jetstream", "$G", "streams", stream, "msgs", "*.blk"))
}
