package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// A native rendering never drops a tool the session's history
// references: loaded with a tool_reference, then disabled, it stays
// defined (deferred, marked not callable) in the next turn, and the call
// check refuses it.
func TestNativeKeepsReferencedTool(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "history-safe"
	for _, p := range []string{service.ProviderAnthropic, service.ProviderOpenAI} {
		sess := s + "-" + p
		if _, err := e.BeginTurn(ctx, sess, web, service.ResolveRequest{Provider: p}); err != nil {
			t.Fatal(err)
		}
		d, err := e.Discover(ctx, sess, web, service.DiscoverRequest{Provider: p, CallID: "c1", Search: deferral.SearchRequest{Names: []string{"send_message"}}})
		if err != nil || len(d.Loaded) != 1 {
			t.Fatalf("%s: discover: %+v, %v", p, d.Loaded, err)
		}
		if _, err := e.EndTurn(ctx, sess, web); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Apply(ctx, sess, web, nil, events.ToolDisabled{Name: "send_message"}); err != nil {
			t.Fatal(err)
		}
		v, err := e.BeginTurn(ctx, sess, web, service.ResolveRequest{Provider: p})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(v.Rendering, []byte(`"send_message"`)) || !bytes.Contains(v.Rendering, []byte(deferral.UnavailableNote)) {
			t.Errorf("%s: the next turn's array dropped send_message, or does not mark it not callable", p)
		}
		again, err := e.Dispatch(ctx, sess, p)
		if err != nil || !bytes.Equal(again.Rendering, v.Rendering) {
			t.Errorf("%s: a dispatch of the turn renders otherwise: %v", p, err)
		}
		c, err := e.CallCheck(ctx, sess, "send_message")
		if err != nil || c.Callable || c.Reason != wire.CallDisabled {
			t.Errorf("%s: call check of the disabled tool: %+v, %v", p, c, err)
		}
		// The end of that turn checkpoints a loaded set without it; the
		// history still references it, so the next turn keeps it too.
		if _, err := e.EndTurn(ctx, sess, web); err != nil {
			t.Fatal(err)
		}
		v3, err := e.BeginTurn(ctx, sess, web, service.ResolveRequest{Provider: p})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v3.Rendering, v.Rendering) {
			t.Errorf("%s: the turn after the checkpoint renders otherwise (dropped send_message?)", p)
		}
	}
}

// The call check answers callable with the turn's resolved
// tool and its permission, and otherwise says why: disabled (also mid-
// turn, for a tool the turn froze), not in the turn, unknown; outside a
// turn it is ErrNoTurn.
func TestCallCheck(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "call-check"
	if _, err := e.CallCheck(ctx, s, "read_file"); !errors.Is(err, service.ErrNoTurn) {
		t.Fatalf("outside a turn: %v, want ErrNoTurn", err)
	}
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	c, err := e.CallCheck(ctx, s, "bash")
	if err != nil || !c.Callable || c.Reason != wire.CallCallable || c.Tool == nil || c.Tool.Name != "bash" || c.Permission == "" || c.Permission != c.Tool.Permission || c.Turn != 1 {
		t.Fatalf("bash: %+v, %v", c, err)
	}
	if c, err = e.CallCheck(ctx, s, "send_message"); err != nil || !c.Callable || !c.Deferred || c.Loaded {
		t.Errorf("a deferred tool not loaded by the engine stays callable (a provider's own search may load it): %+v, %v", c, err)
	}
	if _, err := e.Apply(ctx, s, web, nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	if c, err = e.CallCheck(ctx, s, "bash"); err != nil || c.Callable || c.Reason != wire.CallDisabled || c.Tool == nil {
		t.Errorf("bash disabled mid-turn: %+v, %v", c, err)
	}
	if c, err = e.CallCheck(ctx, s, "memory_read"); err != nil || c.Callable || c.Reason != wire.CallNotInTurn || c.Tool != nil {
		t.Errorf("memory_read (not in the default set): %+v, %v", c, err)
	}
	if c, err = e.CallCheck(ctx, s, "no_such_tool"); err != nil || c.Callable || c.Reason != wire.CallUnknown {
		t.Errorf("an unknown tool: %+v, %v", c, err)
	}
	if _, err := e.CallCheck(ctx, s, ""); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("an empty name: %v, want ErrInvalid", err)
	}
}

// Native renderings are shared across sessions and turns
// only when they are the same array: two sessions with the same intent
// get byte-identical arrays, and a session whose history references a
// tool the other's does not gets its own (the referenced tool defined),
// whichever rendered first.
func TestNativeRenderingSharedOnlyWhenSame(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	// "ref" loads send_message, ends the turn, disables it.
	if _, err := e.BeginTurn(ctx, "ref", web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if d, err := e.Discover(ctx, "ref", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}}); err != nil || len(d.Loaded) != 1 {
		t.Fatalf("discover: %+v, %v", d, err)
	}
	if _, err := e.EndTurn(ctx, "ref", web); err != nil {
		t.Fatal(err)
	}
	views := map[string]wire.TurnView{}
	for _, s := range []string{"plain1", "ref", "plain2"} {
		if _, err := e.Apply(ctx, s, web, nil, events.ToolDisabled{Name: "send_message"}); err != nil {
			t.Fatal(err)
		}
		v, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{})
		if err != nil {
			t.Fatal(err)
		}
		views[s] = v
	}
	if views["plain1"].ContractHash != views["ref"].ContractHash {
		t.Fatalf("the sessions' contracts differ; the test needs one contract")
	}
	if !bytes.Equal(views["plain1"].Rendering, views["plain2"].Rendering) {
		t.Error("two sessions with the same intent render different arrays")
	}
	if bytes.Contains(views["plain1"].Rendering, []byte(`"send_message"`)) {
		t.Error("a session that never loaded send_message renders it")
	}
	if !bytes.Contains(views["ref"].Rendering, []byte(`"send_message"`)) {
		t.Error("the session that loaded send_message got another session's array without it")
	}
}

