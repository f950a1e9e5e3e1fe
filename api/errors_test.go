package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// A stale expected sequence is a 409 conflict with both sequences.
func TestConflict(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		s := "conflict-" + t.Name()[len("TestConflict/"):]
		res, err := c.Append(ctx, s, ptr(uint64(0)), events.ToolsToggled{Enabled: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Append(ctx, s, ptr(uint64(0)), events.PresetChosen{Preset: "research"})
		ae := asAPIError(t, err, http.StatusConflict, wire.CodeConflict)
		if ae.Expected != 0 || ae.Actual != res.LastSeq {
			t.Fatalf("conflict expected %d actual %d, want 0 and %d", ae.Expected, ae.Actual, res.LastSeq)
		}
		if !errors.Is(err, service.ErrConflict) {
			t.Fatalf("errors.Is(%v, ErrConflict) = false", err)
		}
		// At the right sequence it goes through.
		if _, err := c.Append(ctx, s, &res.LastSeq, events.PresetChosen{Preset: "research"}); err != nil {
			t.Fatal(err)
		}
	})
}

// And input validation: 400 with a message naming the bad value,
// the same over both transports.
func TestInvalidNamesTheBadValue(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		cases := []struct {
			name string
			call func() error
			want []string
		}{
			{"unknown preset", func() error {
				_, err := c.Append(ctx, "s1", nil, events.PresetChosen{Preset: "nosuch"})
				return err
			}, []string{`"nosuch"`, "research"}},
			{"bad session id", func() error {
				_, err := c.Intent(ctx, "a.b", 0)
				return err
			}, []string{`"a.b"`}},
			{"bad session id on write", func() error {
				_, err := c.Append(ctx, "a.b", nil, events.ToolsToggled{})
				return err
			}, []string{`"a.b"`}},
			{"materialized picked list", func() error {
				_, err := c.Append(ctx, "s1", nil, events.ToolsPicked{Names: []string{"read_file", "edit_file", "bash", "tool_search"}})
				return err
			}, []string{`"minimal"`, "store the intent instead", "PresetChosen"}},
			{"unknown tool", func() error {
				_, err := c.Append(ctx, "s1", nil, events.ToolDisabled{Name: "no_such_tool"})
				return err
			}, []string{"no_such_tool"}},
			{"unknown profile", func() error {
				_, err := c.Resolve(ctx, wire.ResolveRequest{Session: "s1", Profile: "ghost"})
				return err
			}, []string{`"ghost"`, "coder"}},
			{"unknown provider", func() error {
				_, err := c.Resolve(ctx, wire.ResolveRequest{Session: "s1", Provider: "gemini"})
				return err
			}, []string{`"gemini"`, "anthropic"}},
			{"override field of another kind", func() error {
				_, err := c.Resolve(ctx, wire.ResolveRequest{Session: "s1", Override: &wire.Override{Kind: intent.OverrideEmpty, Names: []string{"bash"}}})
				return err
			}, []string{`"empty"`}},
			{"bad until", func() error {
				_, err := c.History(ctx, wire.HistoryRequest{Session: "s1", Until: "yesterday"})
				return err
			}, []string{`"yesterday"`, "RFC 3339"}},
			{"bad tool name", func() error {
				_, err := c.Explain(ctx, wire.ExplainRequest{Session: "s1", Tool: "1bash"})
				return err
			}, []string{`"1bash"`}},
			{"no commands", func() error {
				_, err := c.Append(ctx, "s1", nil)
				return err
			}, []string{`"commands"`}},
			{"discover without names", func() error {
				_, err := c.Discover(ctx, "s1", "")
				return err
			}, []string{`"names"`}},
		}
		for _, tc := range cases {
			err := tc.call()
			ae := asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
			for _, w := range tc.want {
				if !strings.Contains(ae.Message, w) {
					t.Errorf("%s: message %q lacks %q", tc.name, ae.Message, w)
				}
			}
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("%s: errors.Is(err, ErrBadRequest) = false", tc.name)
			}
		}
	})
}

