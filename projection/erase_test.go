package projection_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/projection"
)

// A projection whose feed meets sequences an erase purged (it had
// not folded them yet, or it folds the stream from the start) skips them
// when the audit stream covers them, instead of reporting the log as
// damaged, and folds the bystanders; also when the purged events were the
// stream's tail.
func TestFeedSkipsErasedSequences(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	last := map[string]uint64{}
	add := func(s string, p events.Payload) {
		t.Helper()
		r, err := e.log.Append(ctx, s, last[s], events.New(s, "web", "alice", p))
		if err != nil {
			t.Fatal(err)
		}
		last[s] = r.Last
	}
	add("victim", events.ToolsToggled{})
	add("victim", events.ToolDisabled{Name: "bash"})
	add("by", events.ToolDisabled{Name: "grep"})
	add("victim", events.SessionDeleted{})
	x, err := e.log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Erase(ctx, "victim", last["victim"]); err != nil {
		t.Fatal(err)
	}
	p, _ := start(t, e.log)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if err := p.Damaged(ctx); err != nil {
			return fmt.Errorf("damaged: %w", err)
		}
		st, err := p.Read(ctx, "by", projection.ReadOptions{})
		if err != nil || len(st.Intent.Disabled) != 1 || !p.CaughtUp() {
			return fmt.Errorf("by %+v %v, caught up %v, applied %d", st, err, p.CaughtUp(), p.Applied())
		}
		return nil
	})
	if err := p.Damaged(ctx); err != nil {
		t.Fatal(err)
	}
}

// A rebuild after an erase (the feed reset, every view folded again from
// the start) folds the bystanders and catches up, although the stream's
// first sequence was purged, and folds the erased id as deleted: its
// SessionDeleted stays in the log as its tombstone.
func TestRebuildAfterErase(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	last := map[string]uint64{}
	add := func(s string, p events.Payload) {
		t.Helper()
		r, err := e.log.Append(ctx, s, last[s], events.New(s, "web", "alice", p))
		if err != nil {
			t.Fatal(err)
		}
		last[s] = r.Last
	}
	add("victim", events.ToolsToggled{})
	add("by", events.ToolDisabled{Name: "grep"})
	add("by", events.ToolDisabled{Name: "bash"})
	add("victim", events.TurnStarted{Turn: 1})
	add("victim", events.SessionDeleted{})
	p1, stop := start(t, e.log)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if p1.Applied() < 5 {
			return fmt.Errorf("applied %d", p1.Applied())
		}
		return nil
	})
	stop()
	x, err := e.log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Erase(ctx, "victim", last["victim"]); err != nil {
		t.Fatal(err)
	}
	if err := e.log.ResetFeed(ctx, projection.DefaultDurable); err != nil {
		t.Fatal(err)
	}
	p2, err := projection.Open(ctx, e.log, projection.Config{AcceptGaps: true})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = p2.Run(rctx) }()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !p2.CaughtUp() || p2.Folded() == 0 {
			n, ierr := p2.Interruptions()
			return fmt.Errorf("caught up %v, folded %d, applied %d, interruptions %d %v", p2.CaughtUp(), p2.Folded(), p2.Applied(), n, ierr)
		}
		return nil
	})
	if st, err := p2.Read(ctx, "by", projection.ReadOptions{}); err != nil || len(st.Intent.Disabled) != 2 {
		t.Errorf("by %+v %v", st, err)
	}
	if st, err := p2.Read(ctx, "victim", projection.ReadOptions{}); err != nil || !st.Deleted() || st.DeletedSeq != last["victim"] {
		t.Errorf("victim after the rebuild: %+v %v, want deleted at %d", st, err, last["victim"])
	}
}

// A direct publisher that writes an event to an erased id after its
// tombstone: the projection does not take it for a new session; the event
// is rejected against the deleted view, and the bystanders' views go on.
func TestEventAfterErasedTombstoneRejected(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	last := map[string]uint64{}
	add := func(s string, p events.Payload) {
		t.Helper()
		r, err := e.log.Append(ctx, s, last[s], events.New(s, "web", "alice", p))
		if err != nil {
			t.Fatal(err)
		}
		last[s] = r.Last
	}
	add("victim", events.ToolDisabled{Name: "bash"})
	add("victim", events.SessionDeleted{})
	p, _ := start(t, e.log)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if p.Applied() < 2 {
			return fmt.Errorf("applied %d", p.Applied())
		}
		return nil
	})
	x, err := e.log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Erase(ctx, "victim", last["victim"]); err != nil {
		t.Fatal(err)
	}
	// The log's own append, with the sequence of the tombstone, as a
	// direct publisher may.
	if _, err := e.log.Append(ctx, "victim", last["victim"], events.New("victim", "backend", "svc", events.ToolDisabled{Name: "grep"})); err != nil {
		t.Fatal(err)
	}
	add("by", events.ToolDisabled{Name: "glob"})
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		st, err := p.Read(ctx, "victim", projection.ReadOptions{})
		if err != nil || !st.Deleted() || st.Rejected != 1 || st.Intent.Disabled != nil {
			return fmt.Errorf("victim %+v %v", st, err)
		}
		by, err := p.Read(ctx, "by", projection.ReadOptions{})
		if err != nil || len(by.Intent.Disabled) != 1 {
			return fmt.Errorf("by %+v %v", by, err)
		}
		return nil
	})
	if err := p.Damaged(ctx); err != nil {
		t.Fatal(err)
	}
}
