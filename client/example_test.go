package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/wire"
)

// A backend switches a session's tools and reads its own write back.
func ExampleClient_Append() {
	ctx := context.Background()
	c := client.NewHTTP(engineHTTP, client.WithChannel("web"), client.WithActor("alice")) // "" is client.DefaultURL
	r, err := c.Append(ctx, client.AppendRequest{Session: "ex-append", Commands: []client.Command{
		client.Preset("research"), client.DisableTool("web_fetch"),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := c.Intent(ctx, client.IntentRequest{Session: "ex-append", MinSeq: r.LastSeq})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.LastSeq-r.FirstSeq+1, "events;", st.Intent.Preset, st.Intent.Disabled)
	// Output: 2 events; research [web_fetch]
}

// Resolve returns the provider request for a session's stored intent:
// the tools, their source and the rendering to send as is. MinSeq (an
// append's LastSeq) reads the append back.
func ExampleClient_Resolve() {
	ctx := context.Background()
	c := client.NewHTTP(engineHTTP, client.WithChannel("web"), client.WithActor("alice"))
	r, err := c.Append(ctx, client.AppendRequest{Session: "ex-resolve", Commands: []client.Command{
		client.Preset("research"), client.DisableTool("web_fetch"),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := c.Resolve(ctx, client.ResolveRequest{Session: "ex-resolve", MinSeq: r.LastSeq})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("source:", v.Source)
	fmt.Println("tools:", v.Tools)
	// Output:
	// source: session-intent
	// tools: [read_file list_dir glob grep tool_search web_search todo_write ask_user image_describe memory_read]
}

// Explain names the rule that keeps a tool out and the event (channel and
// actor) after which that last changed.
func ExampleClient_Explain() {
	ctx := context.Background()
	c := client.NewHTTP(engineHTTP, client.WithChannel("web"), client.WithActor("alice"))
	r, err := c.Append(ctx, client.AppendRequest{Session: "ex-explain", Commands: []client.Command{client.DisableTool("web_fetch")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Intent(ctx, client.IntentRequest{Session: "ex-explain", MinSeq: r.LastSeq}); err != nil {
		fmt.Println(err)
		return
	}
	ex, err := c.Explain(ctx, client.ExplainRequest{Session: "ex-explain", Tool: "web_fetch"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("web_fetch:", ex.Included, ex.Rule, "by", ex.Event.Type, "from", ex.Event.Channel+"/"+ex.Event.Actor)
	// Output: web_fetch: false disabled-by-session by ToolDisabled from web/alice
}

// History reads a session's timeline page by page (Until bounds it):
// each entry is the event, the intent it left and the tools it changed.
func ExampleClient_History() {
	ctx := context.Background()
	c := client.NewHTTP(engineHTTP, client.WithChannel("web"))
	r, err := c.Append(ctx, client.AppendRequest{Session: "ex-history", Commands: []client.Command{client.Preset("minimal"), client.DisableTool("bash")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := c.History(ctx, client.HistoryRequest{Session: "ex-history", Until: client.UntilSeq(r.LastSeq)})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range h.Entries {
		fmt.Println(e.Seq-r.FirstSeq+1, e.Payload["type"], "lost", len(e.Lost), "tools")
	}
	fmt.Println("more:", h.More)
	// Output:
	// 1 PresetChosen lost 17 tools
	// 2 ToolDisabled lost 1 tools
	// more: false
}

// Do calls an operation of wire's table with any request and reply types
// of the same JSON: here the registry reply as raw JSON fields.
func ExampleClient_Do() {
	c := client.NewHTTP(engineHTTP)
	var out map[string]json.RawMessage
	err := c.Do(context.Background(), wire.OpRegistry, struct{}{}, &out)
	fmt.Println(err, len(out["tools"]) > 2, len(out["version"]) > 2)
	// Output: <nil> true true
}

// A turn over NATS: begin (tools frozen), load a deferred tool with
// tool_search, end at a safe point.
func ExampleClient_TurnBegin() {
	ctx := context.Background()
	nc, err := nats.Connect(engineNATS) // client.DefaultNATSURL for `engine serve`
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	c := client.NewNATS(nc, client.WithChannel("tui"))
	turn, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: "ex-turn"})
	if err != nil {
		fmt.Println(err)
		return
	}
	found, err := c.TurnDiscover(ctx, client.DiscoverRequest{Session: "ex-turn", Input: []byte(`{"names":["send_message"]}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	end, err := c.TurnEnd(ctx, client.TurnRequest{Session: "ex-turn"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(turn.Turn, turn.Frozen, found.Loaded, end.Checkpoint.Loaded)
	// Output: 1 true [send_message] [send_message]
}

// Errors carry the stable code of docs/api.md.
func ExampleError() {
	c := client.NewHTTP(engineHTTP)
	ctx := context.Background()
	r, err := c.Append(ctx, client.AppendRequest{Session: "ex-error", Commands: []client.Command{client.Enable()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	zero := uint64(0) // "the session has no events yet": stale now
	_, err = c.Append(ctx, client.AppendRequest{Session: "ex-error", ExpectedSeq: &zero, Commands: []client.Command{client.Disable()}})
	var e *client.Error
	fmt.Println(errors.Is(err, client.ErrConflict), errors.As(err, &e) && e.Status == 409 && e.Actual == r.LastSeq)
	// Output: true true
}
