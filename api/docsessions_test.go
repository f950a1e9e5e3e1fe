package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/openapi"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// The statements of docs/api.md's Sessions, Paging and Providers
// sections, checked against real replies over both transports.

// The session-id rule: 1 to events.MaxSessionLen characters of
// [A-Za-z0-9_-], invalid (400) otherwise, and the OpenAPI pattern
// accepts exactly the ids the engine accepts.
func TestSessionIDRuleAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	if !strings.Contains(doc, "A session id is 1 to 128 characters of `A-Z a-z 0-9 _ -`") {
		t.Fatalf("docs/api.md does not state the session-id rule")
	}
	e := newEnv(t, Config{})
	for _, c := range []struct {
		id string
		ok bool
	}{{"s1", true}, {"A-b_9", true}, {strings.Repeat("a", events.MaxSessionLen), true},
		{strings.Repeat("a", events.MaxSessionLen+1), false}, {"a.b", false}, {"a*", false}, {"ü", false}} {
		subj, _ := Subject("", "web", "intent")
		body, _ := json.Marshal(map[string]string{"session": c.id})
		msg := rawNATS(t, e.nc, subj, string(body))
		natsOK := msg.Header.Get(micro.ErrorCodeHeader) == ""
		status, _, hb := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/"+c.id+"/resolve", "{}")
		if natsOK != c.ok || (status == http.StatusOK) != c.ok || (!c.ok && (status != http.StatusBadRequest || apiError(t, hb).Code != CodeInvalid)) {
			t.Errorf("session id %q: NATS ok %v, HTTP %d %s; want ok %v (else 400 invalid)", c.id, natsOK, status, hb, c.ok)
		}
		if got := regexpMatch(t, openapi.SessionIDPattern, c.id); got != c.ok {
			t.Errorf("OpenAPI session pattern %s on %q: %v, want %v", openapi.SessionIDPattern, c.id, got, c.ok)
		}
	}
}

// A deleted session: writes and reads answer 410 deleted, history 200
// with the timeline up to the SessionDeleted; an erased one answers 410
// to history too. The replies match the OpenAPI document.
func TestDeletedSessionAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	for _, want := range []string{"`history` still answers 200 with the timeline up to\nand including the `SessionDeleted` entry", "every read of an erased\nsession, `history` included, answers `deleted` (410)"} {
		if !strings.Contains(doc, want) {
			t.Fatalf("docs/api.md does not say %q", want)
		}
	}
	e := newEnv(t, Config{EraseChannel: "doc"})
	x, err := e.eng.Log().NewEraser(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.eng.SetEraser(x)
	v := openAPIValidator(t, e)
	for _, s := range []string{"dd1", "dd2"} {
		toggle(t, e, s, true)
	}
	if st, _, b := rawHTTP(t, http.MethodDelete, e.httpURL+"/v1/sessions/dd1?reason=gone", ""); st != http.StatusOK {
		t.Fatalf("delete: %d %s", st, b)
	}
	if st, _, b := rawHTTP(t, http.MethodDelete, e.httpURL+"/v1/sessions/dd2?erase=true", "", HeaderChannel, "doc"); st != http.StatusOK {
		t.Fatalf("erase: %d %s", st, b)
	}
	for _, name := range []string{"intent", "resolve", "explain", "explain-batch", "turn-begin", "turn-dispatch", "turn-inspect", "resume", "append"} {
		var m map[string]any
		_ = json.Unmarshal([]byte(docRequests[name]), &m)
		m["session"] = "dd1"
		b, _ := json.Marshal(m)
		for _, transport := range []string{"http", "nats"} {
			body, status := callDocumented(t, e, transport, name, string(b))
			if status != http.StatusGone || apiError(t, body).Code != wire.CodeDeleted {
				t.Errorf("%s of a deleted session over %s: %d %s, want 410 deleted", name, transport, status, body)
			}
		}
	}
	for _, transport := range []string{"http", "nats"} {
		req := `{"session":"dd1"}`
		body, status := callDocumented(t, e, transport, "history", req)
		var h wire.HistoryOf[*service.Command]
		if status != http.StatusOK || json.Unmarshal(body, &h) != nil || len(h.Entries) == 0 || h.Entries[len(h.Entries)-1].Type != "SessionDeleted" {
			t.Fatalf("history of a deleted session over %s: %d %s, want 200 ending with its SessionDeleted", transport, status, body)
		}
		hr, hb := docHTTPRequest(t, e, "history", req)
		checkOpenAPI(t, v, transport+" history of a deleted session", hr, hb, status, body)

		req = `{"session":"dd2"}`
		body, status = callDocumented(t, e, transport, "history", req)
		if status != http.StatusGone || apiError(t, body).Code != wire.CodeDeleted {
			t.Errorf("history of an erased session over %s: %d %s, want 410 deleted", transport, status, body)
		}
		hr, hb = docHTTPRequest(t, e, "history", req)
		checkOpenAPI(t, v, transport+" history of an erased session", hr, hb, status, body)
	}
}

