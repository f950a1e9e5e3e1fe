package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolintent/engine/events"
)

// inspRequire fails the test when Debian's chromium is missing.
func inspRequire(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the inspector browser test needs Debian's chromium at %s (%v): run ./test.sh, which installs it", chromiumPath, err)
	}
}

// inspMCPRegistry imports the MCP corpus (1,065 tools) into a registry
// file with the engine binary and returns its path.
func inspMCPRegistry(t *testing.T) string {
	t.Helper()
	reg := filepath.Join(t.TempDir(), "mcp.json")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	imp := exec.CommandContext(ctx, engineBin, "registry", "import", filepath.Join("..", "toolsearch", "searcheval", "testdata", "mcp"), "-o", reg)
	var stderr bytes.Buffer
	imp.Stderr = &stderr
	if err := imp.Run(); err != nil {
		t.Fatalf("registry import: %v\n%s", err, stderr.String())
	}
	return reg
}

// inspWait polls the page until js yields want.
func inspWait(t *testing.T, ctx context.Context, consoleErrs func() []string, what, js, want string) {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Poll[string](fmt.Sprintf(`(v => v === %q ? v : "")(%s)`, want, js),
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil || got != want {
		last, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`String(`+js+`)`))
		t.Fatalf("%s: %s = %q, want %q (%v)\nconsole: %v", what, js, last, want, err, consoleErrs())
	}
}

// inspEval evaluates js in the page.
func inspEval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// inspShot saves a full-page screenshot to /tmp/insp-shots/NAME.png (for
// a person to look at) and checks it is a real render.
func inspShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	checkScreenshot(t, shot)
	dir := filepath.Join(os.TempDir(), "insp-shots")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), shot, 0o644); err != nil {
			t.Logf("screenshot %s: %v", name, err)
		}
	}
}

// apiRequestsJS lists the API requests the page sent so far, as the
// browser's resource timing records them (path without the origin).
const apiRequestsJS = `performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname).filter((p) => p.startsWith("/v1/"))`

// #29: opening the inspector on a session of a 1,065-tool registry (the
// MCP corpus) sends a handful of API requests, not one explain request per
// registry tool (1,090 before): explain runs only when its card is opened,
// a page of tools at a time.
func TestInspectorOpenRequests(t *testing.T) {
	inspRequire(t)
	p := startEngine(t, t.TempDir(), "--registry", inspMCPRegistry(t))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := p.Client("web")
	on := true
	res, err := c.Append(ctx, "mcp-open", nil, events.ToolsToggled{Enabled: &on}, events.ToolDisabled{Name: "mcp__jira__*"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Intent(ctx, "mcp-open", res.LastSeq); err != nil {
		t.Fatal(err)
	}
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	browser, consoleErrs := startBrowser(t)
	bctx, bcancel := context.WithTimeout(browser, 80*time.Second)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session=mcp-open")); err != nil {
		t.Fatal(err)
	}
	inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", "mcp-open@now")
	sent := inspEval[[]string](t, bctx, apiRequestsJS)
	explains := 0
	for _, path := range sent {
		if strings.Contains(path, "/explain/") {
			explains++
		}
	}
	t.Logf("inspector-open: %d registry tools, %d API requests until ready (%d explain): %q", len(reg.Tools), len(sent), explains, sent)
	if explains != 0 || len(sent) > 8 {
		t.Fatalf("opening the page sent %d API requests, %d of them explain; want at most 8 and no explain before the card is opened: %q", len(sent), explains, sent)
	}
	inspShot(t, bctx, "open-mcp")
}
