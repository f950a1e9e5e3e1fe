package service

import (
	"fmt"
	"slices"
	"testing"

	"github.com/toolintent/engine/wire"
)

// A history entry of a large registry names at most HistoryListMax
// tools in each list (the first ones, in order) and counts every list in
// lists; an entry of a small one is as it was, without lists.
func TestHistoryEntrySummarised(t *testing.T) {
	t.Parallel()
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("mcp__s__t%04d", i)
		}
		return out
	}
	e := wire.HistoryPoint{Tools: names(300), Provider: names(20), Catalog: names(280), Gained: names(300), Lost: nil,
		Dispatch: &wire.DispatchRecord{Resident: names(20), Deferred: names(280), Loaded: names(3)}}
	tools := slices.Clone(e.Tools)
	summarise(&e)
	if len(e.Tools) != HistoryListMax || !slices.Equal(e.Tools, tools[:HistoryListMax]) || len(e.Catalog) != HistoryListMax || len(e.Gained) != HistoryListMax ||
		len(e.Provider) != 20 || e.Lost != nil || len(e.Dispatch.Deferred) != HistoryListMax || len(e.Dispatch.Resident) != 20 {
		t.Fatalf("summarised lists: tools %d catalog %d gained %d provider %d lost %v dispatch deferred %d", len(e.Tools), len(e.Catalog), len(e.Gained), len(e.Provider), e.Lost, len(e.Dispatch.Deferred))
	}
	want := wire.EntryLists{Tools: 300, Provider: 20, Catalog: 280, Gained: 300, Resident: 20, Deferred: 280, Loaded: 3}
	if e.Lists == nil || *e.Lists != want {
		t.Fatalf("lists %+v, want %+v", e.Lists, want)
	}
	small := wire.HistoryPoint{Tools: names(21), Provider: names(17), Catalog: names(4)}
	summarise(&small)
	if small.Lists != nil || len(small.Tools) != 21 {
		t.Fatalf("a small entry was summarised: %+v", small.Lists)
	}
}