// The JSON replies of a turn view and of a discovery carry the
// rendering byte for byte (spliced in by wire.Marshal, not re-encoded),
// inside valid JSON.
func TestTurnRepliesCarryRenderingBytes(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	v, err := e.BeginTurn(ctx, "raw-reply", web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	name := deferredTool(v, false)
	d, err := e.Discover(ctx, "raw-reply", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{name}}})
	if err != nil {
		t.Fatal(err)
	}
	for label, c := range map[string]struct {
		reply     any
		rendering []byte
		view      func([]byte) (json.RawMessage, error)
	}{
		"view": {v, v.Rendering, func(b []byte) (json.RawMessage, error) {
			var x struct{ Rendering json.RawMessage }
			err := json.Unmarshal(b, &x)
			return x.Rendering, err
		}},
		"discovery": {d, d.View.Rendering, func(b []byte) (json.RawMessage, error) {
			var x struct {
				View struct{ Rendering json.RawMessage }
			}
			err := json.Unmarshal(b, &x)
			return x.View.Rendering, err
		}},
	} {
		b, err := wire.Marshal(c.reply)
		if err != nil || !json.Valid(b) {
			t.Fatalf("%s: %v, valid %v", label, err, json.Valid(b))
		}
		got, err := c.view(b)
		if err != nil || !bytes.Equal(got, c.rendering) || len(c.rendering) < 1024 {
			t.Errorf("%s: the reply's rendering (%d bytes, %v) is not the view's (%d bytes)", label, len(got), err, len(c.rendering))
		}
	}
}

// Call-check agrees with the array the request sends. In an
// engine-side mode the array defines the resident and loaded tools only,
// so a deferred tool the turn has not loaded is not callable (not_loaded)
// until tool_search loads it; in a native mode every tool of the turn is
// defined, so it is callable. The mode is the request's, else the one the
// turn was begun for (recorded in its TurnStarted), else the default.
func TestCallCheckAgreesWithTheArray(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	if _, err := e.BeginTurn(ctx, "cc", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	c, err := e.CallCheckIn(ctx, "cc", "send_message", "", "")
	if err != nil || c.Callable || c.Reason != wire.CallNotLoaded || c.Provider != service.ProviderAnthropicEngine || !c.Deferred || c.Loaded {
		t.Fatalf("engine-side turn, deferred tool not loaded: %+v, %v; want not callable, not_loaded", c, err)
	}
	c, err = e.CallCheckIn(ctx, "cc", "send_message", "", service.ProviderAnthropic)
	if err != nil || !c.Callable || c.Provider != service.ProviderAnthropic {
		t.Fatalf("the same turn asked for a native request: %+v, %v; want callable", c, err)
	}
	if c, err = e.CallCheckIn(ctx, "cc", "read_file", "", ""); err != nil || !c.Callable {
		t.Fatalf("resident tool: %+v, %v; want callable", c, err)
	}
	if _, err := e.Discover(ctx, "cc", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}}); err != nil {
		t.Fatal(err)
	}
	if c, err = e.CallCheckIn(ctx, "cc", "send_message", "", ""); err != nil || !c.Callable || !c.Loaded {
		t.Fatalf("after tool_search loaded it: %+v, %v; want callable, loaded", c, err)
	}
	if _, err := e.CallCheckIn(ctx, "cc", "send_message", "", "nosuch"); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("an unknown provider: %v, want ErrInvalid", err)
	}

	// A turn begun without a provider is the default, native.
	if _, err := e.BeginTurn(ctx, "cc2", web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if c, err = e.CallCheckIn(ctx, "cc2", "send_message", "", ""); err != nil || !c.Callable || c.Provider != deferral.DefaultProvider {
		t.Fatalf("default turn: %+v, %v; want callable in %s", c, err, deferral.DefaultProvider)
	}
}

// Eviction shrinks the loaded set, but in a native mode the
// tool_reference blocks already in the history keep the evicted tools'
// definitions in the provider's context: the view names them as
// references a backend may drop when it compacts its history, and keeps
// defining them; the engine's catalog modes have nothing to drop.
func TestDroppableReferencesAfterEviction(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	ctx := context.Background()
	const s = "evicted-refs"
	if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Discover(ctx, s, web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message", "enter_plan_mode"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EndTurn(ctx, s, web); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(ctx, s, web, nil, events.DeferredEvicted{Names: []string{"send_message"}, Reason: "bound"}); err != nil {
		t.Fatal(err)
	}
	v, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.DroppableReferences) != 1 || v.DroppableReferences[0] != "send_message" || !bytes.Contains(v.Rendering, []byte(`"send_message"`)) {
		t.Fatalf("native view after evicting send_message: droppable %v, loaded %v; want send_message droppable and still defined", v.DroppableReferences, v.Loaded)
	}
	if ev, err := e.Resolve(ctx, s, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil || len(ev.DroppableReferences) != 0 {
		t.Fatalf("engine-mode view: droppable %v, %v; want none", ev.DroppableReferences, err)
	}
}
