package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// With 30 registry versions pushed and keep 5, a prune
// pass keeps the newest 5, the version a session's last checkpoint
// references (3) and the version an open turn was frozen against (7),
// and prunes the others from the stream; explain and history of a point
// under a pruned version (2) say "registry version ... pruned" (rule
// registry-pruned) instead of resolving against another version; the open
// turn still rebuilds, byte for byte, on a second engine that never
// served its registry.
func TestRegistryPruneKeepsReferencedVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, log := engineAt(t, url, resolver.Default(), true)
	hist, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	version := func(i int) string { return fmt.Sprintf("prune.%d", i) }
	req := service.ResolveRequest{Provider: service.ProviderAnthropicEngine}
	var oldSeq uint64
	var open wire.TurnView
	for i := 1; i <= 30; i++ {
		a.SetRegistry(pushedRegistry(t, version(i), fmt.Sprintf("extra_%d", i)))
		if err := a.RecordRegistry(ctx); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 2: // a write under version 2, nothing referencing it later
			res, err := a.Apply(ctx, "old", web, nil, events.ToolsToggled{Enabled: on(true)})
			if err != nil {
				t.Fatal(err)
			}
			oldSeq = res.Last
		case 3: // a turn ended under version 3: the last checkpoint names it
			if _, err := a.BeginTurn(ctx, "checkpointed", web, req); err != nil {
				t.Fatal(err)
			}
			cp, err := a.EndTurn(ctx, "checkpointed", web)
			if err != nil || cp.RegistryVersion != version(3) {
				t.Fatalf("checkpoint under version 3: %+v, %v", cp, err)
			}
		case 4, 26: // turns ended under 4 and 26: the last checkpoint names 26
			if _, err := a.BeginTurn(ctx, "ended", web, req); err != nil {
				t.Fatal(err)
			}
			if _, err := a.EndTurn(ctx, "ended", web); err != nil {
				t.Fatal(err)
			}
		case 7: // a turn opened under version 7 and left open
			if open, err = a.BeginTurn(ctx, "open", web, req); err != nil || open.RegistryVersion != version(7) {
				t.Fatalf("turn under version 7: %s, %v", open.RegistryVersion, err)
			}
		}
	}
	pruner, err := hist.NewPruner(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var observed []service.RegistryPrunePass
	rp, err := a.NewRegistryPrune(pruner, service.RegistryPruneConfig{Keep: 5, Observe: func(p service.RegistryPrunePass) { observed = append(observed, p) }})
	if err != nil {
		t.Fatal(err)
	}
	pass, err := rp.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pass: %d versions pruned, %d kept, in %v", len(pass.Pruned), pass.Kept, pass.Took)
	kept := []string{version(3), version(7), version(26), version(27), version(28), version(29), version(30)}
	if len(pass.Pruned) != 23 || pass.Kept != 7 || len(observed) != 1 || pass.Referenced != 4 {
		t.Fatalf("pass %+v (observed %d): want 23 pruned, 7 kept, 4 referenced (3, 7, 26 and the live 30)", pass, len(observed))
	}
	for i := 1; i <= 30; i++ {
		_, err := hist.Lookup(ctx, version(i))
		if want := slices.Contains(kept, version(i)); want != (err == nil) || (!want && !errors.Is(err, jetstream.ErrRegistryVersionPruned)) {
			t.Fatalf("version %d after the prune: %v (kept: %v)", i, err, want)
		}
	}

	// Explain and history of the write under version 2 say it was pruned.
	ex, err := a.Explain(ctx, "old", "bash", service.Until{Seq: oldSeq}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Rule != service.RulePruned || ex.RegistryVersion != version(2) || !strings.Contains(ex.Detail, "registry version "+version(2)+" pruned") {
		t.Fatalf("explain under version 2: %+v, want rule %s", ex, service.RulePruned)
	}
	h, _, err := a.History(ctx, "old", service.Until{}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || !strings.Contains(h[0].Error, "registry version "+version(2)+" pruned") || h[0].RegistryVersion != version(2) || len(h[0].Tools) != 0 {
		t.Fatalf("history under version 2: %+v", h)
	}
	// A past turn under a pruned version: its entries say so; the later
	// turn under a kept version rebuilds.
	h, _, err = a.History(ctx, "ended", service.Until{}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) < 2 || h[0].Type != string(events.TypeTurnStarted) || !strings.Contains(h[0].Error, "registry version "+version(4)+" pruned") {
		t.Fatalf("history of the turn under version 4: %+v", h)
	}
	for _, x := range h {
		if x.Turn == 2 && (x.Error != "" || x.RegistryVersion != version(26)) {
			t.Fatalf("history of the turn under version 26: %+v", x)
		}
	}
	// Now (no until) explains against the live registry.
	if ex, err := a.Explain(ctx, "old", "bash", service.Until{}, service.ResolveRequest{}); err != nil || ex.Rule == service.RulePruned || ex.RegistryVersion != version(30) {
		t.Fatalf("explain now: %+v, %v", ex, err)
	}

	// The open turn (version 7) rebuilds on an engine that never served it.
	b, _ := engineAt(t, url, resolver.Default(), false)
	got, err := b.Dispatch(ctx, "open", service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, "the open turn on a second engine after the prune", got, open)
	// Its history rebuilds the turn too.
	if h, _, err := b.History(ctx, "open", service.Until{}, service.ResolveRequest{}); err != nil || h[len(h)-1].Error != "" || h[len(h)-1].RegistryVersion != version(7) {
		t.Fatalf("history of the open turn: %+v, %v", h, err)
	}
	// A second pass finds nothing to prune.
	if pass, err := rp.Pass(ctx); err != nil || len(pass.Pruned) != 0 || pass.Kept != 7 {
		t.Fatalf("second pass %+v, %v", pass, err)
	}
}

// Keep 0 (serve --registry-keep 0) keeps every version, the old
// behaviour; a negative keep is refused naming the flag.
func TestRegistryPruneKeepZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, log := engineAt(t, url, resolver.Default(), true)
	hist, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		a.SetRegistry(pushedRegistry(t, fmt.Sprintf("k.%d", i), "extra"))
		if err := a.RecordRegistry(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pruner, err := hist.NewPruner(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := a.NewRegistryPrune(pruner, service.RegistryPruneConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if pass, err := rp.Pass(ctx); err != nil || len(pass.Pruned) != 0 {
		t.Fatalf("keep 0: %+v, %v", pass, err)
	}
	for i := 1; i <= 4; i++ {
		if _, err := hist.Lookup(ctx, fmt.Sprintf("k.%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.NewRegistryPrune(pruner, service.RegistryPruneConfig{Keep: -1}); !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "--registry-keep") {
		t.Fatalf("keep -1: %v", err)
	}
}

// BenchmarkRegistryReferences measures what a prune pass reads before it
// prunes: one view per session and one event per open turn, here
// 1,000 sessions of which 100 are in a turn.
func BenchmarkRegistryReferences(b *testing.B) {
	ctx := context.Background()
	e, _ := benchStack(b)
	const n = 1000
	for i := range n {
		s := fmt.Sprintf("s%04d", i)
		if i%10 == 0 {
			if _, err := e.BeginTurn(ctx, s, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if _, err := e.Apply(ctx, s, web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
			b.Fatal(err)
		}
	}
	waitListed(b, e, n)
	b.ResetTimer()
	for b.Loop() {
		refs, err := e.RegistryReferences(ctx)
		if err != nil || len(refs) != 1 || !refs[resolver.Default().Version()] {
			b.Fatalf("references %v, %v", refs, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/session")
}

// An engine that serves a registry version another engine's
// prune removed (it was outside the newest kept and nothing referenced
// it) records it again before a turn names it, so the turn rebuilds on
// any engine, and the next pass keeps it.
func TestRegistryPrunedVersionRecordedAgain(t *testing.T) {
	// Not parallel: it changes the package-level recheck interval the
	// other tests' engines read.
	defer service.SetRecordRecheck(0)()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	b, _ := engineAt(t, url, pushedRegistry(t, "served.old", "extra_old"), false)
	if err := b.RecordRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	a, log := engineAt(t, url, resolver.Default(), true)
	for i := 1; i <= 4; i++ {
		a.SetRegistry(pushedRegistry(t, fmt.Sprintf("newer.%d", i), "extra"))
		if err := a.RecordRegistry(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pruner, err := hist.NewPruner(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := a.NewRegistryPrune(pruner, service.RegistryPruneConfig{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if pass, err := rp.Pass(ctx); err != nil || !slices.Contains(pass.Pruned, "served.old") {
		t.Fatalf("pass %+v, %v: want served.old pruned", pass, err)
	}
	begun, err := b.BeginTurn(ctx, "on-old", web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine})
	if err != nil || begun.RegistryVersion != "served.old" {
		t.Fatalf("turn on B: %s, %v", begun.RegistryVersion, err)
	}
	c, _ := engineAt(t, url, resolver.Default(), false)
	got, err := c.Dispatch(ctx, "on-old", service.ProviderAnthropicEngine)
	if err != nil {
		t.Fatalf("a third engine rebuilds the turn on the version B recorded again: %v", err)
	}
	sameView(t, "the turn on the version recorded again", got, begun)
	if pass, err := rp.Pass(ctx); err != nil || slices.Contains(pass.Pruned, "served.old") {
		t.Fatalf("pass after the turn %+v, %v: want served.old kept", pass, err)
	}
}
