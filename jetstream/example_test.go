package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// The log on an embedded server: append with an expected sequence, and see
// a stale expectation come back as a conflict.
func ExampleLog_Append() {
	dir, _ := os.MkdirTemp("", "example-log-")
	defer os.RemoveAll(dir)
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	ctx := context.Background()
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	on := true
	res, _ := log.Append(ctx, "s1", 0, events.New("s1", "web", "alice", events.ToolsToggled{Enabled: &on}))
	fmt.Println("stored at", res.Last)
	_, err = log.Append(ctx, "s1", 0, events.New("s1", "tui", "bob", events.ToolDisabled{Name: "bash"}))
	var ce *logport.ConflictError
	fmt.Println(errors.Is(err, logport.ErrConflict), errors.As(err, &ce) && ce.Actual == 1)
	// Output:
	// stored at 1
	// true true
}
