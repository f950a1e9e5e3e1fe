package service_test

// A registry change's impact, checked against a brute-force
// count through two engines over a few thousand sessions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// editedRegistry is the default registry under a new version with one
// tool's parameter schema edited.
func editedRegistry(t testing.TB, tool string) *resolver.Registry {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = "builtin-2026.12.2"
	found := false
	for _, x := range doc["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == tool {
			m["parameters"].(map[string]any)["description"] = "edited for the policy test"
			found = true
		}
	}
	if !found {
		t.Fatalf("no tool %s", tool)
	}
	raw, _ := json.Marshal(doc)
	out, err := resolver.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImpactMatchesBruteForce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("publishes 2000 sessions")
	}
	const n = 2000
	const tool = "playwright_browser"
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	cand := editedRegistry(t, tool)
	eCur, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, true)
	eCand, _ := stackOn(t, url, jetstream.LogConfig{}, cand, service.Config{}, false)

	last := map[string]uint64{}
	var cps []string
	for i := range n {
		s := fmt.Sprintf("imp-%04d", i)
		var ps []events.Payload
		switch i % 4 {
		case 0:
			ps = append(ps, events.ToolsToggled{Enabled: on(true)})
		case 1:
			ps = append(ps, events.PresetChosen{Preset: "research"})
		case 2:
			ps = append(ps, events.ToolDisabled{Name: tool})
		case 3:
			ps = append(ps, events.ToolsToggled{Enabled: on(false)})
		}
		isCp := i%50 == 0 || i%50 == 3
		if i%3 == 0 || isCp {
			ps = append(ps, events.TurnStarted{Turn: 1})
			if i%3 == 0 {
				ps = append(ps, events.DeferredLoaded{Names: []string{tool}, Turn: 1})
			}
			if !isCp {
				ps = append(ps, events.TurnEnded{Turn: 1})
			}
		}
		// One append per event: an append of several is an atomic
		// batch, for which the server creates and syncs a batch store
		// (milliseconds each, see docs/performance.md), and the impact does
		// not depend on how the events were grouped.
		for _, p := range ps {
			ar, err := log.Append(ctx, s, last[s], events.New(s, "web", "alice", p))
			if err != nil {
				t.Fatal(err)
			}
			last[s] = ar.Last
		}
		if isCp {
			cps = append(cps, s)
		}
	}
	for _, s := range cps {
		if _, err := eCur.Session(ctx, s, last[s]); err != nil {
			t.Fatal(err)
		}
		cp, err := eCur.EndTurn(ctx, s, web) // records the checkpoint and ends the turn
		if err != nil {
			t.Fatal(err)
		}
		last[s] = cp.Seq
	}

	// Brute force: each session through each engine's public Resolve, in
	// the mode its turns were begun for (none recorded: the default,
	// native), where the cache breaks when the tools prefix or a
	// referenced definition changes.
	var wantChanged, wantRefs []string
	for s, seq := range last {
		a, err := eCur.Resolve(ctx, s, service.ResolveRequest{MinSeq: seq})
		if err != nil {
			t.Fatal(err)
		}
		b, err := eCand.Resolve(ctx, s, service.ResolveRequest{MinSeq: seq})
		if err != nil {
			t.Fatal(err)
		}
		if a.PrefixHash != b.PrefixHash || a.ReferencesHash != b.ReferencesHash {
			wantChanged = append(wantChanged, s)
		}
		if a.PrefixHash == b.PrefixHash && a.ReferencesHash != b.ReferencesHash {
			wantRefs = append(wantRefs, s)
		}
	}
	slices.Sort(wantChanged)
	slices.Sort(wantRefs)
	// By construction: a checkpoint that holds the edited deferred tool
	// loses it (its contract entry changed); the others lose nothing.
	var wantLoss []wire.CheckpointLoss
	wantCps := 0
	for _, s := range cps {
		st, err := eCur.Session(ctx, s, last[s])
		if err != nil {
			t.Fatal(err)
		}
		if st.Checkpoint == nil || len(st.Checkpoint.Loaded) == 0 {
			continue
		}
		wantCps++
		if slices.Contains(st.Checkpoint.Loaded, tool) {
			wantLoss = append(wantLoss, wire.CheckpointLoss{Session: s, Lost: []string{tool}})
		}
	}
	slices.SortFunc(wantLoss, func(a, b wire.CheckpointLoss) int { return cmpString(a.Session, b.Session) })

	im, err := eCur.Impact(ctx, cand)
	if err != nil {
		t.Fatal(err)
	}
	if im.Sessions != n {
		t.Errorf("examined %d sessions, want %d", im.Sessions, n)
	}
	if len(wantChanged) == 0 || len(wantChanged) == n {
		t.Fatalf("brute force finds %d changed prefixes of %d: the test does not discriminate", len(wantChanged), n)
	}
	if !slices.Equal(im.PrefixChanged, wantChanged) {
		t.Errorf("prefix changed: %d sessions, brute force %d", len(im.PrefixChanged), len(wantChanged))
	}
	if len(wantRefs) == 0 || !slices.Equal(im.ReferencesChanged, wantRefs) {
		t.Errorf("references changed: %d sessions, brute force %d", len(im.ReferencesChanged), len(wantRefs))
	}
	if len(wantLoss) == 0 || im.Checkpoints != wantCps || fmt.Sprint(im.CheckpointLosses) != fmt.Sprint(wantLoss) {
		t.Errorf("checkpoints %d losses %v; want %d, %v", im.Checkpoints, im.CheckpointLosses, wantCps, wantLoss)
	}
	d := im.Diff
	if len(d.Changed) != 1 || d.Changed[0].Name != tool || !slices.Equal(d.Changed[0].Fields, []string{"parameters"}) || d.Added != nil || d.Removed != nil || !d.AllHashesChange {
		t.Errorf("diff = %+v", d)
	}
	t.Logf("%d sessions: %d prefixes change, %d of %d checkpoints lose %s; presets %v profiles %v defaults %v",
		n, len(im.PrefixChanged), len(im.CheckpointLosses), im.Checkpoints, tool, d.Presets, d.Profiles, d.DefaultsChange)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A session and its checkpoint stored while no projection has written
