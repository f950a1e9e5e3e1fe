package service_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// An engine over an embedded server: store an intent, resolve a turn, load
// a deferred tool with tool_search, and end the turn at a checkpoint.
func ExampleEngine() {
	dir, _ := os.MkdirTemp("", "example-engine-")
	defer os.RemoveAll(dir)
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, _ := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	proj, _ := projection.Open(ctx, log, projection.Config{})
	go proj.Run(ctx)
	eng := service.New(log, proj, resolver.Default(), service.Config{})

	web := service.Origin{Channel: "web", Actor: "alice"}
	on := true
	if _, err := eng.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: &on}, events.ToolDisabled{Name: "bash"}); err != nil {
		fmt.Println(err)
		return
	}
	turn, _ := eng.BeginTurn(ctx, "s1", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	fmt.Println("turn", turn.Turn, "resident", len(turn.Provider), "deferred", turn.Catalog)
	found, _ := eng.Discover(ctx, "s1", web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	fmt.Println("loaded", found.Loaded, "now resident", len(found.View.Provider))
	cp, _ := eng.EndTurn(ctx, "s1", web)
	fmt.Println("checkpoint", cp.Record.Loaded)
	// Output:
	// turn 1 resident 16 deferred [playwright_browser enter_plan_mode exit_plan_mode send_message]
	// loaded [send_message] now resident 17
	// checkpoint [send_message]
}
