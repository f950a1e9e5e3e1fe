package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

func watchNext(t *testing.T, w *service.Watch) (logport.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	return w.Next(ctx)
}

// A session's watch delivers its SessionDeleted and then ends; a
// watch that starts after the deletion is ErrDeleted; the all-sessions
// watch goes on past it; a bad id is KindInvalid.
func TestWatchDeletedSession(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	r, err := e.Apply(ctx, "w1", web, nil, events.ToolsToggled{Enabled: on(true)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.Watch(ctx, "w1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	all, err := e.Watch(ctx, "", r.Last)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	if got, err := watchNext(t, w); err != nil || got.Seq != r.Last {
		t.Fatalf("first event: %d %v, want %d", got.Seq, err, r.Last)
	}
	d, err := e.Delete(ctx, "w1", web, "done")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := watchNext(t, w); err != nil || got.Seq != d.Seq || got.Envelope.Type != events.TypeSessionDeleted {
		t.Fatalf("after delete: seq %d type %s %v, want the SessionDeleted at %d", got.Seq, got.Envelope.Type, err, d.Seq)
	}
	if _, err := watchNext(t, w); !errors.Is(err, service.ErrWatchEnded) {
		t.Fatalf("after SessionDeleted: %v, want ErrWatchEnded", err)
	}
	if _, err := e.Watch(ctx, "w1", d.Seq); !errors.Is(err, service.ErrDeleted) {
		t.Fatalf("watch after the deletion: %v, want ErrDeleted", err)
	}
	r2, err := e.Apply(ctx, "w2", web, nil, events.ToolsToggled{Enabled: on(false)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{d.Seq, r2.Last} {
		if got, err := watchNext(t, all); err != nil || got.Seq != want {
			t.Fatalf("all sessions: %d %v, want %d", got.Seq, err, want)
		}
	}
	if _, err := e.Watch(ctx, "a b", 0); service.KindOf(err) != service.KindInvalid {
		t.Fatalf("bad id: %v, want KindInvalid", err)
	}
	mem := memlog.New()
	me := service.NewFromPorts(service.Ports{Log: mem, Views: memlog.NewViews(mem)}, resolver.Default(), service.Config{})
	if _, err := me.Watch(ctx, "", 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("watch on a log without Watch: %v, want ErrUnsupported", err)
	}
}
