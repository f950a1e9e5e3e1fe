package service_test

import (
	"context"
	"slices"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
)

// Any engine answers the classification of a session's
// last dispatch from the log, also one that served none of it (as after
// a crash of the engine that did), for the open turn and after it ended;
// a session that never started a turn has none.
func TestLastDispatchFromLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, _ := hookedEngineAt(t, url, service.Config{}, true)
	b, _ := hookedEngineAt(t, url, service.Config{}, false)
	const s = "dispatch-log"
	if _, err := a.Apply(ctx, s, web, nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.LastDispatchOf(ctx, s); ok || err != nil {
		t.Fatalf("before any turn: found %v, %v; want none", ok, err)
	}
	if _, err := a.BeginTurn(ctx, s, web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Discover(ctx, s, web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Dispatch(ctx, s, ""); err != nil {
		t.Fatal(err)
	}
	want, ok := a.LastDispatch(s)
	if !ok || !slices.Equal(want.Loaded, []string{"send_message"}) {
		t.Fatalf("A's last dispatch %+v, %v", want, ok)
	}
	check := func(what string) {
		t.Helper()
		got, ok, err := b.LastDispatchOf(ctx, s)
		if err != nil || !ok || got.Turn != want.Turn || got.ContractHash != want.ContractHash || !slices.Equal(got.Resident, want.Resident) ||
			!slices.Equal(got.Deferred, want.Deferred) || !slices.Equal(got.Loaded, want.Loaded) || got.At == 0 {
			t.Errorf("%s: B answers %+v (%v, %v), A recorded %+v", what, got, ok, err, want)
		}
	}
	check("open turn")
	if _, err := a.EndTurn(ctx, s, web); err != nil {
		t.Fatal(err)
	}
	check("ended turn")
}
