package deferral

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

// ErrNilRegistry is returned by Table when given no registry.
var ErrNilRegistry = errors.New("nil registry")

// Tokens is one cost measured two ways.
type Tokens struct {
	// Estimate is the cheap estimator's figure (Estimate).
	Estimate int `json:"estimate"`
	// Real is the measuring stick's figure (Count on the actual payload).
	Real int `json:"real"`
}

// BudgetTable compares the default session's per-turn tool cost without
// and with deferral. The default session is intent {enabled: true}
// with no profile and no override, resolved against the given registry.
type BudgetTable struct {
	// RegistryVersion is the version of the registry measured.
	RegistryVersion string `json:"registry_version"`
	// Encoding names the measuring stick's BPE encoding (Encoding).
	Encoding string `json:"encoding"`
	// Tools is the number of tools in the default resolution.
	Tools int `json:"tools"`
	// ResidentTools is the number of tools in the provider array with
	// deferral.
	ResidentTools int `json:"resident_tools"`
	// Deferred lists the catalog names with deferral, in order; the API
	// reply names the first 128 of them and DeferredCount counts all.
	Deferred      []string `json:"deferred"`
	DeferredCount int      `json:"deferred_count"`
	// WithoutDeferral is the provider array when every default tool is
	// resident: the rendered Anthropic tools array of the whole resolution.
	WithoutDeferral Tokens `json:"without_deferral"`
	// WithDeferral is the provider array with deferral (Split.Provider).
	WithDeferral Tokens `json:"with_deferral"`
	// Catalog is the catalog text with deferral, as sent (RenderCatalog).
	Catalog Tokens `json:"catalog"`
	// CatalogGrouped says the catalog lists namespaces with counts, the
	// deferred names being over the registry's catalog budget.
	CatalogGrouped bool `json:"catalog_grouped,omitempty"`
	// Reduction is the percentage by which deferral shrinks the provider
	// array, by the real tokenizer: 100 * (1 - WithDeferral/WithoutDeferral).
	Reduction float64 `json:"reduction_percent"`
	// NetReduction is the same, counting the catalog against deferral:
	// 100 * (1 - (WithDeferral+Catalog)/WithoutDeferral), real tokenizer.
	NetReduction float64 `json:"net_reduction_percent"`
	// EstimatedReduction is Reduction computed from the estimates.
	EstimatedReduction float64 `json:"estimated_reduction_percent"`
	// Unreachable lists default tools that are neither in the provider
	// array nor in the catalog; it must be empty. Nil when all are
	// reachable.
	Unreachable []string `json:"unreachable,omitempty"`
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

	t := BudgetTable{
		RegistryVersion: res.RegistryVersion,
		Encoding:        Encoding,
		Tools:           len(res.Tools),
		ResidentTools:   len(with.Provider),
		Deferred:        with.Catalog,
		DeferredCount:   len(with.Catalog),
	}
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
	t.Reduction = percentLess(t.WithDeferral.Real, t.WithoutDeferral.Real)
	t.NetReduction = percentLess(t.WithDeferral.Real+t.Catalog.Real, t.WithoutDeferral.Real)
	t.EstimatedReduction = percentLess(t.WithDeferral.Estimate, t.WithoutDeferral.Estimate)

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
	fmt.Fprintf(&b, "%-34s %7.1f%% %7.1f%%\n", "reduction of the resident array", t.EstimatedReduction, t.Reduction)
	fmt.Fprintf(&b, "%-34s %8s %7.1f%%\n", "net reduction (catalog counted)", "", t.NetReduction)
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
