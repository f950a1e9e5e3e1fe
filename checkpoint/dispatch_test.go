package checkpoint

import (
	"reflect"
	"testing"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
)

// A dispatch records its resident/deferred classification, in
// resolution order, with the loaded part of the deferred tools and the
// contract hash.
func TestClassify(t *testing.T) {
	res := resolveAll(t, base(t))
	split := deferral.SplitTools(res.Tools, deferral.NewSet("web_fetch", "send_message").Has)
	got := Classify(7, res, split)
	want := Dispatch{
		Turn:         7,
		ContractHash: res.ContractHash,
		Resident:     []string{"read_file", "bash", "tool_search"},
		Deferred:     []string{"send_message", "playwright_browser", "memory_read", "web_fetch"},
		Loaded:       []string{"send_message", "web_fetch"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Classify:\n got %+v\nwant %+v", got, want)
	}
}

// The classification follows the turn: after tool_search
// loads a tool, the next request's record lists it as loaded.
func TestClassifyFollowsTurn(t *testing.T) {
	res := resolveAll(t, base(t))
	turn := deferral.Freeze(2, res, nil)
	if d := Classify(2, res, turn.Request()); len(d.Loaded) != 0 || len(d.Deferred) != 4 {
		t.Fatalf("before search: %+v, want 4 deferred, none loaded", d)
	}
	if res := turn.Load("memory_read"); len(res.Loaded) != 1 {
		t.Fatalf("search: %+v", res)
	}
	if d := Classify(2, res, turn.Request()); !reflect.DeepEqual(d.Loaded, []string{"memory_read"}) {
		t.Errorf("after search: Loaded = %v, want [memory_read]", d.Loaded)
	}
}

// A Split without a classification is classified from its
// halves, tool_search resident whatever its mark; empty inputs give empty,
// non-nil lists.
func TestClassifyHandBuiltSplit(t *testing.T) {
	split := deferral.Split{
		Provider: []resolver.Tool{
			{Name: "read_file"},
			{Name: resolver.ToolSearch, Deferred: true},
			{Name: "web_fetch", Deferred: true},
		},
		Catalog: []string{"memory_read"},
	}
	got := Classify(1, nil, split)
	want := Dispatch{
		Turn:     1,
		Resident: []string{"read_file", resolver.ToolSearch},
		Deferred: []string{"web_fetch", "memory_read"},
		Loaded:   []string{"web_fetch"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Classify:\n got %+v\nwant %+v", got, want)
	}
	empty := Classify(0, nil, deferral.Split{})
	if empty.Resident == nil || empty.Deferred == nil || empty.Loaded == nil {
		t.Errorf("Classify(empty) = %#v, want non-nil empty lists", empty)
	}
}
