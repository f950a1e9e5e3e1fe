package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// A backend that holds a view's rendering is not sent it again. A
// request naming its rendering_hash as if_none_match gets the view without
// it (rendering_unchanged), on both transports and for every view
// operation; "*" leaves any rendering out. Over HTTP a view reply carries
// an ETag of the whole reply, and a GET naming it in If-None-Match is a
// 304 without a body, until a byte of the reply changes.
func TestViewConditionalRendering(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	status, h, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/c1/resolve", "")
	var v wire.TurnView
	if err := json.Unmarshal(body, &v); status != http.StatusOK || err != nil || len(v.Rendering) < 100 || v.RenderingHash == "" || v.RenderingUnchanged {
		t.Fatalf("first resolve: %d %v %+v", status, err, v.RenderingHash)
	}
	etag := h.Get("ETag")
	if len(etag) != 66 || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("ETag %q, want a quoted sha256", etag)
	}
	if status, _, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/c1/resolve", "", "If-None-Match", etag); status != http.StatusNotModified || len(body) != 0 {
		t.Fatalf("GET with the reply's ETag: %d %q, want 304 without a body", status, body)
	}
	// A write changes the reply (its seq): the old ETag no longer matches.
	if _, err := e.httpClient().Append(ctx, "c1", nil, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	if status, h2, _ := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/c1/resolve", "", "If-None-Match", etag); status != http.StatusOK || h2.Get("ETag") == etag {
		t.Fatalf("GET after a write with the old ETag: %d, ETag %q, want 200 and a new tag", status, h2.Get("ETag"))
	}
	_, _, body = rawHTTP(t, "GET", e.httpURL+"/v1/sessions/c1/resolve", "")
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	hash := v.RenderingHash
	for _, tc := range []struct{ op, subject, path, body string }{
		{"resolve", "session.resolve", "/v1/sessions/c1/resolve", `{"if_none_match":"` + hash + `"}`},
		{"turn-begin", "turn.begin", "/v1/sessions/c1/turn/begin", `{"if_none_match":"` + hash + `"}`},
		{"turn-dispatch", "turn.dispatch", "/v1/sessions/c1/turn/dispatch", `{"if_none_match":"` + hash + `"}`},
		{"turn-discover", "turn.discover", "/v1/sessions/c1/turn/discover", `{"names":["send_message"],"if_none_match":"*"}`},
	} {
		for _, transport := range []string{"http", "nats"} {
			var data []byte
			if transport == "http" {
				status, _, data = rawHTTP(t, "POST", e.httpURL+tc.path, tc.body)
				if status != http.StatusOK {
					t.Fatalf("%s over http: %d %s", tc.op, status, data)
				}
			} else {
				data = rawNATS(t, e.nc, "tools.api.web."+tc.subject, `{"session":"c1",`+tc.body[1:]).Data
			}
			var probe struct {
				View json.RawMessage `json:"view"`
			}
			if err := json.Unmarshal(data, &probe); err == nil && len(probe.View) > 0 {
				data = probe.View // a discovery's reply carries its view
			}
			var got wire.TurnView
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("%s over %s: %v: %s", tc.op, transport, err, data)
			}
			if !got.RenderingUnchanged || (len(got.Rendering) != 0 && string(got.Rendering) != "null") || got.RenderingHash == "" {
				t.Errorf("%s over %s with if_none_match: unchanged %v, %d rendering bytes, hash %q; want the rendering left out", tc.op, transport, got.RenderingUnchanged, len(got.Rendering), got.RenderingHash)
			}
		}
	}
	// Another hash is a rendering the caller does not hold: it is sent.
	_, _, body = rawHTTP(t, "POST", e.httpURL+"/v1/sessions/c1/resolve", `{"if_none_match":"`+strings.Repeat("0", 64)+`"}`)
	if err := json.Unmarshal(body, &v); err != nil || v.RenderingUnchanged || len(v.Rendering) < 100 {
		t.Errorf("if_none_match of another rendering: unchanged %v, %d bytes", v.RenderingUnchanged, len(v.Rendering))
	}
}

// A view's name lists are pages of 128 names (list_offset and
// list_limit page on), and lists gives each full list's length.
func TestViewListsPage(t *testing.T) {
	e := newEnv(t, Config{})
	_, _, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/p1/resolve?list_limit=5&list_offset=3", "")
	var v wire.TurnView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	all, err := e.httpClient().Resolve(context.Background(), wire.ResolveRequest{Session: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tools) != 5 || v.Tools[0] != all.Tools[3] || v.Lists.Tools != len(all.Tools) || v.Lists.Offset != 3 || v.Lists.Limit != 5 || v.Lists.Complete {
		t.Fatalf("page of tools %v, lists %+v; want 5 names from the 4th of %d", v.Tools, v.Lists, len(all.Tools))
	}
	if !all.Lists.Complete || all.Lists.Limit != 128 {
		t.Fatalf("the default registry's lists %+v, want whole, 128 a page", all.Lists)
	}
	if status, _, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/p1/resolve?list_limit=5000", ""); status != http.StatusBadRequest || !strings.Contains(string(body), "list_limit") {
		t.Fatalf("list_limit 5000: %d %s, want 400 naming list_limit", status, body)
	}
}

// A NATS reply over the server's max_payload is answered at once
// with a 413 that names the fix (if_none_match for a view), instead of a
// publish that fails and leaves the caller waiting out its timeout.
func TestNATSReplyTooLarge(t *testing.T) {
	srv := natstest.ServerWith(t, server.Options{MaxPayload: 16 << 10})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := newEnvOn(t, ctx, nil, srv.ClientURL(), Config{})
	msg := rawNATS(t, e.nc, "tools.api.web.session.resolve", `{"session":"big"}`)
	if got := msg.Header.Get(micro.ErrorCodeHeader); got != "413" {
		t.Fatalf("NATS error code %q, want 413: %.300s", got, msg.Data)
	}
	if ae := apiError(t, msg.Data); ae.Code != wire.CodeTooLarge || !strings.Contains(ae.Message, "max_payload") || !strings.Contains(ae.Message, "if_none_match") {
		t.Fatalf("too large reply: %+v", ae)
	}
	msg = rawNATS(t, e.nc, "tools.api.web.session.resolve", `{"session":"big","if_none_match":"*"}`)
	if msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("the view without its rendering: %s", msg.Data)
	}
}
