package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/natstest"
)

// A projection runner gives its lease up however it stops: engine rebuild
// run right after a clean stop, or right after another rebuild, is not
// refused, and an engine started right after a rebuild folds at once
// instead of standing by until the lease expires (its info log would say
// "standing by"). Each round stops the engine a little later after it is
// ready; one stream and three partitions.
func TestRebuildRightAfterAStopOrARebuildIsNotRefused(t *testing.T) {
	for _, parts := range []string{"1", "3"} {
		url := natstest.Server(t).ClientURL()
		rebuild := func(round int, after string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if out, err := exec.CommandContext(ctx, engineBin, "rebuild", "--nats", url).CombinedOutput(); err != nil {
				t.Fatalf("partitions %s, round %d: rebuild right after %s: %v\n%s", parts, round, after, err, out)
			}
		}
		for round := range 4 {
			p := startEngine(t, t.TempDir(), "--nats", url, "--partitions", parts, "--log-level", "info")
			time.Sleep(time.Duration(round) * 100 * time.Millisecond)
			p.Stop(t)
			if strings.Contains(p.Stderr.String(), "standing by") {
				t.Fatalf("partitions %s, round %d: the engine stood by after a rebuild:\n%s", parts, round, p.Stderr.String())
			}
			rebuild(round, "a clean stop")
			rebuild(round, "another rebuild")
		}
	}
}
