package service_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// History pages, chained by the last entry's Seq, are the
// whole timeline entry for entry, whatever the page size: each page
// starts from the state (intent, open turn, loaded tools, registry in
// force) the events before it left, so gained/lost tools, prefix changes
// and causes at a page's first entry are those of the unpaged replay,
// inside a turn and across a registry push.
func TestHistoryPagesEqualWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	e, _ := engineAt(t, url, resolver.Default(), true)
	if err := e.RecordRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Apply(ctx, "hp", web, nil, events.ToolsToggled{Enabled: on(true)}, events.ToolDisabled{Name: "bash"})
	must(err)
	_, err = e.BeginTurn(ctx, "hp", web, service.ResolveRequest{})
	must(err)
	_, err = e.Discover(ctx, "hp", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	must(err)
	_, err = e.EndTurn(ctx, "hp", web)
	must(err)
	e.SetRegistry(pushedRegistry(t, "pushed-2", "pushed_tool"))
	must(e.RecordRegistry(ctx))
	_, err = e.Apply(ctx, "hp", web, nil, events.WebSearchSet{Enabled: on(true)}, events.PresetChosen{Preset: "research"})
	must(err)
	_, err = e.BeginTurn(ctx, "hp", web, service.ResolveRequest{})
	must(err)
	_, err = e.Discover(ctx, "hp", web, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{"send_message"}}})
	must(err)
	_, err = e.Apply(ctx, "hp", web, nil, events.ToolEnabled{Name: "bash"})
	must(err)

	whole, wst, err := e.History(ctx, "hp", service.Until{}, service.ResolveRequest{})
	must(err)
	if len(whole) < 8 {
		t.Fatalf("history has %d entries, want at least 8", len(whole))
	}
	// Pages from one engine continue where the previous page ended (its
	// remembered replay); alternating with a fresh engine on the same log
	// makes every page after the first replay the session from its start.
	fresh, _ := engineAt(t, url, e.Registry(), false)
	type run struct {
		size    int
		engines []*service.Engine
	}
	var runs []run
	for _, size := range []int{1, 2, 3, 5, len(whole) - 1, len(whole), len(whole) + 1} {
		runs = append(runs, run{size, []*service.Engine{e}})
	}
	for _, size := range []int{1, 2, 3} {
		runs = append(runs, run{size, []*service.Engine{e, fresh}})
	}
	for _, rn := range runs {
		size := rn.size
		var got []service.HistoryEntry
		var st = wst
		after, pages := uint64(0), 0
		for {
			n := 0
			var more bool
			st, more, err = rn.engines[pages%len(rn.engines)].HistoryPage(ctx, "hp", service.Until{}, service.ResolveRequest{}, after, func(h service.HistoryEntry) bool {
				got = append(got, h)
				n++
				return n < size
			})
			must(err)
			pages++
			if n == 0 || n > size {
				t.Fatalf("page size %d: page %d has %d entries", size, pages, n)
			}
			if !more {
				break
			}
			after = got[len(got)-1].Seq
		}
		if !reflect.DeepEqual(got, whole) {
			for i := range min(len(got), len(whole)) {
				if !reflect.DeepEqual(got[i], whole[i]) {
					t.Fatalf("page size %d: entry %d (seq %d) differs:\npaged %+v\nwhole %+v", size, i, whole[i].Seq, got[i], whole[i])
				}
			}
			t.Fatalf("page size %d: %d entries, want %d", size, len(got), len(whole))
		}
		if !reflect.DeepEqual(st, wst) {
			t.Fatalf("page size %d: state after the last page %+v, want %+v", size, st, wst)
		}
		t.Logf("page size %d on %d engine(s): %d pages", size, len(rn.engines), pages)
	}
	// A page after the last event is empty and says no more.
	last := whole[len(whole)-1].Seq
	n := 0
	_, more, err := e.HistoryPage(ctx, "hp", service.Until{}, service.ResolveRequest{}, last, func(service.HistoryEntry) bool { n++; return true })
	if err != nil || more || n != 0 {
		t.Fatalf("page after the last event: %d entries, more %v, %v", n, more, err)
	}
}
