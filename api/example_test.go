package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// A backend drives a session over the HTTP gateway with a Client.
func ExampleClient() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "api-example")
	defer os.RemoveAll(dir)
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	log, _ := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	proj, _ := projection.Open(ctx, log, projection.Config{})
	go proj.Run(ctx)
	eng := service.New(log, proj, resolver.Default(), service.Config{})

	a, err := api.New(eng, api.Config{})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(a.Handler())
	defer hs.Close()
	c := api.NewClient(hs.URL, api.WithChannel("web"), api.WithActor("alice"))

	// Store intent, never a tool list.
	res, err := c.Append(ctx, "chat-42", nil, events.PresetChosen{Preset: "research"}, events.ToolDisabled{Name: "web_fetch"})
	if err != nil {
		fmt.Println(err)
		return
	}
	view, _ := c.Resolve(ctx, api.ResolveRequest{Session: "chat-42", MinSeq: res.LastSeq})
	fmt.Println("source:", view.Source)
	fmt.Println("tools:", view.Tools)

	ex, _ := c.Explain(ctx, api.ExplainRequest{Session: "chat-42", Tool: "web_fetch"})
	fmt.Println("web_fetch:", ex.Included, ex.Rule, "by", ex.Event.Type, "from", ex.Event.Channel+"/"+ex.Event.Actor)

	// A stale expected sequence is a conflict carrying both sequences.
	_, err = c.Append(ctx, "chat-42", new(uint64), events.ToolsToggled{})
	var ae *api.APIError
	if errors.As(err, &ae) {
		fmt.Println(ae.Status, ae.Code, "expected", ae.Expected, "actual", ae.Actual == res.LastSeq)
	}
	// Output:
	// source: session-intent
	// tools: [read_file list_dir glob grep tool_search web_search todo_write ask_user image_describe memory_read]
	// web_fetch: false disabled-by-session by ToolDisabled from web/alice
	// 409 conflict expected 0 actual true
}

// Commands in JSON decode strictly into event payloads.
func ExampleDecodeCommand() {
	p, err := api.DecodeCommand([]byte(`{"type":"ToolDisabled","name":"bash"}`))
	fmt.Printf("%#v %v\n", p, err)
	_, err = api.DecodeCommand([]byte(`{"type":"ToolzToggled","enabled":true}`))
	fmt.Println(err)
	_, err = api.DecodeCommand([]byte(`{"type":"ToolsToggled","enabled":"on"}`))
	fmt.Println(err)
	// Output:
	// events.ToolDisabled{Name:"bash"} <nil>
	// unknown command type "ToolzToggled": use one of ToolsToggled, WebSearchSet, PresetChosen, ToolDisabled, ToolEnabled, ToolsPicked, DeferredLoaded, TurnStarted, TurnEnded, CheckpointRecorded
	// command ToolsToggled: field "enabled" must be true, false or null, got "on"
}
