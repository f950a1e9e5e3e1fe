package service_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// A command that changes nothing is still checked against its
// expected sequence at the log. Engine B's cached state is behind the log
// (engine A appended since); a stale expectation that matches B's cache
// must be a conflict, not a silent success (TestConcurrentHotSessions
// caught it under load).
func TestApplyNoopWithStaleExpectationConflicts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	srv := natstest.Server(t)
	open := func() (*jetstream.Log, *projection.Projection) {
		log, err := jetstream.OpenLog(ctx, natstest.Connect(t, srv.ClientURL()), jetstream.LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		proj, err := projection.Open(ctx, log, projection.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return log, proj
	}
	logA, projA := open()
	done := make(chan struct{})
	go func() { defer close(done); _ = projA.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	a := service.New(logA, projA, resolver.Default(), service.Config{})
	logB, projB := open()
	b := service.New(logB, projB, resolver.Default(), service.Config{})

	if _, err := b.Apply(ctx, "s", web, nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, "s", web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Fatal(err)
	}
	stale := uint64(1)
	res, err := b.Apply(ctx, "s", web, &stale, events.ToolDisabled{Name: "bash"})
	var ce *logport.ConflictError
	if !errors.As(err, &ce) || ce.Expected != 1 || ce.Actual != 2 {
		t.Fatalf("Apply(expected 1) on a session at 2 = %+v, %v; want a conflict 1 vs 2", res, err)
	}
}
