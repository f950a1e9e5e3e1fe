package partition_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
)

// countingPruner counts the prunes asked of it and prunes nothing.
type countingPruner struct{ calls int }

func (c *countingPruner) Prune(context.Context, int, func(string) bool, int) (jetstream.RegistryPruneReport, error) {
	c.calls++
	return jetstream.RegistryPruneReport{}, nil
}

// A registry prune over partitioned views waits for every partition's
// views to reach its stream's last event: with one partition's projection
// stopped behind its log, the pass prunes nothing; once it runs, the pass
// goes on.
func TestRegistryPruneWaitsForEveryPartitionsViews(t *testing.T) {
	ctx := context.Background()
	lay := openLocal(t, 2)
	projs, eng := lay.projs, lay.eng
	run := func(p int) { runProjection(t, projs[p]) }
	// One session in each partition; only partition 0's views run.
	var behind int
	for i := 0; ; i++ {
		id := fmt.Sprintf("p-%d", i)
		if events.Partition(id, 2) == 1 {
			behind = 1
			if _, err := eng.Apply(ctx, id, web, nil, toggle(true)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	run(0)
	pruner := &countingPruner{}
	rp, err := eng.NewRegistryPrune(pruner, service.RegistryPruneConfig{Keep: 1, CatchUp: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Pass(ctx); err == nil || !strings.Contains(err.Error(), "nothing pruned") || pruner.calls != 0 {
		t.Fatalf("pass with partition %d's views behind: %v, %d prunes; want nothing pruned", behind, err, pruner.calls)
	}
	run(behind)
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		_, err := rp.Pass(ctx)
		if err == nil && pruner.calls == 0 {
			return fmt.Errorf("the pass asked no prune")
		}
		return err
	})
}
