package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// /metrics has a build-info metric and per-operation request
// counters and latency histograms by channel and outcome, fed by both
// transports.
func TestMetricsPerOperation(t *testing.T) {
	// web is a known HTTP channel; an unknown one counts as "other".
	p := startEngine(t, t.TempDir(), "--http-channel", "web")
	ctx := context.Background()
	web := p.Client("web")
	on := true
	res, err := web.Append(ctx, "mo1", nil, events.ToolsToggled{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	stale := uint64(0)
	if _, err := web.Append(ctx, "mo1", &stale, events.ToolDisabled{Name: "bash"}); err == nil {
		t.Fatal("stale expected sequence accepted")
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	tui := newNATSEngineClient(nc, client.WithChannel("tui"))
	for range 3 {
		if _, err := tui.Intent(ctx, "mo1", res.LastSeq); err != nil {
			t.Fatal(err)
		}
	}
	got := scrape(t, p.HTTPURL)
	find := func(prefix string, labels ...string) (float64, bool) {
		for k, v := range got {
			if !strings.HasPrefix(k, prefix+"{") {
				continue
			}
			all := true
			for _, l := range labels {
				all = all && strings.Contains(k, l)
			}
			if all {
				return v, true
			}
		}
		return 0, false
	}
	for _, c := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{"engine_api_requests_total", []string{`channel="web"`, `op="append"`, `outcome="ok"`}, 1},
		{"engine_api_requests_total", []string{`channel="web"`, `op="append"`, `outcome="conflict"`}, 1},
		{"engine_api_requests_total", []string{`channel="tui"`, `op="intent"`, `outcome="ok"`}, 3},
		{"engine_api_request_seconds_count", []string{`channel="tui"`, `op="intent"`, `outcome="ok"`}, 3},
		{"engine_build_info", []string{`nats_server="` + server.VERSION + `"`, `goversion="go1.`, `version=`, `commit=`}, 1},
	} {
		v, ok := find(c.metric, c.labels...)
		if !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.metric, c.labels, v, ok, c.want)
		}
	}
	if _, ok := find("engine_api_request_seconds_bucket", `op="append"`, `outcome="ok"`, `le="0.1"`); !ok {
		t.Error("no latency histogram buckets for append")
	}
}
