package api

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// A busy (429) reply and an
// unavailable (503) reply carry Retry-After, as an HTTP header and as a
// NATS header. One read waits for a sequence that never comes (503 once
// the request timeout ends it) and holds the channel's only slot, so the
// next request of the channel is busy.
func TestRetryAfterOnBusyAndUnavailable(t *testing.T) {
	env := newEnv(t, Config{MaxInFlightPerChannel: 1, RequestTimeout: 2 * time.Second})
	want := strconv.Itoa(RetryAfterSeconds)

	t.Run("nats", func(t *testing.T) {
		inbox := env.nc.NewRespInbox()
		sub, err := env.nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.nc.PublishRequest("tools.api.web.session.intent", inbox, []byte(`{"session":"ra1","min_seq":999999}`)); err != nil {
			t.Fatal(err)
		}
		holding(t, env, "web")
		m := rawNATS(t, env.nc, "tools.api.web.session.intent", `{"session":"ra1"}`)
		if m.Header.Get(micro.ErrorCodeHeader) != "429" {
			t.Fatalf("a second request while the slot is held: %v %s, want 429", m.Header, m.Data)
		}
		if got := m.Header.Get(wire.HeaderRetryAfter); got != want {
			t.Errorf("NATS 429: Retry-After %q, want %q: %v", got, want, m.Header)
		}
		m, err = sub.NextMsg(15 * time.Second)
		if err != nil {
			t.Fatalf("the waiting read got no reply: %v", err)
		}
		if m.Header.Get(micro.ErrorCodeHeader) != "503" {
			t.Fatalf("the waiting read: %v %s, want 503", m.Header, m.Data)
		}
		if got := m.Header.Get(wire.HeaderRetryAfter); got != want {
			t.Errorf("NATS 503: Retry-After %q, want %q: %v", got, want, m.Header)
		}
	})

	t.Run("http", func(t *testing.T) {
		type result struct {
			status int
			header http.Header
			err    error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := http.Get(env.httpURL + "/v1/sessions/ra2?min_seq=999999")
			if err != nil {
				done <- result{err: err}
				return
			}
			resp.Body.Close()
			done <- result{status: resp.StatusCode, header: resp.Header}
		}()
		holding(t, env, "http")
		status, h, body := rawHTTP(t, http.MethodGet, env.httpURL+"/v1/sessions/ra2", "")
		if status != http.StatusTooManyRequests {
			t.Fatalf("a second request while the slot is held: %d %s, want 429", status, body)
		}
		if got := h.Get(wire.HeaderRetryAfter); got != want {
			t.Errorf("HTTP 429: Retry-After %q, want %q", got, want)
		}
		r := <-done
		if r.err != nil || r.status != http.StatusServiceUnavailable {
			t.Fatalf("the waiting read: %d %v, want 503", r.status, r.err)
		}
		if got := r.header.Get(wire.HeaderRetryAfter); got != want {
			t.Errorf("HTTP 503: Retry-After %q, want %q", got, want)
		}
	})

	// Other errors carry none.
	status, h, _ := rawHTTP(t, http.MethodGet, env.httpURL+"/v1/nope", "")
	if status != http.StatusNotFound || h.Get(wire.HeaderRetryAfter) != "" {
		t.Errorf("404: status %d Retry-After %q, want none", status, h.Get(wire.HeaderRetryAfter))
	}
}

// holding waits until a request of channel holds its limiter slot.
func holding(t *testing.T, env *testEnv, channel string) {
	t.Helper()
	natstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if n := env.api.lim.InFlight(channel); n != 1 {
			return fmt.Errorf("channel %s has %d requests in flight", channel, n)
		}
		return nil
	})
}
