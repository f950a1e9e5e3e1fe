package partition_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// An event a publisher stored in a partition its session does not belong
// to is skipped by that partition's projection, counted, and gives the
// session no view there: the engine lists each session once, from its own
// partition.
func TestMisplacedEventMakesNoViewInTheWrongPartition(t *testing.T) {
	ctx := context.Background()
	lay := openLocal(t, 2)
	logs, projs, eng := lay.logs, lay.projs, lay.eng
	for _, proj := range projs {
		runProjection(t, proj)
	}
	stray := "stray"
	own := events.Partition(stray, 2)
	wrong := 1 - own
	if _, err := eng.Apply(ctx, stray, web, nil, toggle(true)); err != nil {
		t.Fatal(err)
	}
	// A session of the other partition, whose views then hold a view.
	var local string
	for i := 0; local == ""; i++ {
		if id := fmt.Sprintf("local-%d", i); events.Partition(id, 2) == wrong {
			local = id
		}
	}
	res, err := eng.Apply(ctx, local, web, nil, toggle(true))
	if err != nil {
		t.Fatal(err)
	}
	var viewsBefore uint64
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		folded, views, err := projs[wrong].Meta().Watermark(ctx)
		if err != nil || folded < res.Last || views == 0 {
			return fmt.Errorf("partition %d watermark %d %d (%v), not yet %d with views", wrong, folded, views, err, res.Last)
		}
		viewsBefore = views
		return nil
	})
	// A direct publisher puts the session's next event on the other
	// partition's subjects.
	env := events.New(stray, "web", "mallory", events.ToolsToggled{Enabled: new(false)})
	data, err := events.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(fmt.Sprintf("tools.events.%d.%s", wrong, stray))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, env.ID)
	ack, err := logs[wrong].JetStream().PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	// Both partitions' views are written through their last event: the
	// session's own one at 1, the misplaced one at ack.Sequence.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		for p, want := range map[int]uint64{own: 1, wrong: ack.Sequence} {
			if folded, err := projs[p].FoldedUpTo(ctx); err != nil || folded < want {
				return fmt.Errorf("partition %d folded up to %d (%v), not yet %d", p, folded, err, want)
			}
		}
		return nil
	})
	if n := projs[wrong].Skipped(); n != 1 {
		t.Fatalf("partition %d skipped %d events, want the misplaced one", wrong, n)
	}
	if got, err := projs[wrong].Sessions(ctx); err != nil || !slices.Equal(got, []string{local}) {
		t.Fatalf("partition %d lists sessions %v (%v), want only [%s]", wrong, got, err, local)
	}
	want := []string{local, stray}
	slices.Sort(want)
	if got, err := eng.Sessions(ctx); err != nil || !slices.Equal(got, want) {
		t.Fatalf("the engine lists %v (%v), want %v, each once", got, err, want)
	}
	// The window that held only the misplaced event wrote no view, and the
	// watermark still records the views' sequence (0 would say a refold is
	// under way and switch off the checks that rest on it).
	if _, views, err := projs[wrong].Meta().Watermark(ctx); err != nil || views != viewsBefore {
		t.Fatalf("partition %d watermark's views sequence %d (%v) after the misplaced event, want %d", wrong, views, err, viewsBefore)
	}
	st, err := eng.Session(ctx, stray, 0)
	if err != nil || st.LastSeq != 1 || st.Intent.Enabled == nil || !*st.Intent.Enabled {
		t.Fatalf("session %s: at %d, %+v, %v; want its own partition's one event, tools on", stray, st.LastSeq, st.Intent.Enabled, err)
	}
}
