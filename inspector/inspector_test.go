package inspector

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestHandlerServesThePage(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	for _, tc := range []struct {
		path, ctype, contains string
	}{
		{"/inspector/", "text/html", `id="timeline"`},
		{"/inspector/app.js", "javascript", "/explain/"},
		{"/inspector/style.css", "text/css", ".timeline"},
	} {
		resp := get(t, mux, http.MethodGet, tc.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.contains, strings.Contains(string(body), tc.contains))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	// Every element id the page script looks up exists in the page.
	page, _ := io.ReadAll(get(t, mux, http.MethodGet, "/inspector/").Body)
	for _, id := range []string{"sessions", "session-filter", "refresh", "registry", "error", "empty", "session-view", "session-title", "session-sub",
		"mode", "now", "timeline", "intent", "intent-at", "checkpoint", "tools-at", "budget", "resident", "catalog", "resident-count",
		"catalog-count", "explain", "explain-progress", "explain-filter", "conn", "session-pager", "page-prev", "page-next", "page-label",
		"session-body", "turns", "turns-count", "policy-version", "policy-channel", "policy-note", "withheld", "withheld-count", "grants", "grants-count",
		"callcheck-form", "callcheck-tool", "callcheck-result", "callcheck-channel", "tool-names", "explain-open", "explain-body", "explain-search",
		"explain-pager", "explain-prev", "explain-next", "explain-page"} {
		if !strings.Contains(string(page), `id="`+id+`"`) {
			t.Errorf("page lacks #%s", id)
		}
	}
}

func TestHandlerRefuses(t *testing.T) {
	h := Handler()
	if resp := get(t, h, http.MethodPost, "/inspector/"); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if resp := get(t, h, http.MethodGet, "/inspector/nope.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET missing asset: %d", resp.StatusCode)
	}
	if resp := get(t, h, http.MethodGet, "/elsewhere"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET outside the prefix: %d", resp.StatusCode)
	}
	if resp := get(t, h, http.MethodGet, "/inspector"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != Prefix {
		t.Errorf("GET /inspector: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get(t, h, http.MethodHead, "/inspector/"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD: %d", resp.StatusCode)
	}
}
