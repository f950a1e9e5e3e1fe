package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// The inspector reads a long session's timeline page by page
// (several bounded history requests, not one unbounded one), shows every
// event, and travels in time to an event of a later page.
func TestInspectorPagesHistory(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the inspector browser test needs Debian's chromium at %s (%v): run ./test.sh, which installs it", chromiumPath, err)
	}
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := p.Client("web")
	const n = 1150
	var seqs []uint64
	for len(seqs) < n {
		var cmds []events.Payload
		for i := 0; i < wire.MaxCommands && len(seqs)+len(cmds) < n; i++ {
			if (len(seqs)+i)%2 == 0 {
				cmds = append(cmds, events.ToolDisabled{Name: "bash"})
			} else {
				cmds = append(cmds, events.ToolEnabled{Name: "bash"})
			}
		}
		res, err := c.Append(ctx, "paged", nil, cmds...)
		if err != nil {
			t.Fatal(err)
		}
		for s := res.FirstSeq; s <= res.LastSeq; s++ {
			seqs = append(seqs, s)
		}
	}
	historyCalls := func() float64 {
		total := 0.0
		for k, v := range scrape(t, p.HTTPURL) {
			if strings.HasPrefix(k, "engine_api_requests_total{") && strings.Contains(k, `op="history"`) {
				total += v
			}
		}
		return total
	}
	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 50*time.Second)
	defer bcancel()
	waitFor := func(what, js, want string) {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Poll[string](fmt.Sprintf(`(v => v === %q ? v : "")(%s)`, want, js),
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil || got != want {
			t.Fatalf("%s: %s = %q, want %q (%v)\nconsole: %v", what, js, got, want, err, consoleErrs())
		}
	}
	before := historyCalls()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session=paged")); err != nil {
		t.Fatal(err)
	}
	waitFor("open", "document.body.dataset.ready", "paged@now")
	rows := `String(document.querySelectorAll("#timeline tbody tr.event").length)`
	waitFor("timeline rows", rows, strconv.Itoa(n))
	calls := historyCalls() - before
	t.Logf("inspector-history: %d events in %v history requests", n, calls)
	if calls < 2 {
		t.Fatalf("the inspector read %d events in %v history request(s): want pages (at most %d entries each)", n, calls, wire.MaxHistoryPage)
	}
	// Time travel to an event of the second page.
	at := seqs[1100]
	if _, err := chromedp.Run(bctx, chromedp.Navigate(fmt.Sprintf("%s/inspector/#session=paged&until=%d", p.HTTPURL, at))); err != nil {
		t.Fatal(err)
	}
	waitFor("time travel", "document.body.dataset.ready", fmt.Sprintf("paged@%d", at))
	waitFor("future rows", `String(document.querySelectorAll("#timeline tbody tr.event.future").length)`, strconv.Itoa(n-1101))
	// Event 1100 (even) disables bash, event 1101 enables it again: the
	// intent at each comes from the state of that point.
	if intent := text(t, bctx, "#intent"); !strings.Contains(intent, "bash") {
		t.Fatalf("intent at seq %d does not show bash disabled:\n%s", at, intent)
	}
	at = seqs[1101]
	if _, err := chromedp.Run(bctx, chromedp.Navigate(fmt.Sprintf("%s/inspector/#session=paged&until=%d", p.HTTPURL, at))); err != nil {
		t.Fatal(err)
	}
	waitFor("time travel", "document.body.dataset.ready", fmt.Sprintf("paged@%d", at))
	if intent := text(t, bctx, "#intent"); strings.Contains(intent, "bash") {
		t.Fatalf("intent at seq %d still shows bash disabled:\n%s", at, intent)
	}
}
