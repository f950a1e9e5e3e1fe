package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// A request whose reply subject is not an inbox gets no
// reply, so nothing is published to the log, the API or a KV bucket.
func TestMicroRefusesNonInboxReply(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if _, err := e.natsClient(WithChannel("web")).Append(ctx, "victim", nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	spy, err := e.nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{"tools.events.victim", "$KV.TOOLS_VIEWS.victim", "$KV.TOOLS_REGISTRY.current", "tools.api.web.events.append", "$JS.API.STREAM.DELETE.TOOLS_EVENTS", "_INBOX", "_INBOX.>", "other.inbox"} {
		if err := e.nc.PublishRequest("tools.api.web.session.intent", reply, []byte(`{"session":"victim"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// A request with an inbox is answered; the refused ones were handled
	// before it (one endpoint, in order), so after its reply none can come.
	if _, err := e.natsClient(WithChannel("web")).Intent(ctx, "victim", 0); err != nil {
		t.Fatal(err)
	}
	// Read what the spy saw for a while (the projection's feed pulls all
	// the time, so a quiet gap may never come).
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); {
		m, err := spy.NextMsg(100 * time.Millisecond)
		if err != nil {
			continue
		}
		if strings.Contains(string(m.Data), `"session":"victim"`) && !strings.HasPrefix(m.Subject, "_INBOX.") && !strings.HasPrefix(m.Subject, "tools.api.") {
			t.Errorf("the engine published its reply to %s", m.Subject)
		}
	}
	for _, ok := range []string{"_INBOX.abc.1", "_INBOX_web.x", "_INBOX_auditor.a.b"} {
		if err := replyAllowed(ok); err != nil {
			t.Errorf("replyAllowed(%q) = %v", ok, err)
		}
	}
}

// Slow requests on one channel do not delay another,
// and a channel over its bound gets a 429 busy reply at once.
func TestMicroConcurrencyPerChannel(t *testing.T) {
	e := newEnv(t, Config{MaxInFlightPerChannel: 3})
	ctx := context.Background()
	res, err := e.natsClient(WithChannel("slack")).Append(ctx, "s1", nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	// Three web reads wait for a sequence that never comes.
	for range 3 {
		if err := e.nc.PublishRequest("tools.api.web.session.intent", e.nc.NewRespInbox(), []byte(`{"session":"s1","min_seq":999999}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A fourth web request is refused as busy, at once.
	start := time.Now()
	var m *nats.Msg
	for {
		m, err = e.nc.Request("tools.api.web.session.intent", []byte(`{"session":"s1"}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(HeaderErrorCode) == wire.CodeBusy || time.Since(start) > 4*time.Second {
			break
		}
	}
	if m.Header.Get(HeaderErrorCode) != wire.CodeBusy || m.Header.Get("Nats-Service-Error-Code") != "429" {
		t.Fatalf("fourth web request: %v %s, want a 429 busy", m.Header, m.Data)
	}
	// Slack is served meanwhile, well before the waits end.
	start = time.Now()
	v, err := e.natsClient(WithChannel("slack")).Intent(ctx, "s1", res.LastSeq)
	if err != nil || v.Seq != res.LastSeq {
		t.Fatalf("slack read: %+v %v", v, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("slack read took %s behind web's waits", d)
	}
}

// Writes need a JSON or msgpack body; cross-origin
// browser writes and foreign Host names are refused.
func TestHTTPCrossSiteAndContentType(t *testing.T) {
	e := newEnv(t, Config{})
	url := e.httpURL + "/v1/sessions/c1/events"
	tools := []string{"grep", "bash", "web_fetch", "glob", "list_dir", "todo_write", "ask_user"}
	var last uint64
	for i, c := range []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"text/plain (no-cors fetch)", []string{"Content-Type", "text/plain"}, 415, wire.CodeUnsupportedMedia},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, wire.CodeUnsupportedMedia},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, 403, wire.CodeForbidden},
		{"cross-origin without fetch metadata", []string{"Origin", "https://evil.example"}, 403, wire.CodeForbidden},
		{"rebound DNS name", []string{"Host", "evil.example"}, 403, wire.CodeForbidden},
		{"same origin", []string{"Origin", e.httpURL, "Sec-Fetch-Site", "same-origin"}, 200, ""},
		{"no browser", nil, 200, ""},
	} {
		body := `{"commands":[{"type":"ToolDisabled","name":"` + tools[i] + `"}]}`
		status, _, b := rawHTTP(t, "POST", url, body, c.headers...)
		var env wire.Envelope
		_ = json.Unmarshal(b, &env)
		if status != c.status || (c.code != "" && env.Error.Code != c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, b, c.status, c.code)
		}
		var res wire.AppendReply
		if status == 200 && json.Unmarshal(b, &res) == nil {
			last = res.LastSeq
		}
	}
	v, err := e.httpClient().Intent(context.Background(), "c1", last)
	if err != nil || len(v.Intent.Disabled) != 2 || v.Events != 2 {
		t.Fatalf("after the refused writes: %+v %v, want the 2 accepted events only", v, err)
	}
}

// With tokens, the channel comes from the token.
func TestHTTPTokens(t *testing.T) {
	toks, err := tokens.Parse([]byte(`[{"token":"web-token-0123456789","channel":"web"},{"token":"audit-token-0123456789","channel":"audit","read_only":true},{"token":"bot-token-0123456789","channel":"slack","actor":"bot"}]`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Tokens: toks})
	url := e.httpURL + "/v1/sessions/t1/events"
	tools := []string{"grep", "bash", "web_fetch", "glob", "list_dir", "todo_write", "ask_user"}
	for i, c := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"no token", nil, 401},
		{"wrong token", []string{"Authorization", "Bearer nope-nope-nope-nope"}, 401},
		{"read-only token", []string{"Authorization", "Bearer audit-token-0123456789"}, 403},
		{"other channel", []string{"Authorization", "Bearer web-token-0123456789", HeaderChannel, "slack"}, 403},
		{"other actor", []string{"Authorization", "Bearer bot-token-0123456789", wire.HeaderActor, "eve"}, 403},
		{"web", []string{"Authorization", "Bearer web-token-0123456789", HeaderChannel, "web"}, 200},
		{"bot", []string{"Authorization", "Bearer bot-token-0123456789"}, 200},
	} {
		body := `{"commands":[{"type":"ToolDisabled","name":"` + tools[i] + `"}]}`
		if status, _, b := rawHTTP(t, "POST", url, body, c.headers...); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, b, c.status)
		}
	}
	status, _, b := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/t1/history", "", "Authorization", "Bearer audit-token-0123456789")
	if status != 200 {
		t.Fatalf("read-only history: %d %s", status, b)
	}
	var h wire.HistoryOf[*service.Command]
	if err := json.Unmarshal(b, &h); err != nil || len(h.Entries) != 2 || h.Entries[0].Channel != "web" || h.Entries[1].Channel != "slack" || h.Entries[1].Actor != "bot" {
		t.Fatalf("history: %+v %v", h.Entries, err)
	}
	for _, bad := range []string{`[]`, `[{"token":"short","channel":"web"}]`, `[{"token":"0123456789abcdef","channel":"a.b"}]`, `{"token":"x"}`} {
		if _, err := tokens.Parse([]byte(bad)); err == nil {
			t.Errorf("tokens.Parse(%s) accepted", bad)
		}
	}
}
