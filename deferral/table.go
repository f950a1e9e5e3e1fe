package deferral

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// ErrNilRegistry is returned by Table when given no registry.
var ErrNilRegistry = errors.New("nil registry")

// Tokens is a token count by the cheap estimator (Estimate) and by the
// measuring stick (Count on the actual payload).
type Tokens = wire.TokenCount

// BudgetTable is the default session's tool budget against a registry
// (Table), with deferral and without; its fields are the registry.budget
// reply's (wire.BudgetTable), and String renders it for the budget
// command.
type BudgetTable struct {
	wire.BudgetTable
}

// Reachable reports whether every default tool is resident or in the
// catalog.
func (t BudgetTable) Reachable() bool { return len(t.Unreachable) == 0 }

// Table measures the default session's tool budget against reg:
// the provider array without deferral (every default tool resident) and
// with deferral, by estimate and by the real tokenizer, the catalog, the
// reduction, and whether every default tool is still reachable. It
// tokenizes the actual payloads (resolver.RenderAnthropic, CatalogText).
func Table(reg *resolver.Registry) (BudgetTable, error) {
	if reg == nil {
		return BudgetTable{}, fmt.Errorf("build budget table: %w: pass a loaded registry, e.g. resolver.Default()", ErrNilRegistry)
	}
	enabled := true
	res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: &enabled}})
	if err != nil {
		return BudgetTable{}, fmt.Errorf("resolve default session: %w", err)
	}
	all := make([]resolver.Tool, len(res.Tools))
	copy(all, res.Tools)
	for i := range all {
		all[i].Deferred = false // the "without deferral" baseline: all resident
	}
	without := SplitTools(all, nil)
	with := SplitResolution(res, nil)

	t := BudgetTable{wire.BudgetTable{
		RegistryVersion: res.RegistryVersion,
		Encoding:        Encoding,
		Tools:           len(res.Tools),
		ResidentTools:   len(with.Provider),
		Deferred:        with.Catalog,
		DeferredCount:   len(with.Catalog),
	}}
	t.WithoutDeferral.Estimate = Estimate(without).Resident
	eb := Estimate(with)
	t.WithDeferral.Estimate = eb.Resident
	t.Catalog.Estimate = eb.Catalog

	if t.WithoutDeferral.Real, err = countTools(without.Provider); err != nil {
		return BudgetTable{}, err
	}
	if t.WithDeferral.Real, err = countTools(with.Provider); err != nil {
		return BudgetTable{}, err
	}
	t.CatalogGrouped = with.CatalogGrouped
	if t.Catalog.Real, err = Count(with.CatalogText); err != nil {
		return BudgetTable{}, fmt.Errorf("measure catalog: %w", err)
	}
	t.ReductionPercent = percentLess(t.WithDeferral.Real, t.WithoutDeferral.Real)
	t.NetReductionPercent = percentLess(t.WithDeferral.Real+t.Catalog.Real, t.WithoutDeferral.Real)
	t.EstimatedReductionPercent = percentLess(t.WithDeferral.Estimate, t.WithoutDeferral.Estimate)

	reach := make(map[string]struct{}, len(res.Tools))
	for i := range with.Provider {
		reach[with.Provider[i].Name] = struct{}{}
	}
	for _, name := range with.Catalog {
		reach[name] = struct{}{}
	}
	for _, name := range reg.DefaultTools() {
		if _, ok := reach[name]; !ok {
			t.Unreachable = append(t.Unreachable, name)
		}
	}
	return t, nil
}

// countTools counts the real tokens of the rendered Anthropic tools array;
// an empty array costs 0.
func countTools(tools []resolver.Tool) (int, error) {
	if len(tools) == 0 {
		return 0, nil
	}
	n, err := Count(string(resolver.RenderAnthropic(tools)))
	if err != nil {
		return 0, fmt.Errorf("measure tools array: %w", err)
	}
	return n, nil
}

// percentLess returns 100 * (1 - part/whole), or 0 when whole is 0.
func percentLess(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * (1 - float64(part)/float64(whole))
}

// String renders the table as aligned text for the budget command.
func (t BudgetTable) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "registry %s, %d default tools, tokens by estimate / by %s\n", t.RegistryVersion, t.Tools, t.Encoding)
	fmt.Fprintf(&b, "%-34s %8s %8s\n", "", "estimate", "real")
	fmt.Fprintf(&b, "%-34s %8d %8d\n", "resident array, no deferral", t.WithoutDeferral.Estimate, t.WithoutDeferral.Real)
	fmt.Fprintf(&b, "%-34s %8d %8d\n", fmt.Sprintf("resident array, deferral (%d)", t.ResidentTools), t.WithDeferral.Estimate, t.WithDeferral.Real)
	fmt.Fprintf(&b, "%-34s %8d %8d\n", fmt.Sprintf("catalog (%d deferred)", len(t.Deferred)), t.Catalog.Estimate, t.Catalog.Real)
	fmt.Fprintf(&b, "%-34s %7.1f%% %7.1f%%\n", "reduction of the resident array", t.EstimatedReductionPercent, t.ReductionPercent)
	fmt.Fprintf(&b, "%-34s %8s %7.1f%%\n", "net reduction (catalog counted)", "", t.NetReductionPercent)
	if len(t.Deferred) > 0 {
		shown := t.Deferred
		more := ""
		if len(shown) > 12 {
			shown, more = shown[:12], fmt.Sprintf(" and %d more", len(t.Deferred)-12)
		}
		fmt.Fprintf(&b, "deferred: %s%s\n", strings.Join(shown, ", "), more)
	}
	if t.CatalogGrouped {
		b.WriteString("catalog: over its budget, it lists servers with counts instead of names\n")
	}
	if t.Reachable() {
		b.WriteString("reachable: every default tool is resident or in the catalog\n")
	} else {
		fmt.Fprintf(&b, "UNREACHABLE default tools: %s\n", strings.Join(t.Unreachable, ", "))
	}
	return b.String()
}
