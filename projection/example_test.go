package projection_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// A projection folds the log into per-session views; a read asks for its
// own write with MinSeq.
func ExampleProjection_Read() {
	dir, _ := os.MkdirTemp("", "example-projection-")
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
	p, _ := projection.Open(ctx, log, projection.Config{})
	go p.Run(ctx)

	res, _ := log.Append(ctx, "s1", 0, events.New("s1", "web", "alice", events.PresetChosen{Preset: "research"}))
	st, _ := p.Read(ctx, "s1", projection.ReadOptions{MinSeq: res.Last})
	fmt.Println(st.Intent.Preset, st.LastSeq)
	empty, _ := p.Read(ctx, "nobody", projection.ReadOptions{})
	fmt.Println(empty.Intent.Enabled == nil, empty.LastSeq)
	// Output:
	// research 1
	// true 0
}
