package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// inspAPIRequests is the engine's count of API requests so far, by
// operation (engine_api_requests_total summed over channels and outcomes).
func inspAPIRequests(t *testing.T, base string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range scrape(t, base) {
		if !strings.HasPrefix(k, "engine_api_requests_total{") {
			continue
		}
		_, op, _ := strings.Cut(k, `op="`)
		op, _, _ = strings.Cut(op, `"`)
		out[op] += v
	}
	return out
}

// Opening the inspector on a session sends a handful of API
// requests, not one explain request per registry tool (1,095 with the MCP
// corpus imported): explain runs only when its card is opened, a page of
// 50 tools at a time. Counted twice: by the engine (its request metrics)
// and by the browser (resource timing).
func TestInspectorOpenRequests(t *testing.T) {
	inspRequire(t)
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"default", func(*testing.T) []string { return nil }},
		{"mcp", func(t *testing.T) []string { return []string{"--registry", inspMCPRegistry(t)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startEngine(t, t.TempDir(), tc.args(t)...)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			c := p.Client("web")
			on := true
			res, err := c.Append(ctx, "open-me", nil, events.ToolsToggled{Enabled: &on}, events.ToolDisabled{Name: "bash"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Intent(ctx, "open-me", res.LastSeq); err != nil {
				t.Fatal(err)
			}
			reg, err := c.Registry(ctx)
			if err != nil {
				t.Fatal(err)
			}
			browser, consoleErrs := startBrowser(t)
			bctx, bcancel := context.WithTimeout(browser, 80*time.Second)
			defer bcancel()
			before := inspAPIRequests(t, p.HTTPURL)
			if _, err := chromedp.Run(bctx, chromedp.Navigate(p.HTTPURL+"/inspector/#session=open-me")); err != nil {
				t.Fatal(err)
			}
			inspWait(t, bctx, consoleErrs, "open", "document.body.dataset.ready", "open-me@now")
			after := inspAPIRequests(t, p.HTTPURL)
			sent := inspEval[[]string](t, bctx, apiRequestsJS)
			total, byOp := 0.0, map[string]float64{}
			for op, n := range after {
				if d := n - before[op]; d > 0 {
					byOp[op] = d
					total += d
				}
			}
			t.Logf("inspector-open %s: %d registry tools; engine counted %v API requests until ready %v; the browser sent %d: %q",
				tc.name, len(reg.Tools), total, byOp, len(sent), sent)
			if byOp["explain"] != 0 || total > 8 || len(sent) > 8 {
				t.Fatalf("opening the page cost %v API requests (%v explain), the browser sent %d; want at most 8 and no explain before the card is opened", total, byOp["explain"], len(sent))
			}
			inspShot(t, bctx, "open-"+tc.name)

			// Opening the explain card explains one page of tools, on demand.
			before = inspAPIRequests(t, p.HTTPURL)
			if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#explain-open"))); err != nil {
				t.Fatal(err)
			}
			inspWait(t, bctx, consoleErrs, "explain", "document.body.dataset.explained", "open-me@now")
			page := min(len(reg.Tools), 50)
			if n, b := inspAPIRequests(t, p.HTTPURL)["explain"]-before["explain"], inspAPIRequests(t, p.HTTPURL)["explain-batch"]-before["explain-batch"]; n != 0 || b != 1 {
				t.Errorf("the explain card sent %v explain and %v explain-batch requests, want one explain-batch for its page of %d", n, b, page)
			}
			rows := inspEval[int](t, bctx, `document.querySelectorAll("#explain tbody tr[data-state=in], #explain tbody tr[data-state=out]").length`)
			if rows != page || !strings.Contains(text(t, bctx, `#explain tbody tr[data-tool="bash"]`), "disabled-by-session") {
				t.Errorf("explain card: %d rows explained, want %d; bash: %q", rows, page, text(t, bctx, `#explain tbody tr[data-tool="bash"]`))
			}
			if len(reg.Tools) > 50 {
				// The next page explains the next 50.
				before = inspAPIRequests(t, p.HTTPURL)
				if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#explain-next"))); err != nil {
					t.Fatal(err)
				}
				inspWait(t, bctx, consoleErrs, "explain page 2", "document.body.dataset.explained", "open-me@now")
				if b := inspAPIRequests(t, p.HTTPURL)["explain-batch"] - before["explain-batch"]; b != 1 {
					t.Errorf("explain page 2 sent %v explain-batch requests, want 1 for its 50 tools", b)
				}
				if l := text(t, bctx, "#explain-page"); l != fmt.Sprintf("51–100 of %d", len(reg.Tools)) {
					t.Errorf("explain pager: %q", l)
				}
			}
			inspShot(t, bctx, "explain-"+tc.name)
			// A click on a resident tool explains that tool alone.
			before = inspAPIRequests(t, p.HTTPURL)
			if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#resident li[data-tool="read_file"] button.name`))); err != nil {
				t.Fatal(err)
			}
			inspWait(t, bctx, consoleErrs, "explain one", `document.body.dataset.explained || ""`, "open-me@now")
			one := inspEval[[]string](t, bctx, `Array.from(document.querySelectorAll("#explain tbody tr")).map((r) => r.dataset.tool + ":" + r.dataset.state)`)
			if n := inspAPIRequests(t, p.HTTPURL)["explain-batch"] - before["explain-batch"]; n != 1 || !slices.Equal(one, []string{"read_file:in"}) {
				t.Errorf("explaining read_file sent %v explain-batch requests and shows %q; want 1 and read_file in", n, one)
			}
		})
	}
}
