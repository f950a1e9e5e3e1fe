package legacy

import (
	"testing"

	"github.com/toolintent/engine/resolver"
)

// Parse never panics on any input, and Plan never panics on what
// Parse accepts; a planned session is written only with events Decide
// accepted, so it never stores an expanded list.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`[{"session": "s1", "tools": ["read_file", "grep"], "web_search": true}]`,
		`{"defaults": ["read_file"], "presets": {"research": ["read_file"]}, "sessions": [{"session": "a", "tools": {"grep": true, "bash": false}}]}`,
		`[{"session": "s", "tools": null}, {"session": "t", "tools": true}, {"session": "u", "tools": []}]`,
		`[{"session": "x", "tools": ["web_search"]}]`, `{`, `[`, `[{"session": 1}]`, `{"sessions": [{"session": "a", "defaults": []}]}`,
	} {
		f.Add([]byte(seed))
	}
	reg := resolver.Default()
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		rep := Plan(reg, file, Options{})
		if len(rep.Decisions) != len(file.Sessions) {
			t.Fatalf("%d decisions for %d sessions", len(rep.Decisions), len(file.Sessions))
		}
		for _, d := range rep.Decisions {
			if d.Kind == KindSkip && len(d.Events) > 0 {
				t.Fatalf("a skipped session has events: %+v", d)
			}
			if len(d.Intent.Picked) > 16 {
				t.Fatalf("picked list of %d names", len(d.Intent.Picked))
			}
		}
	})
}
