package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
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

// A turn over NATS: begin (tools frozen), load a deferred tool with
// tool_search, end at a safe point.
func ExampleClient_BeginTurn() {
	ctx := context.Background()
	nc, err := nats.Connect(engineNATS) // client.DefaultNATSURL for `engine serve`
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	c := client.NewNATS(nc, client.WithChannel("tui"))
	turn, err := c.BeginTurn(ctx, client.BeginTurnRequest{Session: "ex-turn"})
	if err != nil {
		fmt.Println(err)
		return
	}
	found, err := c.Discover(ctx, client.DiscoverRequest{Session: "ex-turn", Input: []byte(`{"names":["send_message"]}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	end, err := c.EndTurn(ctx, client.TurnRequest{Session: "ex-turn"})
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
