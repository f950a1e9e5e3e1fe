package projection_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/projection"
)

// The views the projection keeps in memory are
// bounded by CacheSize after each batch, and a session whose view left the
// memory still reads back whole (from the views bucket).
func TestProjectionCacheBounded(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	p, err := projection.Open(ctx, e.log, projection.Config{CacheSize: 10, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projection run: %v", err)
		}
	}()
	var last uint64
	for i := range 60 {
		s := fmt.Sprintf("s%d", i)
		r, err := e.log.Append(ctx, s, 0, events.New(s, "web", "alice", events.ToolsToggled{Enabled: ptr(i%2 == 0)}))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	if err := p.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	// The views of the window being written stay cached until their write
	// lands (read back before, they would be stale); a window can hold
	// more than BatchSize sessions when a delivery gap was filled from the
	// log (a paced feed on a loaded machine). The next flush trims
	// them: one more event, and the bound holds.
	r, err := e.log.Append(ctx, "s-next", 0, events.New("s-next", "web", "alice", events.ToolsToggled{Enabled: ptr(true)}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitApplied(ctx, r.Last); err != nil {
		t.Fatal(err)
	}
	if n := p.Cached(); n > 10 {
		t.Fatalf("%d views held in memory with CacheSize 10", n)
	}
	for _, i := range []int{0, 1, 30, 59} { // the first ones certainly evicted
		st, err := p.Read(ctx, fmt.Sprintf("s%d", i), projection.ReadOptions{})
		if err != nil || st.LastSeq == 0 || st.Intent.Enabled == nil || *st.Intent.Enabled != (i%2 == 0) {
			t.Fatalf("s%d read %+v, %v after eviction", i, st.Intent, err)
		}
	}
}
