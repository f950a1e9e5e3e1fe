package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolintent/engine/server"
)

// Run serves until its context ends. Here: an embedded NATS server on a
// temporary data directory and a random port, the HTTP API on a random
// loopback port, and a ready file saying where both listen.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "engine-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	readyFile := filepath.Join(dir, "ready.json")

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{
			Store:     server.Store{Data: filepath.Join(dir, "data")}, // embedded server, 127.0.0.1:0
			HTTP:      "127.0.0.1:0",
			ReadyFile: readyFile,
		})
	}()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(readyFile); err == nil {
			fmt.Println("serving")
			break
		}
	}
	stop() // SIGINT in engine serve
	fmt.Println("stopped:", <-done)
	// Output:
	// serving
	// stopped: <nil>
}
