package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// A search with view "none" loads and answers as with the full view (same
// loads, matches, output), but its view carries only the turn's identity
// and loaded tools, with empty lists (never null): the reply of a search
// of a large registry stays small. Another view value is a bad request (400)
// naming the two.
func TestDiscoverWithoutView(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	q := service.NewRequests(e)
	ctx := context.Background()
	on := true
	for _, s := range []string{"full", "none"} {
		if _, err := e.Apply(ctx, s, web, nil, events.ToolsToggled{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	input := json.RawMessage(`{"query":"send a message"}`)
	full, err := q.Discover(ctx, &wire.DiscoverRequest{Session: "full", Input: input}, web)
	if err != nil {
		t.Fatal(err)
	}
	none, err := q.Discover(ctx, &wire.DiscoverRequest{Session: "none", Input: input, View: "none"}, web)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(none.Loaded, full.Loaded) || len(none.Loaded) == 0 || !bytes.Equal(none.Output, full.Output) || len(none.Matches) != len(full.Matches) {
		t.Fatalf("view none: loaded %v, output %s; full: loaded %v, output %s", none.Loaded, none.Output, full.Loaded, full.Output)
	}
	v := none.View
	if v.Session != "none" || v.Turn != full.View.Turn || !v.Frozen || !slices.Equal(v.Loaded, full.View.Loaded) || v.ContractHash != full.View.ContractHash ||
		len(v.Tools)+len(v.Provider)+len(v.Catalog)+len(v.Classification) != 0 || len(full.View.Tools) == 0 {
		t.Errorf("view none = %+v", v)
	}
	b, err := json.Marshal(none)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("null")) || len(b) >= len(mustJSON(t, full)) {
		t.Errorf("view none reply (%d bytes, full %d) holds null or is not smaller: %s", len(b), len(mustJSON(t, full)), b)
	}
	_, err = q.Discover(ctx, &wire.DiscoverRequest{Session: "none", Input: input, View: "partial"}, web)
	if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), `"full"`) || !strings.Contains(err.Error(), `"none"`) {
		t.Errorf("view partial: %v; want a 400 naming full and none", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
