package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
)

// Spread is what one SpreadLeaders pass saw and did.
type Spread struct {
	// Leaders names each stream's leader, in the order of the logs ("":
	// none, or a stream of one replica).
	Leaders []string
	// Moved is the stream asked to move its leader ("" when none was),
	// From and To the servers.
	Moved, From, To string
}

// SpreadLeaders places the leaders of the logs' streams (the partitions
// of a layout) on different servers, one move per call: when a server
// leads several of the streams, the first stream that shares its leader
// and has a current replica on a server leading none (else fewer) of
// them is asked to step down in that replica's favour. Elections take a
// moment, so a caller repeats it a while later; a layout whose leaders
// are on different servers, or whose streams have one replica, is left
// as it is. The streams keep serving throughout: a step-down pauses one
// stream's appends for its election.
func SpreadLeaders(ctx context.Context, logs []*Log) (Spread, error) {
	var s Spread
	type placed struct {
		leader string
		peers  []string // current, online replicas
	}
	streams := make([]placed, len(logs))
	count := map[string]int{}
	for i, l := range logs {
		ictx, cancel := l.withTimeout(ctx)
		info, err := l.stream.Info(ictx)
		cancel()
		if err != nil {
			return s, fmt.Errorf("stream info %s: %w", l.name, err)
		}
		if info.Cluster != nil && info.Cluster.Leader != "" {
			p := placed{leader: info.Cluster.Leader}
			for _, r := range info.Cluster.Replicas {
				if r.Current && !r.Offline {
					p.peers = append(p.peers, r.Name)
				}
			}
			streams[i] = p
			count[p.leader]++
		}
		s.Leaders = append(s.Leaders, streams[i].leader)
	}
	for i, p := range streams {
		if p.leader == "" || count[p.leader] < 2 {
			continue
		}
		// The replica leading the fewest of the streams, fewer than the
		// leader would after the move.
		best := ""
		for _, peer := range p.peers {
			if count[peer] < count[p.leader]-1 && (best == "" || count[peer] < count[best]) {
				best = peer
			}
		}
		if best == "" {
			continue
		}
		l := logs[i]
		req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": best}})
		rctx, cancel := l.withTimeout(ctx)
		msg, err := l.nc.RequestWithContext(rctx, l.cfg.apiPrefix()+"STREAM.LEADER.STEPDOWN."+l.name, req)
		cancel()
		if err != nil {
			return s, fmt.Errorf("step down the leader of %s for %s: %w", l.name, best, err)
		}
		var reply struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if json.Unmarshal(msg.Data, &reply) == nil && reply.Error != nil {
			return s, fmt.Errorf("step down the leader of %s for %s: %s", l.name, best, reply.Error.Description)
		}
		s.Moved, s.From, s.To = l.name, p.leader, best
		return s, nil
	}
	return s, nil
}

// Distinct reports whether every stream has a leader and no two share one.
func (s Spread) Distinct() bool {
	seen := map[string]bool{}
	for _, l := range s.Leaders {
		if l == "" || seen[l] {
			return false
		}
		seen[l] = true
	}
	return true
}
