package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Readiness names each failing check and why; a check that
// failed stays failing (recovering) until it has passed for Hold, so the
// answer does not flap; liveness never fails.
func TestReadyHysteresisAndLiveness(t *testing.T) {
	now := time.Unix(1000, 0)
	var diskErr error
	c := New(Config{Hold: 2 * time.Second, Now: func() time.Time { return now }},
		Check{Name: "nats", Fn: func(context.Context) error { return nil }},
		Check{Name: "disk", Fn: func(context.Context) error { return diskErr }},
	)
	if rep := c.Ready(context.Background()); !rep.OK {
		t.Fatalf("all checks pass, report %+v", rep)
	}
	diskErr = errors.New("disk full: 10 bytes free")
	rep := c.Ready(context.Background())
	if rep.OK || rep.Checks["disk"].OK || rep.Checks["disk"].Error != "disk full: 10 bytes free" || !rep.Checks["nats"].OK {
		t.Fatalf("failing disk: %+v", rep)
	}
	diskErr = nil
	now = now.Add(time.Second)
	if rep := c.Ready(context.Background()); rep.OK || !rep.Checks["disk"].Recovering {
		t.Fatalf("1s after the fault: %+v, want recovering and not ready", rep)
	}
	now = now.Add(1500 * time.Millisecond)
	if rep := c.Ready(context.Background()); !rep.OK {
		t.Fatalf("2.5s after the fault: %+v, want ready", rep)
	}
	diskErr = errors.New("down")
	for _, path := range []string{"/readyz", "/healthz"} {
		rec := httptest.NewRecorder()
		h := c.ReadyHandler()
		if path == "/healthz" {
			h = c.LiveHandler(func() map[string]any { return map[string]any{"nats": "CLOSED"} })
		}
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		want := http.StatusServiceUnavailable
		if path == "/healthz" {
			want = http.StatusOK
		}
		if rec.Code != want || (path == "/readyz" && !strings.Contains(rec.Body.String(), `"disk":{"ok":false,"error":"down"}`)) {
			t.Fatalf("%s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
}

// A check with its own Hold recovers after it, not after the
// checker's.
func TestReadyPerCheckHold(t *testing.T) {
	now := time.Unix(1000, 0)
	var err error
	c := New(Config{Hold: 2 * time.Second, Now: func() time.Time { return now }},
		Check{Name: "stream", Hold: 500 * time.Millisecond, Fn: func(context.Context) error { return err }})
	err = errors.New("no leader")
	if rep := c.Ready(context.Background()); rep.OK {
		t.Fatalf("failing check: %+v", rep)
	}
	err = nil
	now = now.Add(300 * time.Millisecond)
	if rep := c.Ready(context.Background()); rep.OK || !rep.Checks["stream"].Recovering {
		t.Fatalf("0.3s after: %+v, want recovering", rep)
	}
	now = now.Add(300 * time.Millisecond)
	if rep := c.Ready(context.Background()); !rep.OK {
		t.Fatalf("0.6s after: %+v, want ready (own hold 0.5s)", rep)
	}
}
