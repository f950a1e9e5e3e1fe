package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// sseFrame is one Server-Sent Event; comment is set for a comment-only
// frame (a heartbeat).
type sseFrame struct {
	id, event, data, comment string
}

type sseStream struct {
	t    *testing.T
	resp *http.Response
	rd   *bufio.Reader
}

// openSSE starts a live stream; it returns the response when it is not
// a stream (an error reply), with the body read.
func openSSE(t *testing.T, url string, headers ...string) (*sseStream, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, resp.StatusCode, body
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != wire.MIMEEventStream {
		t.Fatalf("live stream Content-Type %q, want %s", ct, wire.MIMEEventStream)
	}
	return &sseStream{t: t, resp: resp, rd: bufio.NewReader(resp.Body)}, resp.StatusCode, nil
}

// frame reads the next frame; io.EOF when the stream ended.
func (s *sseStream) frame() (sseFrame, error) {
	var f sseFrame
	seen := false
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return f, nil
			}
			continue
		}
		seen = true
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "":
			f.comment = v
		case "id":
			f.id = v
		case "event":
			f.event = v
		case "data":
			f.data = v
		}
	}
}

// event reads frames up to the next event (skipping comments and retry).
func (s *sseStream) event() (sseFrame, service.LiveEvent) {
	s.t.Helper()
	for {
		f, err := s.frame()
		if err != nil {
			s.t.Fatalf("live stream: %v", err)
		}
		if f.event == "" {
			continue
		}
		var ev service.LiveEvent
		if f.event != "end" && f.event != "error" {
			if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
				s.t.Fatalf("live event data %q: %v", f.data, err)
			}
		}
		return f, ev
	}
}

