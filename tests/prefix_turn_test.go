package tests

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// Against the built binary over HTTP: preset full, a turn that
// discovers memory_read then send_message, its end, and the next turn: the
// new turn's first request is byte for byte the last request of the
// previous turn (same prefix hash), engine_tool_prefix_changes_total for
// cause "turn" stays 0, and a second engine on the same stream, with no
// projection of its own, serves the same bytes.
func TestTurnBoundaryKeepsPrefixBinary(t *testing.T) {
	ctx := e2eCtx(t)
	srv := natstest.Server(t)
	a := startEngine(t, t.TempDir(), "--nats", srv.ClientURL())
	b := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--no-projection")
	ca, cb := a.Client("web"), b.Client("web")
	if _, err := ca.Append(ctx, "c1", nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.BeginTurn(ctx, wire.BeginTurnRequest{Session: "c1", Provider: "anthropic-engine"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memory_read", "send_message"} {
		if d, err := ca.Discover(ctx, "c1", "anthropic-engine", name); err != nil || !slices.Equal(d.Loaded, []string{name}) {
			t.Fatalf("discover %s: %v, %v", name, d.Loaded, err)
		}
	}
	last, err := ca.Dispatch(ctx, "c1", "anthropic-engine")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(last.Provider); n < 2 || !slices.Equal(last.Provider[n-2:], []string{"memory_read", "send_message"}) {
		t.Fatalf("turn 1 array ends %v, want memory_read, send_message", last.Provider)
	}
	if _, err := ca.EndTurn(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.BeginTurn(ctx, wire.BeginTurnRequest{Session: "c1", Provider: "anthropic-engine"}); err != nil {
		t.Fatal(err)
	}
	next, err := ca.Dispatch(ctx, "c1", "anthropic-engine")
	if err != nil {
		t.Fatal(err)
	}
	if next.PrefixHash != last.PrefixHash || !bytes.Equal(next.Rendering, last.Rendering) {
		t.Errorf("turn 2 begins with %v (prefix %.12s), turn 1 ended with %v (prefix %.12s)", next.Provider, next.PrefixHash, last.Provider, last.PrefixHash)
	}
	other, err := cb.Dispatch(ctx, "c1", "anthropic-engine")
	if err != nil {
		t.Fatal(err)
	}
	if other.PrefixHash != last.PrefixHash || !bytes.Equal(other.Rendering, last.Rendering) {
		t.Errorf("engine B serves %v (prefix %.12s), engine A %v (prefix %.12s)", other.Provider, other.PrefixHash, last.Provider, last.PrefixHash)
	}
	m := scrape(t, a.HTTPURL)
	if got := m[`engine_tool_prefix_changes_total{cause="turn"}`]; got != 0 {
		t.Errorf(`engine_tool_prefix_changes_total{cause="turn"} = %v across an unchanged turn boundary, want 0`, got)
	}
	t.Logf("prefix %.12s kept across the turn boundary, on engines A and B", last.PrefixHash)
}

// Against the built binary over HTTP: a tool disabled in the
// middle of a turn is not loaded by a search of it in that turn, and the
// query "plan mode" loads the plan-mode tools, not the weak match
// memory_write.
func TestSearchLoadsBinary(t *testing.T) {
	ctx := e2eCtx(t)
	p := startEngine(t, t.TempDir())
	c := p.Client("web")
	if _, err := c.Append(ctx, "c4", nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: "c4", Provider: "anthropic-engine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "c4", nil, events.ToolDisabled{Name: "send_message"}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Discover(ctx, "c4", "anthropic-engine", "send_message")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Loaded) != 0 || slices.Contains(d.View.Provider, "send_message") || !slices.Equal(d.NotFound, []string{"send_message"}) {
		t.Errorf("search of the disabled send_message: loaded %v, not found %v, provider %v", d.Loaded, d.NotFound, d.View.Provider)
	}
	d, err = c.ToolSearch(ctx, "c4", "anthropic-engine", json.RawMessage(`{"query":"plan mode"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(d.Loaded)); !slices.Equal(got, []string{"enter_plan_mode", "exit_plan_mode"}) {
		t.Errorf("query 'plan mode' loaded %v (matches %+v), want the two plan-mode tools only", d.Loaded, d.Matches)
	}
}

// Against the built binary: the classification of the
// last dispatch of a turn is answered after the engine is SIGKILLed and
// restarted on its data, by the new process, from the log: the open
// turn's (with the tool discovered in it), and after the turn ended and
// the engine was killed again, the ended turn's.
func TestLastDispatchAfterKill(t *testing.T) {
	ctx := e2eCtx(t)
	dir := t.TempDir()
	p := startEngine(t, dir)
	c := p.Client("web")
	if _, err := c.Append(ctx, "c6", nil, events.PresetChosen{Preset: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: "c6"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Discover(ctx, "c6", "", "memory_read"); err != nil {
		t.Fatal(err)
	}
	v, err := c.Dispatch(ctx, "c6", "")
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.LastDispatch(ctx, "c6")
	if err != nil {
		t.Fatal(err)
	}
	if before.Turn != 1 || !slices.Equal(before.Loaded, []string{"memory_read"}) || before.ContractHash != v.ContractHash {
		t.Fatalf("last dispatch before the kill: %+v", before)
	}
	same := func(what string, got wire.DispatchRecord) {
		t.Helper()
		if got.Turn != before.Turn || got.ContractHash != before.ContractHash || !slices.Equal(got.Resident, before.Resident) ||
			!slices.Equal(got.Deferred, before.Deferred) || !slices.Equal(got.Loaded, before.Loaded) || got.AtMs == 0 {
			t.Errorf("%s: last dispatch %+v, want %+v", what, got, before)
		}
	}
	p.Kill()
	p = startEngine(t, dir)
	c = p.Client("web")
	got, err := c.LastDispatch(ctx, "c6")
	if err != nil {
		t.Fatalf("last dispatch of the open turn after kill -9 and restart: %v", err)
	}
	same("open turn, after kill -9", got)
	if _, err := c.EndTurn(ctx, "c6"); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	p = startEngine(t, dir)
	got, err = p.Client("web").LastDispatch(ctx, "c6")
	if err != nil {
		t.Fatalf("last dispatch of the ended turn after kill -9 and restart: %v", err)
	}
	same("ended turn, after kill -9", got)
}
