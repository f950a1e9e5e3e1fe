package deferral

import (
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
)

// For the same session, each mode's context cost is
// estimated within 15% of the real count, and discoveries extend the
// engine's array (never break it) and change no byte of the native ones.
func TestModeTable(t *testing.T) {
	for name, reg := range map[string]*resolver.Registry{"default": resolver.Default(), "10k tools": tenKRegistry(t)} {
		rows, loaded, err := ModeTable(reg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(loaded) != 3 || len(rows) != 4 {
			t.Fatalf("%s: %d discoveries, %d rows", name, len(loaded), len(rows))
		}
		t.Logf("%s:\n%s", name, ModeTableString(rows, loaded))
		for _, r := range rows {
			for _, tk := range []Tokens{r.Start, r.After} {
				if !within(tk.Estimate, tk.Real, 0.15) {
					t.Errorf("%s %s: estimate %d vs real %d", name, r.Mode, tk.Estimate, tk.Real)
				}
			}
			switch r.Mode {
			case string(ModeEngine):
				// The catalog text is the turn's, a discovery only appends.
				if r.Broken != 0 || r.Extended != 3 || r.CatalogChanges != 0 {
					t.Errorf("%s engine: %+v; want 3 extended, 0 broken, 0 catalog changes", name, r)
				}
			case string(ModeAnthropicNative), string(ModeOpenAINative):
				if r.Broken+r.Extended+r.CatalogChanges != 0 {
					t.Errorf("%s %s: %+v; want no change", name, r.Mode, r)
				}
			}
		}
		if !strings.Contains(ModeTableString(rows, loaded), "3 extended") {
			t.Errorf("table text lacks the engine's extensions")
		}
	}
}
