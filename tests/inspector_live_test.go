package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolintent/engine/events"
)

// The inspector opens a session from a ?session= deep link
// (as well as #session=) and follows it live: an event appended while the
// page is open appears without a reload.
func TestInspectorDeepLinkAndLiveRefresh(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the inspector browser test needs Debian's chromium at %s (%v): run ./test.sh, which installs it", chromiumPath, err)
	}
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c := p.Client("web")
	on := true
	first, err := c.Append(ctx, "live-1", nil, events.ToolsToggled{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Intent(ctx, "live-1", first.LastSeq); err != nil {
		t.Fatal(err)
	}
	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 40*time.Second)
	defer bcancel()
	// waitFor polls the page until js yields want (at most 20 s).
	waitFor := func(what, js, want string) {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Poll[string](fmt.Sprintf(`(v => v === %q ? v : "")(%s)`, want, js),
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil || got != want {
			t.Fatalf("%s: %s = %q, want %q (%v)\nconsole: %v", what, js, got, want, err, consoleErrs())
		}
	}
	for _, link := range []string{"/inspector/?session=live-1", "/inspector/#session=live-1"} {
		if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+link)); err != nil {
			t.Fatalf("open %s: %v", link, err)
		}
		waitFor(link, "document.body.dataset.ready", "live-1@now")
		waitFor(link, "document.body.dataset.seq", fmt.Sprint(first.LastSeq))
	}
	// Appended while the page is open: the page shows it by itself.
	next, err := c.Append(ctx, "live-1", nil, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("live refresh", "document.body.dataset.seq", fmt.Sprint(next.LastSeq))
	waitFor("live refresh", "document.body.dataset.ready", "live-1@now")
	if tl := text(t, bctx, "#timeline tbody"); !strings.Contains(tl, "ToolDisabled") || !strings.Contains(tl, "−bash") {
		t.Fatalf("timeline after the live refresh lacks the new event:\n%s", tl)
	}
}

// The live view follows the session's event stream instead of
// polling: once the stream is open, an event appended while the page is
// open shows up with no intent (GET /v1/sessions/{s}) request at all,
// where polling sent one every 1.5 s (counted by the engine's request
// metrics), and with no more than one session-list refresh.
func TestInspectorLiveStreamNoPolling(t *testing.T) {
	inspRequire(t)
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c := p.Client("web")
	on := true
	first, err := c.Append(ctx, "stream-1", nil, events.ToolsToggled{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 40*time.Second)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session=stream-1")); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", "stream-1@now")
	inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.seq", fmt.Sprint(first.LastSeq))
	inspWait(t, bctx, consoleErrs, "live stream", "document.body.dataset.live", "stream")
	before := inspAPIRequests(t, p.HTTPURL)
	// Longer than two polling periods pass on purpose between the two
	// counts: polling would have asked at least twice.
	time.Sleep(3500 * time.Millisecond)
	next, err := c.Append(ctx, "stream-1", nil, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "live event", "document.body.dataset.seq", fmt.Sprint(next.LastSeq))
	inspWait(t, bctx, consoleErrs, "live event", "document.body.dataset.ready", "stream-1@now")
	after := inspAPIRequests(t, p.HTTPURL)
	if d := after["intent"] - before["intent"]; d != 0 {
		t.Errorf("%v intent requests while the stream was open, want 0 (no polling)", d)
	}
	if d := after["sessions"] - before["sessions"]; d > 1 {
		t.Errorf("%v session-list requests while the stream was open, want at most 1 (every 15 s)", d)
	}
	if after["history"] <= before["history"] {
		t.Errorf("the view did not load again after the event (history requests %v -> %v)", before["history"], after["history"])
	}
	if tl := text(t, bctx, "#timeline tbody"); !strings.Contains(tl, "ToolDisabled") {
		t.Fatalf("timeline after the live event lacks it:\n%s", tl)
	}
}
