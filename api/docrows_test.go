package api

import (
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/wire"

	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"
)

func readAPIDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func appendOf(session string, n int) string {
	cmds := make([]string, n)
	for i := range cmds {
		on := "true"
		if i%2 == 1 {
			on = "false"
		}
		cmds[i] = `{"type":"ToolsToggled","enabled":` + on + `}`
	}
	return `{"session":"` + session + `","commands":[` + strings.Join(cmds, ",") + `]}`
}

// The page states the limit the server enforces: MaxCommands
// commands are stored, one more is invalid, over both transports.
func TestCommandsLimitAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	if want := "holds at most " + strconv.Itoa(wire.MaxCommands) + " commands"; !strings.Contains(doc, want) {
		t.Errorf("docs/api.md does not say %q", want)
	}
	env := newEnv(t, Config{})
	for _, transport := range []string{"nats", "http"} {
		body, status := callDocumented(t, env, transport, "append", appendOf("lim-"+transport, wire.MaxCommands))
		if status != http.StatusOK {
			t.Errorf("%d commands over %s: status %d: %s", wire.MaxCommands, transport, status, clip.Raw(body))
		}
		body, status = callDocumented(t, env, transport, "append", appendOf("lim-"+transport, wire.MaxCommands+1))
		if status != http.StatusBadRequest || apiError(t, body).Code != CodeInvalid {
			t.Errorf("%d commands over %s: status %d, want 400 invalid: %s", wire.MaxCommands+1, transport, status, clip.Raw(body))
		}
	}
}

// Over HTTP a POST body needs a JSON (or msgpack)
// Content-Type, as the page now says; over NATS a body without one is
// JSON.
func TestContentTypeAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	if strings.Contains(doc, "`application/json`"+" (default)") {
		t.Errorf("docs/api.md still calls application/json the default Content-Type of every request")
	}
	if !strings.Contains(doc, "a body with no `Content-Type`, or any other type, is `unsupported_media_type` (415)") {
		t.Errorf("docs/api.md does not say that an HTTP body without Content-Type is 415")
	}
	env := newEnv(t, Config{})
	status, _, body := rawHTTP(t, http.MethodPost, env.httpURL+"/v1/sessions/ct1/events", `{"commands":[{"type":"ToolsToggled","enabled":true}]}`, "Content-Type", "")
	if status != http.StatusUnsupportedMediaType || apiError(t, body).Code != wire.CodeUnsupportedMedia {
		t.Errorf("HTTP POST without Content-Type: status %d: %s", status, body)
	}
	status, _, body = rawHTTP(t, http.MethodPost, env.httpURL+"/v1/sessions/ct1/turn/begin", "")
	if status != http.StatusOK {
		t.Errorf("HTTP POST with an empty body and no Content-Type: status %d: %s", status, body)
	}
	subj, _ := Subject("", "web", "append")
	msg := rawNATS(t, env.nc, subj, `{"session":"ct1","commands":[{"type":"ToolsToggled","enabled":true}]}`)
	if c := msg.Header.Get(micro.ErrorCodeHeader); c != "" {
		t.Errorf("NATS append without Content-Type: error %s: %s", c, msg.Data)
	}
}

// Turn-dispatch outside a turn answers the live resolution
// (frozen false) by design: the engine measures cache breaks caused by
// intent changes between out-of-turn dispatches. The page now says so
// instead of promising no_turn, and the turn operations that need a turn
// do answer no_turn, over both transports.
func TestDispatchOutsideTurnAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	if !strings.Contains(doc, "outside one the live resolution (frozen false, no no_turn error)") ||
		!strings.Contains(doc, "| `no_turn` | 409 | turn-discover, turn-checkpoint or turn-end on a session with no open turn (turn-dispatch answers outside a turn). |") {
		t.Errorf("docs/api.md does not say what turn-dispatch answers outside a turn")
	}
	env := newEnv(t, Config{})
	frozen := func(body []byte) any {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return v["frozen"]
	}
	for _, transport := range []string{"nats", "http"} {
		s := "nt-" + transport
		body, status := callDocumented(t, env, transport, "turn-dispatch", `{"session":"`+s+`"}`)
		if status != http.StatusOK || frozen(body) != false {
			t.Errorf("dispatch without a turn over %s: status %d, want 200 frozen false: %s", transport, status, clip.Raw(body))
		}
		for _, op := range []string{"turn-end", "turn-checkpoint"} {
			body, status := callDocumented(t, env, transport, op, `{"session":"`+s+`"}`)
			if status != http.StatusConflict || apiError(t, body).Code != wire.CodeNoTurn {
				t.Errorf("%s without a turn over %s: status %d, want 409 no_turn: %s", op, transport, status, clip.Raw(body))
			}
		}
		if body, status := callDocumented(t, env, transport, "turn-begin", `{"session":"`+s+`"}`); status != http.StatusOK {
			t.Fatalf("turn-begin over %s: %d %s", transport, status, clip.Raw(body))
		}
		body, status = callDocumented(t, env, transport, "turn-dispatch", `{"session":"`+s+`"}`)
		if status != http.StatusOK || frozen(body) != true {
			t.Errorf("dispatch in a turn over %s: status %d, want 200 frozen true: %s", transport, status, clip.Raw(body))
		}
	}
}

