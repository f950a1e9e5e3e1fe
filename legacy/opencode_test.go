package legacy

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/resolver"
)

// An opencode-style dict {"bash": false} means every default tool
// except bash (not "all off", not "an empty list"), and a dict's true
// names add to the defaults.
func TestDictIsOpencodeOverlay(t *testing.T) {
	reg := resolver.Default()
	defaults := reg.DefaultTools()
	d := planOne(t, `[{"session": "s1", "tools": {"bash": false}}]`)
	if d.Kind != KindDefaultsMinus || !slices.Equal(types(d.Events), []string{"ToolsToggled", "ToolDisabled"}) || !d.Faithful {
		t.Fatalf("decision %s %v faithful %v (%s); want defaults-minus bash, faithful", d.Kind, types(d.Events), d.Faithful, d.Note)
	}
	if !slices.Equal(d.Intent.Disabled, []string{"bash"}) || d.Intent.Enabled == nil || !*d.Intent.Enabled {
		t.Fatalf("intent %+v; want enabled with bash disabled", d.Intent)
	}
	if want := without(defaults, "bash"); !slices.Equal(d.Stored, want) || len(d.Today) == 0 || slices.Contains(d.Today, "bash") {
		t.Fatalf("stored %v today %v; want the defaults without bash", d.Stored, d.Today)
	}
	if strings.Contains(d.Note, "empty list") {
		t.Fatalf("note %q", d.Note)
	}

	// A true name the defaults lack is added to them.
	if slices.Contains(defaults, "memory_read") {
		t.Fatal("memory_read is a default: pick another non-default tool for this test")
	}
	d = planOne(t, `[{"session": "s2", "tools": {"memory_read": true, "bash": false}}]`)
	if want := append(without(defaults, "bash"), "memory_read"); !slices.Equal(d.Stored, want) {
		t.Fatalf("stored %v; want %v", d.Stored, want)
	}
	if d.Kind == KindSkip || d.Kind == KindOff || slices.Contains(d.Today, "bash") || !slices.Contains(d.Today, "memory_read") {
		t.Fatalf("decision %s today %v (%s)", d.Kind, d.Today, d.Note)
	}

	// Every default switched off: all off, said as such.
	var off []string
	for _, n := range defaults {
		off = append(off, `"`+n+`": false`)
	}
	d = planOne(t, `[{"session": "s3", "tools": {`+strings.Join(off, ", ")+`}}]`)
	if d.Kind != KindOff || !strings.Contains(d.Note, "dict switched off every default tool") {
		t.Fatalf("decision %s (%s); want off", d.Kind, d.Note)
	}
}

// A preset stored in reverse order has the preset's tools but not
// its order, and the order is the prompt-cache prefix: it imports as the
// preset (a picked list equal to a whole preset is refused) and
// reports that it does not reproduce the stored list, naming both orders.
func TestReversedPresetIsNotFaithful(t *testing.T) {
	reg := resolver.Default()
	research, _ := reg.Preset("research")
	rev := slices.Clone(research)
	slices.Reverse(rev)
	d := planOne(t, `[{"session": "s1", "tools": `+quoteList(rev)+`}]`)
	if d.Kind != KindPreset || d.Preset != "research" {
		t.Fatalf("decision %s %q (%s); want preset research", d.Kind, d.Preset, d.Note)
	}
	if d.Faithful || !strings.Contains(d.Note, "stored order differs") {
		t.Fatalf("faithful %v note %q; want not faithful, naming the order", d.Faithful, d.Note)
	}
	// In the preset's own order it reproduces.
	d = planOne(t, `[{"session": "s2", "tools": `+quoteList(research)+`}]`)
	if d.Kind != KindPreset || !d.Faithful {
		t.Fatalf("preset in its order: %s faithful %v (%s)", d.Kind, d.Faithful, d.Note)
	}
}
