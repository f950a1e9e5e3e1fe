package service_test

import (
	"context"
	"slices"
	"testing"

	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/service"
)

// A turn's checkpoint records only the tools it loaded, and a
// resume after a registry change still says what changed in the whole
// contract: the engine rebuilds the recorded contract from the registry
// history (the checkpoint's registry version and its turn's request), so
// a change to a tool the turn never loaded is named while every loaded
// tool is restored.
func TestResumeChangesFromRegistryHistory(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.BeginTurn(ctx, "s", web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discover(ctx, "s", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}}); err != nil {
		t.Fatal(err)
	}
	cp, err := e.EndTurn(ctx, "s", web)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Contract) != 1 || cp.Contract[0].Name != "send_message" || checkpoint.FullContract(&cp.Record) {
		t.Fatalf("checkpoint contract %+v, want send_message's entry alone", cp.Contract)
	}

	e.SetRegistry(changedRegistry(t, e.Registry(), "bash"))
	r, err := e.Resume(ctx, "s", web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Outcome.OK || !slices.Equal(r.Outcome.Restored, []string{"send_message"}) {
		t.Fatalf("resume %+v, want send_message restored", r.Outcome)
	}
	var kinds []string
	for _, c := range r.Outcome.Changes {
		kinds = append(kinds, c.Tool+":"+string(c.Kind))
	}
	if want := []string{"bash:schema-changed", ":registry-version"}; !slices.Equal(kinds, want) {
		t.Fatalf("changes %v, want %v: the whole contract's, from the registry history", kinds, want)
	}
}