// The page lists exactly the operations a read-only token may
// call, and turn-dispatch (no events, but it records the last dispatch)
// is not one of them: 403.
func TestReadOnlyTokenAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	if !strings.Contains(doc, "a read-only token calls\n  only the read operations: "+readOnlyList()+" (403") {
		t.Errorf("docs/api.md does not list the read-only operations %s", readOnlyList())
	}
	if strings.Contains(readOnlyList(), "turn-dispatch") || !strings.Contains(doc, "`turn-dispatch`\n  writes no events but records") {
		t.Errorf("docs/api.md does not say why turn-dispatch needs a writing token")
	}
	toks, err := tokens.Parse([]byte(`[{"token":"audit-token-0123456789","channel":"audit","read_only":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, Config{Tokens: toks})
	auth := []string{"Authorization", "Bearer audit-token-0123456789"}
	status, _, body := rawHTTP(t, http.MethodPost, env.httpURL+"/v1/sessions/ro1/turn/dispatch", "{}", auth...)
	if status != http.StatusForbidden || apiError(t, body).Code != wire.CodeForbidden {
		t.Errorf("read-only token on turn-dispatch: status %d: %s", status, body)
	}
	status, _, body = rawHTTP(t, http.MethodGet, env.httpURL+"/v1/sessions/ro1/resolve", "", auth...)
	if status != http.StatusOK {
		t.Errorf("read-only token on resolve: status %d: %s", status, body)
	}
	// explain-batch writes nothing: every operation that is not a write,
	// but for turn-dispatch, is open to a read-only token.
	status, _, body = rawHTTP(t, http.MethodPost, env.httpURL+"/v1/sessions/ro1/explain", `{"tools":["read_file"]}`, auth...)
	if status != http.StatusOK {
		t.Errorf("read-only token on explain-batch: status %d: %s", status, body)
	}
	for _, op := range wire.Operations() {
		if !op.Write && op.Name != "turn-dispatch" && !readOnlyOps[op.Name] {
			t.Errorf("%s writes no events but a read-only token may not call it", op.Name)
		}
		if op.Write && readOnlyOps[op.Name] {
			t.Errorf("%s writes events but a read-only token may call it", op.Name)
		}
	}
}

// A NATS request to an operation the engine does not have gets
// the error envelope (404 not_found naming the operations), not "no
// responders"; the known operations still answer once.
func TestUnknownNATSOperationGetsEnvelope(t *testing.T) {
	if !strings.Contains(readAPIDoc(t), "names no operation gets the error\nenvelope with `not_found` (404)") {
		t.Errorf("docs/api.md does not say what an unknown operation answers over NATS")
	}
	env := newEnv(t, Config{})
	for _, subj := range []string{"tools.api.web.session.nope", "tools.api.web.frobnicate"} {
		msg := rawNATS(t, env.nc, subj, `{"session":"u1"}`)
		if c := msg.Header.Get(micro.ErrorCodeHeader); c != "404" {
			t.Errorf("%s: error code header %q, want 404: %s", subj, c, msg.Data)
		}
		e := apiError(t, msg.Data)
		if e.Code != wire.CodeNotFound || !strings.Contains(e.Message, "session.resolve") {
			t.Errorf("%s: error %s %q, want not_found naming the operations", subj, e.Code, e.Message)
		}
		if msg.Header.Get(HeaderErrorCode) != wire.CodeNotFound {
			t.Errorf("%s: %s header %q", subj, HeaderErrorCode, msg.Header.Get(HeaderErrorCode))
		}
	}
	// A known operation is answered by its endpoint only: exactly one reply.
	sub, err := env.nc.SubscribeSync("_INBOX.known1")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.nc.PublishRequest("tools.api.web.session.resolve", "_INBOX.known1", []byte(`{"session":"u1"}`)); err != nil {
		t.Fatal(err)
	}
	first, err := sub.NextMsg(10e9)
	if err != nil {
		t.Fatalf("known operation: no reply: %v", err)
	}
	if c := first.Header.Get(micro.ErrorCodeHeader); c != "" {
		t.Errorf("known operation answered with error %s: %s", c, first.Data)
	}
	// A second request on the same inbox: its reply must come next, not a
	// second reply to the first.
	if err := env.nc.PublishRequest("tools.api.web.registry.info", "_INBOX.known1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	second, err := sub.NextMsg(10e9)
	if err != nil {
		t.Fatalf("second known operation: no reply: %v", err)
	}
	if !strings.Contains(string(second.Data), `"default_tools"`) {
		t.Errorf("the reply after a resolve is not the registry's (a second reply to resolve?): %s", clip.Raw(second.Data))
	}
}
