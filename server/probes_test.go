package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The stream check fails at once on a leaderless answer, on
// timeouts only once nothing has answered for writeProbeStale (one slow
// probe under load does not flip it), and an acknowledged append counts
// as an answer.
func TestWriteProbeCheck(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &writeProbe{now: func() time.Time { return now }}
	ctx := context.Background()
	if err := p.check(ctx); err == nil {
		t.Fatal("never answered: want not ready")
	}
	p.appended()
	if err := p.check(ctx); err != nil {
		t.Fatalf("append acknowledged: %v", err)
	}
	// A probe times out: still ready until writeProbeStale has passed.
	p.err = context.DeadlineExceeded
	now = now.Add(writeProbeStale - 100*time.Millisecond)
	if err := p.check(ctx); err != nil {
		t.Fatalf("one slow probe: %v, want ready", err)
	}
	now = now.Add(200 * time.Millisecond)
	if err := p.check(ctx); err == nil || !strings.Contains(err.Error(), "has not answered") {
		t.Fatalf("no answer for %s: %v, want not ready", writeProbeStale+100*time.Millisecond, err)
	}
	p.appended()
	// A leaderless answer fails at once.
	p.noLeader, p.err = true, errors.New("the event stream has no leader")
	if err := p.check(ctx); err == nil {
		t.Fatal("no leader: want not ready")
	}
}
