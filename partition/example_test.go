package partition_test

import (
	"context"
	"fmt"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/partition"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// An engine over two partitions: each session's events go to the log of
// the partition events.Partition names, and the engine serves it as it
// serves one stream.
func ExampleNewPorts() {
	ctx := context.Background()
	logs := []*memlog.Log{memlog.New(), memlog.New()}
	ports, err := partition.NewPorts(
		service.Ports{Log: logs[0], Views: memlog.NewViews(logs[0])},
		service.Ports{Log: logs[1], Views: memlog.NewViews(logs[1])},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	eng := service.NewFromPorts(ports, resolver.Default(), service.Config{})
	on := true
	for _, session := range []string{"alpha", "beta", "gamma"} {
		res, err := eng.Apply(ctx, session, service.Origin{Channel: "web"}, nil, events.ToolsToggled{Enabled: &on})
		if err != nil {
			fmt.Println(err)
			return
		}
		p := events.Partition(session, 2)
		last, _ := logs[p].LastSeq(ctx, session)
		fmt.Printf("%s: partition %d, sequence %d, stored there at %d\n", session, p, res.Last, last)
	}
	sessions, _ := eng.Sessions(ctx)
	fmt.Println(sessions)
	// Output:
	// alpha: partition 1, sequence 1, stored there at 1
	// beta: partition 1, sequence 2, stored there at 2
	// gamma: partition 0, sequence 1, stored there at 1
	// [alpha beta gamma]
}
