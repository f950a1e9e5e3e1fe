package deferral

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// With the embedded default registry the default resident array drops
// from about 7.9k to about 4.7k tokens a turn (about 41%), by the real
// tokenizer, and no default tool becomes unreachable.
func TestTableDefaultRegistry(t *testing.T) {
	tab, err := Table(resolver.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", tab)
	if w := tab.WithoutDeferral.Real; w < 7505 || w > 8295 {
		t.Errorf("resident array without deferral = %d tokens, want 7.9k ± 5%% (7505..8295)", w)
	}
	if w := tab.WithDeferral.Real; w < 4465 || w > 4935 {
		t.Errorf("resident array with deferral = %d tokens, want 4.7k ± 5%% (4465..4935)", w)
	}
	if r := tab.ReductionPercent; r < 38 || r > 44 {
		t.Errorf("reduction = %.1f%%, want 38..44%%", r)
	}
	if !tab.Reachable() {
		t.Errorf("unreachable default tools: %v", tab.Unreachable)
	}
	if tab.Encoding != Encoding || tab.RegistryVersion != resolver.Default().Version() {
		t.Errorf("table header = %s / %s", tab.Encoding, tab.RegistryVersion)
	}
}

// The table's estimates follow its real counts (each half within
// 15%) and every default tool stays reachable, for every test registry.
func TestTableEstimatesAndReachability(t *testing.T) {
	for name, reg := range allRegistries(t) {
		tab, err := Table(reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for label, tk := range map[string]Tokens{"without deferral": tab.WithoutDeferral, "with deferral": tab.WithDeferral, "catalog": tab.Catalog} {
			if !within(tk.Estimate, tk.Real, 0.15) {
				t.Errorf("%s %s: estimate %d vs real %d: off by more than 15%%", name, label, tk.Estimate, tk.Real)
			}
		}
		if !tab.Reachable() {
			t.Errorf("%s: unreachable default tools %v", name, tab.Unreachable)
		}
		if tab.ResidentTools+len(tab.Deferred) != tab.Tools {
			t.Errorf("%s: %d resident + %d deferred != %d tools", name, tab.ResidentTools, len(tab.Deferred), tab.Tools)
		}
		if got := tab.String(); !strings.Contains(got, "reachable: every default tool") {
			t.Errorf("%s: String() = %q", name, got)
		}
	}
}

// Table refuses a nil registry with a sentinel, without panicking.
func TestTableNilRegistry(t *testing.T) {
	if _, err := Table(nil); !errors.Is(err, ErrNilRegistry) {
		t.Errorf("Table(nil) err = %v, want ErrNilRegistry", err)
	}
}

// The unreachable report names a default tool missing from both
// halves, and String says so.
func TestBudgetTableUnreachableString(t *testing.T) {
	tab := BudgetTable{wire.BudgetTable{Unreachable: []string{"ghost"}}}
	if tab.Reachable() || !strings.Contains(tab.String(), "UNREACHABLE default tools: ghost") {
		t.Errorf("unreachable table renders %q", tab.String())
	}
}
