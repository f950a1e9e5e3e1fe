package bench

import (
	"context"
	"testing"
	"time"
)

// The prompt-cache lines replay the quick conversations through the
// engine and meet their targets in every mode: every request whose intent
// and registry did not change reuses the previous request's tools prefix
// and catalog; native modes also across discoveries; the engine's catalog
// misses exactly once per discovery.
func TestPromptCacheLines(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 200 conversations")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cfg := Config{Quick: true, Out: testWriter{t}, DataDir: t.TempDir(), Only: []string{"prompt-cache"}, SkipRestart: true}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range promptCacheLineNames() {
		l, ok := rep.Line(name)
		if !ok {
			t.Fatalf("line %q missing", name)
		}
		if l.Met != nil && !*l.Met {
			t.Errorf("%s: %.2f%%, target %s missed: %s", name, l.Engine, l.Target, l.Note)
		}
	}
	t.Log("\n" + rep.Table())
}
