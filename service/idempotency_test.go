package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// #20 item 4: a client-supplied event id makes a retry safe: the retry
// returns the original sequences and ids and writes nothing, within the
// log's dedupe window and after it (the session is searched for the key),
// even when the retried command would now be a no-op or decide other
// events; a command deciding several events names them key, key+1, ...
func TestApplyKeyedRetry(t *testing.T) {
	const window = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Duplicates: window})
	if err != nil {
		t.Fatal(err)
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = proj.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := service.New(log, proj, resolver.Default(), service.Config{})

	key := events.NewID()
	first, err := e.ApplyKeyed(ctx, "idem", web, nil, key, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Last == 0 || len(first.EventIDs) != 1 || first.EventIDs[0] != key || first.Duplicate {
		t.Fatalf("first append: %+v, want one new event with id %s", first, key)
	}
	// Another writer moves the session on.
	if _, err := e.Apply(ctx, "idem", web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	retry := func(when string) {
		t.Helper()
		got, err := e.ApplyKeyed(ctx, "idem", web, nil, key, events.ToolDisabled{Name: "bash"})
		if err != nil {
			t.Fatalf("retry %s: %v", when, err)
		}
		if !got.Duplicate || got.First != first.First || got.Last != first.Last || len(got.EventIDs) != 1 || got.EventIDs[0] != key {
			t.Fatalf("retry %s = first %d last %d dup %v ids %v, want the original %d (duplicate)", when, got.First, got.Last, got.Duplicate, got.EventIDs, first.Last)
		}
	}
	retry("within the dedupe window")
	time.Sleep(2 * window) // the dedupe window is time: let it pass
	retry("after the dedupe window")
	recs, err := log.ReadSession(ctx, "idem", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Envelope.ID == key {
			n++
		}
	}
	if n != 1 || len(recs) != 2 {
		t.Fatalf("session has %d events, %d with the key; want 2 and 1", len(recs), n)
	}

	// Several events under one key: key, key+1.
	key2 := events.NewID()
	multi, err := e.ApplyKeyed(ctx, "idem", web, nil, key2, events.ToolEnabled{Name: "bash"}, events.ToolEnabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := service.KeyedIDs(key2, 2)
	if len(multi.EventIDs) != 2 || multi.EventIDs[0] != want[0] || multi.EventIDs[1] != want[1] {
		t.Fatalf("ids %v, want %v", multi.EventIDs, want)
	}
	again, err := e.ApplyKeyed(ctx, "idem", web, nil, key2, events.ToolEnabled{Name: "bash"}, events.ToolEnabled{Name: "grep"})
	if err != nil || !again.Duplicate || again.First != multi.First || again.Last != multi.Last {
		t.Fatalf("retry of the two-event append: %+v %v, want %d..%d", again, err, multi.First, multi.Last)
	}

	// A key that is not a ULID is refused.
	if _, err := e.ApplyKeyed(ctx, "idem", web, nil, "not-a-ulid", events.ToolDisabled{Name: "bash"}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("bad key: %v, want ErrInvalid", err)
	}
}
