package service_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// The compact action rolls an idle session up into one snapshot (its
// subject holds one message, its state is unchanged, the snapshot names
// engine:retention and the idle time), keeps a fresh session byte for
// byte, counts the compaction in the tick, and leaves a compact session
// alone on the next pass (the snapshot keeps the idle time of the events
// it replaced); without an eraser the action is refused naming the flag.
func TestRetentionCompact(t *testing.T) {
	t.Parallel()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	ctx := context.Background()
	appendAged(t, log, "idle", time.Now().Add(-idleAgo), events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"}, events.WebSearchSet{Enabled: on(true)})
	if _, err := e.Apply(ctx, "fresh", web, nil, events.ToolsToggled{Enabled: on(false)}); err != nil {
		t.Fatal(err)
	}
	waitListed(t, e, 2)
	fresh := rawEvents(t, log, "fresh")
	orig, err := log.ReadSession(ctx, "idle", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Action: service.RetainCompact}); !errors.Is(err, service.ErrEraseUnavailable) || !strings.Contains(err.Error(), "--retain-action compact") {
		t.Fatalf("compact action without an eraser: %v", err)
	}
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	r, err := e.NewRetention(service.RetentionConfig{Idle: retentionIdle, Action: service.RetainCompact})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := r.Tick(ctx)
	if err != nil || tk.Compacted != 1 || tk.Deleted+tk.Erased+tk.Conflicts+tk.Errors != 0 {
		t.Fatalf("tick %+v %v; want 1 compacted", tk, err)
	}
	recs, err := log.ReadSession(ctx, "idle", 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("idle session after compaction: %d events %v", len(recs), err)
	}
	snap, ok := recs[0].Envelope.Payload.(events.SessionCompacted)
	if !ok || recs[0].Envelope.Actor != service.RetentionOrigin.Actor || !strings.HasPrefix(snap.Reason, "retention: idle since ") || snap.Count != 3 {
		t.Fatalf("snapshot %+v by %s", snap, recs[0].Envelope.Actor)
	}
	if a, b := aggregate.Fold("idle", storedOf(orig)), aggregate.Fold("idle", storedOf(recs)); !reflect.DeepEqual(a.Intent, b.Intent) || b.Events != a.Events+1 {
		t.Fatalf("compaction changed the state:\n got %+v\nwant %+v", b, a)
	}
	if got := rawEvents(t, log, "fresh"); strings.Join(got, ",") != strings.Join(fresh, ",") {
		t.Fatalf("fresh session changed")
	}
	tk, err = r.Tick(ctx)
	if err != nil || tk.Examined != 2 || tk.Compacted+tk.Conflicts+tk.Errors != 0 {
		t.Fatalf("second tick %+v %v; want both kept", tk, err)
	}
	if n := len(rawEvents(t, log, "idle")); n != 1 {
		t.Fatalf("second tick left %d events", n)
	}
}
