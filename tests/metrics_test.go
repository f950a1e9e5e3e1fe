package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
)

// scrape reads /metrics into name{labels} -> value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// Appends, conflicts, dedupe-free retries, undecodable events and
// tool-prefix changes by cause are counted and read back from /metrics;
// /healthz and /readyz answer.
func TestMetricsCounters(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx := context.Background()
	c := p.Client("web")
	on, off := true, false
	if _, err := c.Append(ctx, "m1", nil, events.ToolsToggled{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "m1", nil, events.ToolDisabled{Name: "bash"}, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	stale := uint64(0)
	for i := 0; i < 2; i++ {
		if _, err := c.Append(ctx, "m1", &stale, events.WebSearchSet{Enabled: &off}); !errors.Is(err, service.ErrConflict) {
			t.Fatalf("stale append: %v, want conflict", err)
		}
	}
	// Two dispatches with an intent change between them: one prefix change
	// caused by intent.
	if _, err := c.Dispatch(ctx, "m1", ""); err != nil {
		t.Fatal(err)
	}
	res, err := c.Append(ctx, "m1", nil, events.ToolEnabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Intent(ctx, "m1", res.LastSeq); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dispatch(ctx, "m1", ""); err != nil {
		t.Fatal(err)
	}
	// An undecodable event published straight to the session subject.
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	if _, err := nc.Request("tools.events.m1", []byte("not msgpack"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		m = scrape(t, p.HTTPURL)
		if m["engine_undecodable_events_total"] != 1 || m["engine_projection_folded_total"] != 5 {
			return fmt.Errorf("undecodable = %v, folded = %v; want 1 and 5 (4 events + 1 undecodable)",
				m["engine_undecodable_events_total"], m["engine_projection_folded_total"])
		}
		return nil
	})
	want := map[string]float64{
		"engine_appends_total":                               3,
		"engine_events_appended_total":                       4,
		"engine_dedupes_total":                               0,
		`engine_conflicts_total{retried="false"}`:            2,
		`engine_tool_prefix_changes_total{cause="intent"}`:   1,
		`engine_tool_prefix_changes_total{cause="registry"}`: 0,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if m["engine_resolve_seconds_count"] < 2 {
		t.Errorf("engine_resolve_seconds_count = %v, want >= 2", m["engine_resolve_seconds_count"])
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(p.HTTPURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s = %d, want 200", path, resp.StatusCode)
		}
	}
}