// A compacted session's history starts with the SessionCompacted entry,
// whose payload has the fields the page lists and matches the OpenAPI
// document; until inside the compacted range is 404 not_found; only the
// erase channel may compact (403 forbidden otherwise).
func TestCompactedSessionAsDocumented(t *testing.T) {
	e := newEnv(t, Config{EraseChannel: "doc"})
	x, err := e.eng.Log().NewEraser(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.eng.SetEraser(x)
	v := openAPIValidator(t, e)
	first := toggle(t, e, "cs1", true)
	toggle(t, e, "cs1", false)
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/cs1/compact", `{"reason":"archive"}`, HeaderChannel, "web"); st != http.StatusForbidden || apiError(t, b).Code != wire.CodeForbidden {
		t.Fatalf("compact by another channel: %d %s, want 403 forbidden", st, b)
	}
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/cs1/compact", `{"reason":"archive"}`, HeaderChannel, "doc"); st != http.StatusOK {
		t.Fatalf("compact by the erase channel: %d %s", st, b)
	}
	for _, transport := range []string{"http", "nats"} {
		body, status := callDocumented(t, e, transport, "history", `{"session":"cs1"}`)
		var h struct {
			Entries []struct {
				Type    string         `json:"type"`
				Payload map[string]any `json:"payload"`
			} `json:"entries"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &h) != nil || len(h.Entries) == 0 || h.Entries[0].Type != "SessionCompacted" {
			t.Fatalf("history of a compacted session over %s: %d %s, want its first entry SessionCompacted", transport, status, body)
		}
		documented := map[string]bool{}
		for _, f := range compactedFields {
			documented[f[0]] = true
		}
		for k := range h.Entries[0].Payload {
			if !documented[k] {
				t.Errorf("the SessionCompacted payload has field %q, which docs/api.md does not list", k)
			}
		}
		hr, hb := docHTTPRequest(t, e, "history", `{"session":"cs1"}`)
		checkOpenAPI(t, v, transport+" history of a compacted session", hr, hb, status, body)

		until := `{"session":"cs1","until":` + jsonNum(first) + `}`
		body, status = callDocumented(t, e, transport, "history", until)
		if status != http.StatusNotFound || apiError(t, body).Code != wire.CodeNotFound {
			t.Errorf("history until a compacted sequence over %s: %d %s, want 404 not_found", transport, status, body)
		}
	}
}

// Every provider value renders and is echoed in rendered_for; none is the
// documented default; another value is 400 invalid. The OpenAPI document
// lists the same values.
func TestProvidersAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	if !strings.Contains(doc, "Without it the rendering is\n`"+service.ProviderAnthropic+"`") {
		t.Fatalf("docs/api.md does not name the default rendering")
	}
	e := newEnv(t, Config{})
	toggle(t, e, "pv", true)
	for _, p := range append([]string{""}, service.Providers...) {
		if !strings.Contains(doc, "| `"+p+"` |") && p != "" {
			t.Errorf("docs/api.md's provider table lacks %s", p)
		}
		body, status := callDocumented(t, e, "nats", "resolve", `{"session":"pv","provider":"`+p+`"}`)
		var r struct {
			RenderedFor string `json:"rendered_for"`
		}
		want := p
		if p == "" {
			want = service.ProviderAnthropic
		}
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.RenderedFor != want {
			t.Errorf("resolve with provider %q: %d rendered_for %q, want %q", p, status, r.RenderedFor, want)
		}
	}
	body, status := callDocumented(t, e, "http", "resolve", `{"session":"pv","provider":"gemini"}`)
	if status != http.StatusBadRequest || apiError(t, body).Code != CodeInvalid {
		t.Errorf("provider gemini: %d %s, want 400 invalid", status, body)
	}
	enum := fieldRules.Apply(RequestSchema("resolve"))["properties"].(Schema)["provider"].(Schema)["enum"]
	if got, _ := json.Marshal(enum); string(got) != mustJSON(service.Providers) {
		t.Errorf("OpenAPI provider enum %s, want %s", got, mustJSON(service.Providers))
	}
}

// The OpenAPI document gives every request body and every 200 reply a
// msgpack form beside JSON, and the engine answers a msgpack request
// with Accept: application/msgpack in msgpack.
func TestMsgpackAsDocumented(t *testing.T) {
	doc := OpenAPI()
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			op := o.(map[string]any)
			if op["operationId"] == "openapi" || strings.HasSuffix(path, "/live") {
				continue
			}
			content := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)
			if content[wire.MIMEMsgpack] == nil {
				t.Errorf("%s %s: the 200 reply has no %s form", method, path, wire.MIMEMsgpack)
			}
			if rb, ok := op["requestBody"].(map[string]any); ok && rb["content"].(map[string]any)[wire.MIMEMsgpack] == nil {
				t.Errorf("%s %s: the request body has no %s form", method, path, wire.MIMEMsgpack)
			}
		}
	}
	e := newEnv(t, Config{})
	body, err := msgpack.Marshal(map[string]any{"commands": []any{map[string]any{"type": "ToolsToggled", "enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.httpURL+"/v1/sessions/mp1/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", wire.MIMEMsgpack)
	req.Header.Set("Accept", wire.MIMEMsgpack)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reply map[string]any
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != wire.MIMEMsgpack || msgpack.NewDecoder(resp.Body).Decode(&reply) != nil || reply["session"] != "mp1" {
		t.Fatalf("msgpack append: %d %s %v, want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), reply, wire.MIMEMsgpack)
	}
}

// The append's commands are bounded as the OpenAPI document says: 1 to
// MaxCommands (TestCommandsLimitAsDocumented checks the engine's side).
func TestCommandsBoundsInOpenAPI(t *testing.T) {
	cmds := RequestSchema("append")["properties"].(Schema)["commands"].(Schema)
	if cmds["minItems"] != 1 || cmds["maxItems"] != wire.MaxCommands {
		t.Fatalf("append commands: minItems %v maxItems %v, want 1 and %d", cmds["minItems"], cmds["maxItems"], wire.MaxCommands)
	}
	e := newEnv(t, Config{})
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/cb/events", `{"commands":[]}`); st != http.StatusBadRequest || apiError(t, b).Code != wire.CodeInvalid {
		t.Fatalf("no commands: %d %s, want 400 invalid", st, b)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// regexpMatch reports whether pattern matches s.
func regexpMatch(t *testing.T, pattern, s string) bool {
	t.Helper()
	return regexp.MustCompile(pattern).MatchString(s)
}
