package projection_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// researchPlus is the embedded registry with tool added to the research
// preset, under version.
func researchPlus(t *testing.T, version, tool string) (*resolver.Registry, []byte) {
	t.Helper()
	base := resolver.Default()
	research, _ := base.Preset("research")
	data := strings.Replace(string(resolver.DefaultRegistryJSON()), `"version": "`+base.Version()+`"`, `"version": "`+version+`"`, 1)
	// The new tool is web_fetch under another name, added to research.
	i := strings.Index(data, `"presets"`)
	j := strings.Index(data[i:], `"research": [`) + i + len(`"research": [`)
	data = data[:j] + `"` + tool + `", ` + data[j:]
	k := strings.Index(data, `"tools": [`) + len(`"tools": [`)
	data = data[:k] + `{"name": "` + tool + `", "description": "Search papers.", "parameters": {"type": "object"}, "available": true, "permission": "read"}, ` + data[k:]
	reg, err := resolver.Load([]byte(data))
	if err != nil {
		t.Fatalf("load the changed registry: %v", err)
	}
	if got, _ := reg.Preset("research"); reg.Version() != version || len(got) != len(research)+1 {
		t.Fatalf("changed registry %s research %v", reg.Version(), got)
	}
	return reg, []byte(data)
}

// The registry a fold judges an event by is the one the
// history recorded last at or before the event's stream timestamp: none
// before the first record (rules not checked), the old version for an
// event stored before a push even when folded after it, the new one
// after; the projection, a read's tail fold and a replay agree.
func TestRegistryInForceAtEachEvent(t *testing.T) {
	srv := natstest.Server(t)
	e := open(t, srv.ClientURL())
	ctx := context.Background()
	hist, err := e.log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v1 := resolver.Default()
	v2, v2data := researchPlus(t, "test-research-2", "paper_search")
	oldResearch, _ := v1.Preset("research")
	newResearch, _ := v2.Preset("research")
	pick := func(s string, names []string) uint64 {
		t.Helper()
		res, err := e.log.Append(ctx, s, 0, events.New(s, "backend", "svc", events.ToolsPicked{Names: names}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Last
	}
	// Nothing recorded yet: no registry in force, the list is applied.
	pick("before-any", oldResearch)
	v1data, err := v1.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := hist.Record(ctx, v1.Version(), v1data); err != nil {
		t.Fatal(err)
	}
	pick("under-v1", oldResearch)
	pick("under-v1-new", newResearch) // not a preset of v1: paper_search is unknown there
	if err := hist.Record(ctx, v2.Version(), v2data); err != nil {
		t.Fatal(err)
	}
	pick("under-v2-old", oldResearch)
	last := pick("under-v2", newResearch)

	want := map[string]string{ // session -> "" (applied) or the version named
		"before-any": "", "under-v1": v1.Version(), "under-v1-new": "", "under-v2-old": "", "under-v2": v2.Version(),
	}
	p, _ := start(t, e.log)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.WaitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	replay := natstest.FoldLog(t, e.log)
	regs, err := projection.OpenRegistries(ctx, e.log)
	if err != nil {
		t.Fatal(err)
	}
	for s, version := range want {
		view, err := p.Read(ctx, s, projection.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tail, err := p.Read(ctx, s, projection.ReadOptions{Latest: true})
		if err != nil {
			t.Fatal(err)
		}
		for name, st := range map[string]struct {
			rejected uint64
			reasons  string
			picked   bool
		}{
			"projection": {view.Rejected, reasons(view.Rejections), view.Intent.Picked != nil},
			"tail fold":  {tail.Rejected, reasons(tail.Rejections), tail.Intent.Picked != nil},
			"replay":     {replay[s].Rejected, reasons(replay[s].Rejections), replay[s].Intent.Picked != nil},
		} {
			if version == "" && (st.rejected != 0 || !st.picked) {
				t.Errorf("%s: %s rejected %d (%s), want the pick applied", s, name, st.rejected, st.reasons)
			}
			if version != "" && (st.rejected != 1 || st.picked || !strings.Contains(st.reasons, `the whole preset "research" of registry `+version)) {
				t.Errorf("%s: %s rejected %d (%s) picked %v, want rejected against %s", s, name, st.rejected, st.reasons, st.picked, version)
			}
		}
	}
	// A fresh Registries (another engine) answers alike for each event.
	recs, err := e.log.ReadSession(ctx, "under-v1", 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("read under-v1: %d, %v", len(recs), err)
	}
	if reg, err := regs.At(ctx, recs[0].Time); err != nil || reg == nil || reg.Version() != v1.Version() {
		t.Fatalf("registry in force at under-v1's event: %v, %v; want %s", reg, err, v1.Version())
	}
}

func reasons(rs []aggregate.Rejection) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Reason + "; ")
	}
	return b.String()
}
