package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
)

// 300 HTTP GETs with an unreachable min_seq, each with a
// made-up Engine-Channel (no tokens), used to fill the engine-wide limit
// of 256 requests in flight, so that a slack NATS request and an HTTP
// client of a real channel got 429; and every made-up channel became a
// /metrics series. Now the unknown channels share one budget: the real
// channels (the configured --http-channel web, the default channel, a
// NATS channel) are served during the flood, and /metrics has one label
// value "other" for all the made-up ones.
func TestFairnessMadeUpHTTPChannels(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--http-channel", "web")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	web := p.Client("web")
	on := true
	w, err := web.Append(ctx, "fair1", nil, events.ToolsToggled{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 400}}
	defer hc.CloseIdleConnections()
	const flood = 300
	var wg sync.WaitGroup
	var busy, ok, other atomic.Int32
	for i := range flood {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.HTTPURL+"/v1/sessions/fair1?min_seq=999999999", nil)
			if err != nil {
				return
			}
			req.Header.Set(api.HeaderChannel, fmt.Sprintf("made-up-%d", i))
			resp, err := hc.Do(req)
			if err != nil {
				other.Add(1)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			switch {
			case resp.StatusCode == http.StatusTooManyRequests:
				busy.Add(1)
			case strings.Contains(string(b), `"code"`):
				ok.Add(1) // the min_seq wait ended (503 unavailable)
			default:
				other.Add(1)
			}
		})
	}
	// Wait until the flood is in: the engine answers some with busy.
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if busy.Load() == 0 {
			return errors.New("no busy reply yet")
		}
		return nil
	})
	t.Logf("fairness: %d of %d flooding requests busy when the real channels asked", busy.Load(), flood)
	start := time.Now()
	if v, err := web.Intent(ctx, "fair1", w.LastSeq); err != nil || v.Seq != w.LastSeq {
		t.Errorf("HTTP channel web (--http-channel) during the flood: %+v, %v; want served", v, err)
	}
	if v, err := client.NewHTTP(p.HTTPURL).Intent(ctx, client.IntentRequest{Session: "fair1", MinSeq: w.LastSeq}); err != nil || v.Seq != w.LastSeq {
		t.Errorf("HTTP default channel during the flood: %+v, %v; want served", v, err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	if v, err := client.NewNATS(nc, client.WithChannel("slack")).Intent(ctx, client.IntentRequest{Session: "fair1", MinSeq: w.LastSeq}); err != nil || v.Seq != w.LastSeq {
		t.Errorf("NATS channel slack during the flood: %+v, %v; want served", v, err)
	}
	t.Logf("fairness: the three real-channel reads took %s", time.Since(start))
	wg.Wait()
	t.Logf("fairness: flood outcome: %d busy, %d waited out, %d other", busy.Load(), ok.Load(), other.Load())
	if busy.Load() < flood-32 {
		t.Errorf("%d of %d made-up-channel requests got busy, want at least %d (the unknown channels share 32)", busy.Load(), flood, flood-32)
	}
	// /metrics: one label value for all the made-up channels.
	series, labels := 0, map[string]bool{}
	for k := range scrape(t, p.HTTPURL) {
		if !strings.HasPrefix(k, "engine_api_requests_total{") {
			continue
		}
		series++
		_, rest, _ := strings.Cut(k, `channel="`)
		ch, _, _ := strings.Cut(rest, `"`)
		labels[ch] = true
	}
	t.Logf("fairness: engine_api_requests_total has %d series, channel labels %v", series, labels)
	for ch := range labels {
		if strings.HasPrefix(ch, "made-up") {
			t.Errorf("/metrics has a series for the made-up channel %q", ch)
		}
	}
	if !labels[service.OtherChannels] || series > 10 {
		t.Errorf("engine_api_requests_total: %d series, channels %v; want at most 10, the made-up channels as %q", series, labels, service.OtherChannels)
	}
}