func toggle(t *testing.T, e *testEnv, session string, on bool) uint64 {
	t.Helper()
	r, err := e.eng.Apply(context.Background(), session, service.Origin{Channel: "web", Actor: "al"}, nil, events.ToolsToggled{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	if r.Last == 0 {
		t.Fatalf("toggle %s to %v wrote nothing (a no-op)", session, on)
	}
	return r.Last
}

// The SSE framing (id = sequence, event = type, data = the event),
// resume with Last-Event-ID (and after_seq) gets exactly the events after
// it, two sessions' streams don't mix, the all-sessions stream is in
// stream order, and an event appended while a stream is open reaches it.
func TestLiveHTTPResumeFilterOrder(t *testing.T) {
	e := newEnv(t, Config{})
	var all, a []uint64
	for i := range 6 {
		s := []string{"la", "lb"}[i%2]
		seq := toggle(t, e, s, i%4 < 2)
		all = append(all, seq)
		if s == "la" {
			a = append(a, seq)
		}
	}
	sa, code, body := openSSE(t, e.httpURL+"/v1/sessions/la/events/live?after_seq=1", wire.HeaderLastEventID, jsonNum(a[0]))
	if sa == nil {
		t.Fatalf("open la: %d %s", code, body)
	}
	for _, want := range a[1:] {
		f, ev := sa.event()
		if f.id != jsonNum(want) || ev.Seq != want || ev.Session != "la" || f.event != "ToolsToggled" || ev.Type != "ToolsToggled" || ev.Payload == nil || ev.Channel != "web" || ev.Actor != "al" || ev.ID == "" {
			t.Fatalf("la after Last-Event-ID %d: frame %+v event %+v, want seq %d", a[0], f, ev, want)
		}
	}
	sq, _, _ := openSSE(t, e.httpURL+"/v1/sessions/lb/events/live?after_seq="+jsonNum(all[len(all)-1]))
	sall, code, body := openSSE(t, e.httpURL+"/v1/events/live")
	if sall == nil {
		t.Fatalf("open all: %d %s", code, body)
	}
	for _, want := range all {
		if _, ev := sall.event(); ev.Seq != want {
			t.Fatalf("all-sessions stream: seq %d, want %d (stream order)", ev.Seq, want)
		}
	}
	lb := toggle(t, e, "lb", false)
	la := toggle(t, e, "la", false)
	if _, ev := sa.event(); ev.Seq != la || ev.Session != "la" {
		t.Fatalf("la live: %+v, want seq %d (lb's %d must not reach it)", ev, la, lb)
	}
	if _, ev := sq.event(); ev.Seq != lb || ev.Session != "lb" {
		t.Fatalf("lb live: %+v, want seq %d", ev, lb)
	}
	if _, ev := sall.event(); ev.Seq != lb {
		t.Fatalf("all live: %d, want %d", ev.Seq, lb)
	}
	if _, ev := sall.event(); ev.Seq != la {
		t.Fatalf("all live: %d, want %d", ev.Seq, la)
	}
	// Bad inputs answer the error envelope before any stream.
	for _, c := range []struct {
		url, hdr string
		status   int
	}{
		{"/v1/sessions/la/events/live?after_seq=x", "", http.StatusBadRequest},
		{"/v1/sessions/la/events/live?since=3", "", http.StatusBadRequest},
		{"/v1/sessions/la/events/live", "x", http.StatusBadRequest},
		{"/v1/sessions/a%20b/events/live", "", http.StatusBadRequest},
	} {
		var h []string
		if c.hdr != "" {
			h = []string{wire.HeaderLastEventID, c.hdr}
		}
		s, code, body := openSSE(t, e.httpURL+c.url, h...)
		if s != nil || code != c.status || apiError(t, body).Code != CodeInvalid {
			t.Errorf("%s (Last-Event-ID %q): %d %s, want %d invalid", c.url, c.hdr, code, body, c.status)
		}
	}
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// A deleted session's stream delivers the SessionDeleted, then an
// "end" event, then closes; a stream opened after it is 410 deleted.
func TestLiveHTTPDeletedSessionEnds(t *testing.T) {
	e := newEnv(t, Config{})
	toggle(t, e, "ld", true)
	s, code, body := openSSE(t, e.httpURL+"/v1/sessions/ld/events/live")
	if s == nil {
		t.Fatalf("open: %d %s", code, body)
	}
	s.event()
	d, err := e.eng.Delete(context.Background(), "ld", service.Origin{Channel: "web"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if f, ev := s.event(); f.event != "SessionDeleted" || ev.Seq != d.Seq {
		t.Fatalf("after delete: %+v", f)
	}
	if f, _ := s.event(); f.event != "end" {
		t.Fatalf("after SessionDeleted: %+v, want the end event", f)
	}
	if _, err := s.frame(); err != io.EOF {
		t.Fatalf("after end: %v, want EOF", err)
	}
	if _, code, body := openSSE(t, e.httpURL+"/v1/sessions/ld/events/live?after_seq="+jsonNum(d.Seq)); code != http.StatusGone {
		t.Fatalf("stream after the deletion: %d %s, want 410", code, body)
	}
}

// A read-only token may watch; no token is 401; beyond
// MaxLivePerChannel streams of one channel the answer is 429 busy with
// Retry-After (another channel still gets one); an idle stream sends
// heartbeats; StopLive (engine shutdown) ends every stream and refuses
// new ones with 503.
func TestLiveHTTPTokensCapHeartbeatStop(t *testing.T) {
	toks, err := tokens.Parse([]byte(`[{"token":"web-token-0123456789","channel":"web"},{"token":"audit-token-0123456789","channel":"audit","read_only":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Tokens: toks, MaxLivePerChannel: 2, LiveHeartbeat: 20 * time.Millisecond})
	audit := []string{"Authorization", "Bearer audit-token-0123456789"}
	url := e.httpURL + "/v1/events/live"
	if _, code, _ := openSSE(t, url); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	var open []*sseStream
	for range 2 {
		s, code, body := openSSE(t, url, audit...)
		if s == nil {
			t.Fatalf("read-only token: %d %s, want a stream", code, body)
		}
		open = append(open, s)
	}
	_, code, body := openSSE(t, url, audit...)
	if code != http.StatusTooManyRequests || apiError(t, body).Code != wire.CodeBusy {
		t.Fatalf("third stream of a channel: %d %s, want 429 busy", code, body)
	}
	web, code, body := openSSE(t, url, "Authorization", "Bearer web-token-0123456789")
	if web == nil {
		t.Fatalf("another channel: %d %s, want a stream", code, body)
	}
	for {
		f, err := open[0].frame()
		if err != nil {
			t.Fatal(err)
		}
		if f.comment == "heartbeat" {
			break
		}
	}
	e.api.StopLive()
	for _, s := range append(open, web) {
		for {
			if _, err := s.frame(); err != nil {
				if err != io.EOF {
					t.Fatalf("stream after StopLive: %v, want EOF", err)
				}
				break
			}
		}
	}
	_, code, body = openSSE(t, url, audit...)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("stream after StopLive: %d %s, want 503", code, body)
	}
}

// A live stream outlives the HTTP server's read and write timeouts
// (sized for one request; engine serve's write timeout is 45 s): after
// several timeouts' worth of heartbeats an appended event still arrives.
func TestLiveHTTPOutlivesServerTimeouts(t *testing.T) {
	e := newEnv(t, Config{LiveHeartbeat: 20 * time.Millisecond})
	hs := httptest.NewUnstartedServer(e.api.Handler())
	hs.Config.ReadTimeout, hs.Config.WriteTimeout = 100*time.Millisecond, 100*time.Millisecond
	hs.Start()
	t.Cleanup(hs.Close)
	s, code, body := openSSE(t, hs.URL+"/v1/sessions/lt/events/live")
	if s == nil {
		t.Fatalf("open: %d %s", code, body)
	}
	for beats := 0; beats < 25; { // 25 heartbeats: at least 5 timeouts' time
		f, err := s.frame()
		if err != nil {
			t.Fatalf("after %d heartbeats: %v (the server's timeouts cut the stream)", beats, err)
		}
		if f.comment == "heartbeat" {
			beats++
		}
	}
	seq := toggle(t, e, "lt", true)
	if _, ev := s.event(); ev.Seq != seq {
		t.Fatalf("event after the timeouts: %+v, want seq %d", ev, seq)
	}
}

// Over NATS, a client that goes away (unsubscribes its inbox) ends
// its stream at the next heartbeat, which gives its slot back: with one
// stream per channel, a second watch is refused (429) while the first is
// subscribed and taken once it left.
func TestLiveNATSGoneClientFreesSlot(t *testing.T) {
	e := newEnv(t, Config{MaxLivePerChannel: 1, LiveHeartbeat: 20 * time.Millisecond})
	start := func() (*nats.Subscription, *nats.Msg) {
		inbox := e.nc.NewRespInbox()
		sub, err := e.nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("tools.api.web.events.live")
		m.Reply, m.Data = inbox, []byte(`{}`)
		if err := e.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		first, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return sub, first
	}
	sub, first := start()
	if first.Header.Get(wire.LiveHeader) != wire.LiveHeartbeatMsg {
		t.Fatalf("first message %v %s, want a heartbeat", first.Header, first.Data)
	}
	sub2, second := start()
	if second.Header.Get("Nats-Service-Error-Code") != "429" {
		t.Fatalf("second stream of the channel: %v %s, want 429", second.Header, second.Data)
	}
	_ = sub2.Unsubscribe()
	seq := toggle(t, e, "ln", true)
	for {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(wire.LiveHeader) == wire.LiveEventMsg {
			var ev service.LiveEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Seq != seq || ev.Session != "ln" {
				t.Fatalf("event %s (%v), want seq %d", m.Data, err, seq)
			}
			break
		}
	}
	_ = sub.Unsubscribe()
	for i := 0; ; i++ {
		s, m := start()
		_ = s.Unsubscribe()
		if m.Header.Get(wire.LiveHeader) == wire.LiveHeartbeatMsg {
			break
		}
		if i == 1000 {
			t.Fatalf("the gone client's slot never came back: %v %s", m.Header, m.Data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With ?message=true every event comes without an event: line, as the SSE
// default type "message" that a browser EventSource's onmessage receives,
// its type in data; the end after a SessionDeleted comes as data
// {"type":"end"}. A bad value is refused before the stream.
func TestLiveHTTPMessageModeForEventSource(t *testing.T) {
	e := newEnv(t, Config{})
	first := toggle(t, e, "lm", true)
	s, code, body := openSSE(t, e.httpURL+"/v1/sessions/lm/events/live?message=true")
	if s == nil {
		t.Fatalf("open with message=true: %d %s", code, body)
	}
	next := func() sseFrame {
		for {
			f, err := s.frame()
			if err != nil {
				t.Fatalf("live stream: %v", err)
			}
			if f.data != "" {
				return f
			}
		}
	}
	f := next()
	var ev service.LiveEvent
	if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
		t.Fatalf("data %q: %v", f.data, err)
	}
	if f.event != "" || f.id != jsonNum(first) || ev.Type != "ToolsToggled" || ev.Seq != first {
		t.Fatalf("message mode: frame %+v, want id %d, no event: line and type ToolsToggled in data", f, first)
	}
	d, err := e.eng.Delete(context.Background(), "lm", service.Origin{Channel: "web"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if f := next(); f.event != "" || !strings.Contains(f.data, `"type":"SessionDeleted"`) || f.id != jsonNum(d.Seq) {
		t.Fatalf("after delete: %+v", f)
	}
	if f := next(); f.event != "" || f.data != `{"type":"end"}` {
		t.Fatalf("end in message mode: %+v, want data {\"type\":\"end\"} without an event: line", f)
	}
	if _, code, body := openSSE(t, e.httpURL+"/v1/sessions/lm/events/live?message=yes"); code != http.StatusBadRequest || apiError(t, body).Code != CodeInvalid {
		t.Fatalf("message=yes: %d %s, want 400 invalid", code, body)
	}
}
