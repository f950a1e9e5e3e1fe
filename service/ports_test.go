package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// The engine runs on its ports alone: over the in-memory log
// it writes, reads back, answers a pinned stale sequence with a conflict,
// and refuses a keyed write when it was given no key store.
func TestEngineOnMemlog(t *testing.T) {
	t.Parallel()
	log := memlog.New()
	e := service.NewFromPorts(service.Ports{Log: log, Views: memlog.NewViews(log)}, resolver.Default(), service.Config{})
	ctx := context.Background()
	res, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(false)})
	if err != nil || res.Last == 0 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	st, err := e.Session(ctx, "s1", res.Last)
	if err != nil || st.LastSeq != res.Last {
		t.Fatalf("session read at %d, %v; want %d", st.LastSeq, err, res.Last)
	}
	if n, _ := log.LastSeq(ctx, "s1"); n != res.Last {
		t.Fatalf("log at %d, want %d", n, res.Last)
	}
	stale := uint64(0)
	_, err = e.Apply(ctx, "s1", web, &stale, events.ToolsToggled{Enabled: on(true)})
	if service.KindOf(err) != service.KindConflict {
		t.Fatalf("apply at a stale sequence: %v, want a conflict", err)
	}
	_, err = e.ApplyKeyed(ctx, "s1", web, nil, events.NewID(), events.ToolsToggled{Enabled: on(true)})
	if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "no key store") {
		t.Fatalf("keyed apply without a key store: %v, want ErrInvalid", err)
	}
	if e.Log() != nil || e.Projection() != nil {
		t.Fatal("an engine over other ports has no JetStream log or projection to hand out")
	}
}

var _ service.Keys = (*memlog.Keys)(nil)

// The keyed path runs on the in-memory ports: a retry of a keyed command
// after another writer moved the session on answers the first append
// (a duplicate, its sequence), stores nothing more, and the same key on
// another session is refused.
func TestApplyKeyedOnMemoryPorts(t *testing.T) {
	t.Parallel()
	log, keys := memlog.New(), memlog.NewKeys()
	ports := service.Ports{Log: log, Views: memlog.NewViews(log), Keys: func(context.Context) (service.Keys, error) { return keys, nil }}
	e := service.NewFromPorts(ports, resolver.Default(), service.Config{})
	ctx := context.Background()
	key := events.NewID()
	first, err := e.ApplyKeyed(ctx, "idem", web, nil, key, events.ToolDisabled{Name: "bash"})
	if err != nil || first.Last == 0 || first.Duplicate {
		t.Fatalf("first keyed apply: %+v, %v", first, err)
	}
	if _, err := e.Apply(ctx, "idem", web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	again, err := e.ApplyKeyed(ctx, "idem", web, nil, key, events.ToolDisabled{Name: "bash"})
	if err != nil || !again.Duplicate || again.First != first.First || again.Last != first.Last {
		t.Fatalf("retry: %+v, %v; want the first append %d..%d as a duplicate", again, err, first.First, first.Last)
	}
	if n, _ := log.LastSeq(ctx, "idem"); n != first.Last+1 {
		t.Fatalf("session at %d after the retry, want %d (the first and the other writer's)", n, first.Last+1)
	}
	if c, found, err := keys.Get(ctx, key); err != nil || !found || c.Pending() || c.First != first.First {
		t.Fatalf("the key's claim: %+v found %v, %v; want it settled at %d", c, found, err, first.First)
	}
	_, err = e.ApplyKeyed(ctx, "other", web, nil, key, events.ToolDisabled{Name: "bash"})
	if !errors.Is(err, logport.ErrKeyInUse) {
		t.Fatalf("the key on another session: %v, want ErrKeyInUse", err)
	}
}