// their view yet still count: Impact waits for the views to fold the log
// up to its last event before it lists them.
func TestImpactWaitsForTheViewsToReachTheLog(t *testing.T) {
	t.Parallel()
	const tool = "playwright_browser"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := natstest.Server(t).ClientURL()
	e, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	var last uint64
	for _, p := range []events.Payload{events.ToolsToggled{Enabled: on(true)}, events.TurnStarted{Turn: 1}, events.DeferredLoaded{Names: []string{tool}, Turn: 1}} {
		ar, err := log.Append(ctx, "lagging", last, events.New("lagging", "web", "alice", p))
		if err != nil {
			t.Fatal(err)
		}
		last = ar.Last
	}
	if _, err := e.EndTurn(ctx, "lagging", web); err != nil {
		t.Fatal(err)
	}
	if listed, err := e.Sessions(ctx); err != nil || len(listed) != 0 {
		t.Fatalf("with no projection running the views list %v (%v); want none", listed, err)
	}

	// The projection starts only after Impact is asked.
	runner, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(300 * time.Millisecond):
			_ = runner.Run(rctx)
		case <-rctx.Done():
		}
	}()
	defer func() { stop(); <-done }()

	im, err := e.Impact(ctx, editedRegistry(t, tool))
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.CheckpointLoss{{Session: "lagging", Lost: []string{tool}}}
	if im.Sessions != 1 || im.Checkpoints != 1 || fmt.Sprint(im.CheckpointLosses) != fmt.Sprint(want) {
		t.Fatalf("impact examined %d sessions, %d checkpoints, losses %v; want 1, 1, %v", im.Sessions, im.Checkpoints, im.CheckpointLosses, want)
	}
}

// With no projection folding the log, Impact returns an error wrapping
// projection.ErrNotCaughtUp that names how far the views are, not a
// summary that leaves out what they have not folded.
func TestImpactRefusesWhileTheViewsAreBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	e, log := stackOn(t, url, jetstream.LogConfig{}, resolver.Default(), service.Config{}, false)
	if _, err := log.Append(ctx, "unfolded", 0, events.New("unfolded", "web", "alice", events.ToolsToggled{Enabled: on(true)})); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	im, err := e.Impact(wctx, editedRegistry(t, "playwright_browser"))
	if !errors.Is(err, projection.ErrNotCaughtUp) || !strings.Contains(err.Error(), "up to [1]") {
		t.Fatalf("impact with the views behind: %+v, %v; want an error wrapping ErrNotCaughtUp naming the log's last event", im, err)
	}
	if im.Sessions != 0 || im.Diff.Changed != nil {
		t.Fatalf("impact with the views behind returned a summary: %+v", im)
	}
}