// An override object is refused, with a message naming what to send,
// when its kind is missing or unknown or a field belongs to another kind:
// in a NATS body and in an HTTP query parameter alike. (The typed Go
// client cannot send an unknown kind, so these are raw.)
func TestInvalidOverrideObjects(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tc := range []struct {
		name, override string
		want           []string
	}{
		{"missing kind", `{"names":["bash"]}`, []string{`field "kind" is required`, "none, empty, intent, names"}},
		{"empty kind", `{"kind":""}`, []string{`field "kind" is required`}},
		{"unknown kind", `{"kind":"some"}`, []string{`override kind "some" is unknown`, "none, empty, intent, names"}},
		{"names without names", `{"kind":"names"}`, []string{"at least one name"}},
		{"intent with names", `{"kind":"intent","names":["bash"]}`, []string{`use kind "names"`}},
		{"names with intent", `{"kind":"names","names":["bash"],"intent":{}}`, []string{"names only"}},
		{"none with intent", `{"kind":"none","intent":{}}`, []string{`"none" takes no other field`}},
		{"unknown field", `{"kind":"empty","why":1}`, []string{`"why"`}},
		{"wrong field type", `{"kind":"names","names":"bash"}`, []string{`"override.names"`, "array of strings"}},
		{"bad tool name", `{"kind":"names","names":["1bash"]}`, []string{`"1bash"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := rawNATS(t, e.nc, "tools.api.web.session.resolve", `{"session":"s1","override":`+tc.override+`}`)
			if got := msg.Header.Get(micro.ErrorCodeHeader); got != "400" {
				t.Fatalf("NATS error code %q, want 400 (body %s)", got, msg.Data)
			}
			checkMessage(t, "NATS", apiError(t, msg.Data).Message, tc.want)
			status, _, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/s1/resolve?override="+url.QueryEscape(tc.override), "")
			ae := apiError(t, body)
			if status != http.StatusBadRequest || ae.Code != CodeInvalid {
				t.Fatalf("HTTP %d %s: %s", status, ae.Code, ae.Message)
			}
			checkMessage(t, "HTTP", ae.Message, tc.want[:1])
		})
	}
}

func checkMessage(t *testing.T, where, msg string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s message %q lacks %q", where, msg, w)
		}
	}
}

// Raw bodies: unknown command types, wrong field types, unknown fields.
func TestInvalidRawBodies(t *testing.T) {
	e := newEnv(t, Config{})
	cases := []struct {
		name, body string
		want       []string
	}{
		{"unknown command type", `{"commands":[{"type":"ToolsToggled","enabled":true},{"type":"Bogus"}]}`,
			[]string{"commands[1]", `"Bogus"`, "ToolsToggled, WebSearchSet"}},
		{"wrong field type", `{"commands":[{"type":"ToolsToggled","enabled":"yes"}]}`,
			[]string{`"enabled"`, "true, false or null", `"yes"`}},
		{"unknown command field", `{"commands":[{"type":"ToolDisabled","name":"bash","why":"x"}]}`,
			[]string{`"why"`, "name"}},
		{"missing command field", `{"commands":[{"type":"ToolDisabled"}]}`, []string{`"name"`, "required"}},
		{"unknown request field", `{"commands":[],"channel":"web"}`, []string{`"channel"`, "commands"}},
		{"wrong request field type", `{"expected_seq":"3","commands":[]}`, []string{`"expected_seq"`, "non-negative integer"}},
		{"not JSON", `{"commands":[`, []string{"JSON"}},
		{"trailing data", `{"commands":[]} {}`, []string{"after the JSON object"}},
		{"session differs from path", `{"session":"other","commands":[{"type":"ToolsToggled","enabled":true}]}`, []string{`"other"`, `"s1"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/s1/events", tc.body)
			ae := apiError(t, body)
			if status != http.StatusBadRequest || ae.Code != CodeInvalid {
				t.Fatalf("HTTP %d %s: %s", status, ae.Code, ae.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(ae.Message, w) {
					t.Errorf("HTTP message %q lacks %q", ae.Message, w)
				}
			}
			if tc.name == "session differs from path" {
				return
			}
			// Over NATS the session is in the body.
			natsBody := strings.Replace(tc.body, "{", `{"session":"s1",`, 1)
			msg := rawNATS(t, e.nc, "tools.api.web.events.append", natsBody)
			if got := msg.Header.Get(micro.ErrorCodeHeader); got != "400" {
				t.Fatalf("NATS error code %q, want 400 (body %s)", got, msg.Data)
			}
			if got := msg.Header.Get(HeaderErrorCode); got != CodeInvalid {
				t.Fatalf("NATS %s = %q", HeaderErrorCode, got)
			}
			nae := apiError(t, msg.Data)
			for _, w := range tc.want {
				if !strings.Contains(nae.Message, w) {
					t.Errorf("NATS message %q lacks %q", nae.Message, w)
				}
			}
		})
	}
	// Query strings are strict too.
	for path, want := range map[string]string{
		"/v1/sessions/s1?min_seq=x":                `"min_seq"`,
		"/v1/sessions/s1?color=red":                `"color"`,
		"/v1/sessions/s1/resolve?override={":       `"override"`,
		"/v1/sessions/s1/history?until=2025-13-01": `"2025-13-01"`,
	} {
		status, _, body := rawHTTP(t, "GET", e.httpURL+path, "")
		if ae := apiError(t, body); status != 400 || !strings.Contains(ae.Message, want) {
			t.Errorf("GET %s: %d %q, want 400 naming %s", path, status, ae.Message, want)
		}
	}
	// An invalid channel header.
	status, _, body := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/s1/events",
		`{"commands":[{"type":"ToolsToggled","enabled":true}]}`, HeaderChannel, "web.ui")
	if ae := apiError(t, body); status != 400 || !strings.Contains(ae.Message, `"web.ui"`) {
		t.Errorf("bad channel header: %d %q", status, ae.Message)
	}
}

// Turn operations without an open turn are 409 no_turn.
func TestNoTurn(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		_, err := c.Discover(ctx, "idle", "", "send_message")
		asAPIError(t, err, http.StatusConflict, wire.CodeNoTurn)
		if !errors.Is(err, service.ErrNoTurn) {
			t.Fatalf("errors.Is(ErrNoTurn) = false for %v", err)
		}
		_, err = c.EndTurn(ctx, "idle")
		asAPIError(t, err, http.StatusConflict, wire.CodeNoTurn)
		_, err = c.Checkpoint(ctx, "idle")
		asAPIError(t, err, http.StatusConflict, wire.CodeNoTurn)
	})
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/nope", 404, wire.CodeNotFound},
		{"GET", "/", 404, wire.CodeNotFound},
		{"GET", "/v1/sessions/s1/events", 405, wire.CodeMethodNotAllowed},
		{"PATCH", "/v1/sessions/s1", 405, wire.CodeMethodNotAllowed},
		{"DELETE", "/v1/sessions/s1", 404, wire.CodeNotFound}, // Nothing to delete
		{"PUT", "/v1/sessions/s1/resolve", 405, wire.CodeMethodNotAllowed},
	} {
		status, h, body := rawHTTP(t, tc.method, e.httpURL+tc.path, "")
		ae := apiError(t, body)
		if status != tc.status || ae.Code != tc.code || ae.Message == "" {
			t.Errorf("%s %s: %d %s %q, want %d %s", tc.method, tc.path, status, ae.Code, ae.Message, tc.status, tc.code)
		}
		if status == 405 && h.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
		if ct := h.Get("Content-Type"); ct != MIMEJSON {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ct)
		}
	}
	// Nothing dispatched yet: not_found, both ways.
	transports(t, e, func(t *testing.T, c *Client) {
		_, err := c.LastDispatch(ctxT(t), "never")
		ae := asAPIError(t, err, http.StatusNotFound, wire.CodeNotFound)
		if !strings.Contains(ae.Message, `"never"`) {
			t.Fatalf("message %q lacks the session", ae.Message)
		}
	})
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, Config{})
	big := `{"commands":[{"type":"PresetChosen","preset":"` + strings.Repeat("x", 1<<20) + `"}]}`
	status, _, body := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/s1/events", big)
	ae := apiError(t, body)
	if status != http.StatusRequestEntityTooLarge || ae.Code != wire.CodeTooLarge || !strings.Contains(ae.Message, "1 MiB") {
		t.Fatalf("%d %s %q, want 413 naming 1 MiB", status, ae.Code, ae.Message)
	}
	// Over NATS, with a smaller bound than the server's max payload.
	small := newEnv(t, Config{MaxBodyBytes: 1 << 10})
	msg := rawNATS(t, small.nc, "tools.api.web.events.append", big[:4<<10])
	if got := msg.Header.Get(micro.ErrorCodeHeader); got != "413" {
		t.Fatalf("NATS error code %q, want 413: %s", got, msg.Data)
	}
	if ae := apiError(t, msg.Data); ae.Code != wire.CodeTooLarge || !strings.Contains(ae.Message, "1024 bytes (1 KiB)") {
		t.Fatalf("NATS: %+v", ae)
	}
	// The fix named fits the operation: a registry is not a list of
	// commands (a registry with tool embeddings outgrows the bound).
	// A registry diff takes a registry file of up to the registry
	// history's bound, whatever MaxBodyBytes says.
	limit := service.MaxRegistryBytes + 64<<10
	status, _, body = rawHTTP(t, "POST", small.httpURL+"/v1/registry/diff", `{"registry":{"x":"`+strings.Repeat("x", limit)+`"}}`)
	if ae := apiError(t, body); status != http.StatusRequestEntityTooLarge || !strings.Contains(ae.Message, "serve --registry FILE") || strings.Contains(ae.Message, "commands") {
		t.Errorf("registry diff over the bound: %d %q", status, ae.Message)
	}
	status, _, body = rawHTTP(t, "POST", small.httpURL+"/v1/registry/diff", `{"registry":{"x":"`+strings.Repeat("x", 2<<10)+`"}}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `unknown key \"x\"`) {
		t.Errorf("a registry diff over MaxBodyBytes but under the registry bound: %d %s, want it read (400 for the bad registry)", status, body)
	}
}

// JetStream gone: 503 unavailable, not 500.
func TestUnavailable(t *testing.T) {
	e := newEnv(t, Config{RequestTimeout: 2 * time.Second})
	e.engNC.Close()
	_, err := e.httpClient().Resolve(ctxT(t), wire.ResolveRequest{Session: "s1"})
	asAPIError(t, err, http.StatusServiceUnavailable, CodeUnavailable)
	_, err = e.httpClient().Append(ctxT(t), "s1", nil, events.ToolsToggled{Enabled: ptr(true)})
	asAPIError(t, err, http.StatusServiceUnavailable, CodeUnavailable)
	// The micro service went with the connection: no responders, once the
	// server has dropped the closed connection's subscriptions (wait
	// for that event; a request sent before it reaches a dead subscriber).
	subj := "tools.api.cli.session.resolve"
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if e.srv.Server().GlobalAccount().SubscriptionInterest(subj) {
			return fmt.Errorf("the server still has interest in %s", subj)
		}
		return nil
	})
	_, err = e.natsClient().Resolve(ctxT(t), wire.ResolveRequest{Session: "s1"})
	asAPIError(t, err, http.StatusServiceUnavailable, CodeUnavailable)
}

func TestErrorOfMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{errors.New("boom"), 500, wire.CodeInternal},
		{context.DeadlineExceeded, 503, CodeUnavailable},
		{service.ErrInvalid, 400, CodeInvalid},
		{events.ErrInvalidSession, 400, CodeInvalid},
		{service.ErrNoTurn, 409, wire.CodeNoTurn},
		{service.ErrConflict, 409, wire.CodeConflict},
		// Outcome unknown and disk full are their own
		// codes, distinct from refusals and from "unavailable".
		{fmt.Errorf("append: %w", &logport.OutcomeUnknownError{Session: "s", AfterSeq: 7, Err: context.DeadlineExceeded}), 503, wire.CodeOutcomeUnknown},
		{fmt.Errorf("append: %w", logport.ErrNotSent), 503, CodeUnavailable},
		{fmt.Errorf("append: %w", logport.ErrStorageFull), 507, CodeStorageFull},
	} {
		if e := errorOf(tc.err); e.Status != tc.status || e.Code != tc.code {
			t.Errorf("errorOf(%v) = %d %s, want %d %s", tc.err, e.Status, e.Code, tc.status, tc.code)
		}
	}
}

func TestConflictEnvelopeAlwaysHasSequences(t *testing.T) {
	e := newEnv(t, Config{})
	body := `{"expected_seq":0,"commands":[{"type":"ToolsToggled","enabled":true}]}`
	if st, _, b := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/env/events", body); st != 200 {
		t.Fatalf("first append: %d %s", st, b)
	}
	st, _, b := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/env/events", body)
	if st != 409 || !strings.Contains(string(b), `"expected":0,"actual":`) {
		t.Fatalf("conflict reply %d %s", st, b)
	}
	_, _, b = rawHTTP(t, "GET", e.httpURL+"/v1/sessions/a.b", "")
	if strings.Contains(string(b), "expected") {
		t.Fatalf("non-conflict reply carries sequences: %s", b)
	}
}

// The service decides an error's kind (service.KindOf) from
// the sentinels of every core package and of the log; the api maps each
// kind to one wire code, and a kind it does not know would be a 500.
func TestKindOfEverySentinel(t *testing.T) {
	for k := service.KindInternal; k <= service.KindUnavailable; k++ {
		if kc, ok := kindCodes[k]; !ok || !slices.Contains(wire.Codes, kc.code) || kc.status == 0 {
			t.Errorf("kind %s maps to %+v (known %v)", k, kc, ok)
		}
	}
	for _, tc := range []struct {
		err  error
		want service.Kind
	}{
		{&logport.ConflictError{Session: "s", Expected: 1, Actual: 2}, service.KindConflict},
		{fmt.Errorf("append: %w", &logport.KeyInUseError{}), service.KindKeyInUse},
		{aggregate.ErrInvalidCommand, service.KindInvalid},
		{aggregate.ErrMaterialized, service.KindInvalid},
		{aggregate.ErrUnknownTool, service.KindInvalid},
		{resolver.ErrUnknownPreset, service.KindInvalid},
		{resolver.ErrUnknownProfile, service.KindInvalid},
		{resolver.ErrInvalidRequest, service.KindInvalid},
		{checkpoint.ErrNotInContract, service.KindInvalid},
		{events.ErrTooLarge, service.KindInvalid},
		{jetstream.ErrInvalidSession, service.KindInvalid},
		{projection.ErrNotCaughtUp, service.KindUnavailable},
		{nats.ErrNoResponders, service.KindUnavailable},
		{&natsjs.APIError{Code: 503, Description: "no leader"}, service.KindUnavailable},
		{&natsjs.APIError{Code: 500, Description: "boom"}, service.KindInternal},
		{nil, service.KindInternal},
	} {
		if got := service.KindOf(tc.err); got != tc.want {
			t.Errorf("KindOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	e := errorOf(fmt.Errorf("append: %w", &logport.ConflictError{Session: "s", Expected: 1, Actual: 2}))
	if e.Status != 409 || e.Code != wire.CodeConflict || e.Expected != 1 || e.Actual != 2 {
		t.Errorf("conflict: %+v", e)
	}
}
