package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// A deleted session answers 410 with the error envelope, code
// "deleted", over HTTP and NATS, for reads and writes alike; its id starts
// no new session; a bystander session is untouched; sessions no longer
// lists it.
func TestDeletedAnswers410BothTransports(t *testing.T) {
	env := newEnv(t, Config{})
	ctx := ctxT(t)
	c := env.httpClient()
	for _, s := range []string{"gone1", "stay1"} {
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}, events.ToolDisabled{Name: "bash"}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Intent(ctx, "stay1", 0)
	if err != nil {
		t.Fatal(err)
	}
	del, err := c.Delete(ctx, wire.DeleteRequest{Session: "gone1", Reason: "user request"})
	if err != nil || del.Seq == 0 {
		t.Fatalf("delete: %+v %v", del, err)
	}
	// A registry diff right after the delete (the sessions list may still
	// name it) skips it instead of failing.
	if imp, err := env.eng.Impact(ctx, resolver.Default()); err != nil || imp.Sessions > 1 {
		t.Errorf("impact right after a delete: %+v %v, want at most the bystander", imp, err)
	}
	// HTTP: reads and writes, raw, with the envelope.
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/sessions/gone1", ""},
		{http.MethodGet, "/v1/sessions/gone1/resolve", ""},
		{http.MethodPost, "/v1/sessions/gone1/events", `{"commands":[{"type":"ToolsToggled","enabled":false}]}`},
		{http.MethodPost, "/v1/sessions/gone1/turn/begin", `{}`},
		{http.MethodPost, "/v1/sessions/gone1/resume", `{}`},
		{http.MethodDelete, "/v1/sessions/gone1", ""},
	} {
		status, _, body := rawHTTP(t, r.method, env.httpURL+r.path, r.body)
		if e := apiError(t, body); status != http.StatusGone || e.Code != wire.CodeDeleted || !strings.Contains(e.Message, "deleted") {
			t.Errorf("HTTP %s %s: %d %s %q, want 410 deleted", r.method, r.path, status, e.Code, e.Message)
		}
	}
	// NATS: the same, with the micro error headers.
	for _, r := range []struct{ op, body string }{
		{"session.intent", `{"session":"gone1"}`},
		{"events.append", `{"session":"gone1","commands":[{"type":"ToolsToggled","enabled":false}]}`},
		{"turn.begin", `{"session":"gone1"}`},
		{"session.delete", `{"session":"gone1"}`},
	} {
		msg := rawNATS(t, env.nc, "tools.api.web."+r.op, r.body)
		if msg.Header.Get(micro.ErrorCodeHeader) != "410" || msg.Header.Get(HeaderErrorCode) != wire.CodeDeleted || apiError(t, msg.Data).Code != wire.CodeDeleted {
			t.Errorf("NATS %s: headers %v body %s, want 410 deleted", r.op, msg.Header, msg.Data)
		}
	}
	// The Go client matches it with the sentinel, over NATS too.
	if _, err := env.natsClient().Intent(ctx, "gone1", 0); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("NATS client: %v, want deleted", err)
	}
	after, err := c.Intent(ctx, "stay1", 0)
	if err != nil || !slices.Equal(after.Intent.Disabled, before.Intent.Disabled) || after.Seq != before.Seq {
		t.Errorf("bystander changed: %+v, was %+v (%v)", after, before, err)
	}
	// sessions no longer lists it (the projection writes its marker).
	checkSessions(t, c, "stay1", "gone1")
	if imp, err := env.eng.Impact(ctx, resolver.Default()); err != nil || imp.Sessions != 1 {
		t.Errorf("impact after a delete: %+v %v, want the bystander only", imp, err)
	}
	// Deleting a session with no events is not_found (404).
	if _, err := c.Delete(ctx, wire.DeleteRequest{Session: "never1"}); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("delete of a session with no events: %v, want not_found", err)
	}
}

// Delete needs a write right (a read-only token is refused), and
// erase is the erase channel's only: any other channel gets 403 and
// nothing is written.
func TestDeleteRights(t *testing.T) {
	toks, err := tokens.Parse([]byte(`[{"token":"audit-token-0123456789","channel":"audit","read_only":true},{"token":"web-token-0123456789","channel":"web"}]`))
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, Config{Tokens: toks})
	ctx := ctxT(t)
	if _, err := env.natsClient().Append(ctx, "r1", nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	status, _, body := rawHTTP(t, http.MethodDelete, env.httpURL+"/v1/sessions/r1", "", "Authorization", "Bearer audit-token-0123456789")
	if status != http.StatusForbidden || apiError(t, body).Code != wire.CodeForbidden {
		t.Errorf("read-only token deletes: %d %s", status, body)
	}
	status, _, body = rawHTTP(t, http.MethodDelete, env.httpURL+"/v1/sessions/r1?erase=true", "", "Authorization", "Bearer web-token-0123456789")
	if e := apiError(t, body); status != http.StatusForbidden || e.Code != wire.CodeForbidden || !strings.Contains(e.Message, `"ops"`) {
		t.Errorf("web channel erases: %d %s", status, body)
	}
	msg := rawNATS(t, env.nc, "tools.api.web.session.delete", `{"session":"r1","erase":true}`)
	if msg.Header.Get(micro.ErrorCodeHeader) != "403" {
		t.Errorf("NATS web channel erases: %v %s", msg.Header, msg.Data)
	}
	if v, err := env.natsClient().Intent(ctx, "r1", 0); err != nil || v.Seq != 1 {
		t.Errorf("a refused delete wrote: %+v %v", v, err)
	}
}

// checkSessions waits until the sessions list has want and lacks gone.
func checkSessions(t *testing.T, c *Client, want, gone string) {
	t.Helper()
	ctx := ctxT(t)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		list, err := c.Sessions(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(list, want) || slices.Contains(list, gone) {
			return fmt.Errorf("sessions %v: want %q listed and %q not", list, want, gone)
		}
		return nil
	})
}

// The erase channel erases over both transports: the session's
// events are gone from the stream but the SessionDeleted kept as its
// tombstone, reads and writes of the id answer 410
// deleted (also on an engine that never saw it), and a
// bystander is untouched; without an eraser the engine answers 403.
func TestEraseOverBothTransports(t *testing.T) {
	env := newEnv(t, Config{})
	ctx := ctxT(t)
	c := env.httpClient()
	for _, s := range []string{"e-http", "e-nats", "e-stay"} {
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
			t.Fatal(err)
		}
	}
	status, _, body := rawHTTP(t, http.MethodDelete, env.httpURL+"/v1/sessions/e-http?erase=true", "", HeaderChannel, "ops")
	if e := apiError(t, body); status != http.StatusForbidden || !strings.Contains(e.Message, "no eraser") {
		t.Fatalf("erase without an eraser: %d %s", status, body)
	}
	x, err := env.eng.Log().NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.eng.SetEraser(x)
	stay, err := c.Intent(ctx, "e-stay", 0)
	if err != nil {
		t.Fatal(err)
	}
	ops := env.httpClient(WithChannel("ops"))
	res, err := ops.Delete(ctx, wire.DeleteRequest{Session: "e-http", Erase: true})
	if err != nil || !res.Erased || res.Purged != 1 || res.Seq == 0 || res.AuditSeq == 0 {
		t.Fatalf("erase over HTTP: %+v %v", res, err)
	}
	msg := rawNATS(t, env.nc, "tools.api.ops.session.delete", `{"session":"e-nats","erase":true}`)
	if msg.Header.Get(micro.ErrorCodeHeader) != "" || !strings.Contains(string(msg.Data), `"erased":true`) {
		t.Fatalf("erase over NATS: %v %s", msg.Header, msg.Data)
	}
	for _, s := range []string{"e-http", "e-nats"} {
		if recs, err := env.eng.Log().ReadSession(ctx, s, 0, 0); err != nil || len(recs) != 1 || recs[0].Envelope.Type != events.TypeSessionDeleted {
			t.Errorf("%s holds %d events (%v), want its SessionDeleted only", s, len(recs), err)
		}
		if _, err := c.Intent(ctx, s, 0); !errors.Is(err, service.ErrDeleted) {
			t.Errorf("intent of erased %s: %v", s, err)
		}
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); !errors.Is(err, service.ErrDeleted) {
			t.Errorf("append to erased %s: %v", s, err)
		}
	}
	// Another engine on the same stream, which never saw the sessions,
	// refuses the id too (by the view the erase left, which holds only the
	// counters, or by the audit record when there is no view).
	other := newEnvOn(t, ctx, env.srv, env.srv.ClientURL(), Config{})
	x2, err := other.eng.Log().NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other.eng.SetEraser(x2)
	if _, err := other.httpClient().Append(ctx, "e-http", ptr(uint64(0)), events.ToolsToggled{Enabled: ptr(true)}); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("another engine's first write to an erased id: %v", err)
	}
	after, err := c.Intent(ctx, "e-stay", 0)
	if err != nil || after.Seq != stay.Seq {
		t.Errorf("bystander: %+v %v, was %+v", after, err, stay)
	}
}

// With DeleteChannels set, a channel not named may not delete a session
// (403, nothing written), over both transports; a named channel and the
// erase channel may.
func TestDeleteRestrictedToChannels(t *testing.T) {
	env := newEnv(t, Config{DeleteChannels: []string{"web"}})
	ctx := ctxT(t)
	c := env.httpClient()
	for _, s := range []string{"d-slack", "d-nats", "d-web", "d-ops"} {
		if _, err := c.Append(ctx, s, nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
			t.Fatal(err)
		}
	}
	status, _, body := rawHTTP(t, http.MethodDelete, env.httpURL+"/v1/sessions/d-slack", "", HeaderChannel, "slack")
	if e := apiError(t, body); status != http.StatusForbidden || !strings.Contains(e.Message, "may not delete") || !strings.Contains(e.Message, "--delete-channel") {
		t.Fatalf("delete from channel slack: %d %s", status, body)
	}
	msg := rawNATS(t, env.nc, "tools.api.slack.session.delete", `{"session":"d-nats"}`)
	if msg.Header.Get(micro.ErrorCodeHeader) != "403" {
		t.Fatalf("delete over NATS from channel slack: %v %s", msg.Header, msg.Data)
	}
	for _, s := range []string{"d-slack", "d-nats"} {
		if _, err := c.Intent(ctx, s, 0); err != nil {
			t.Errorf("%s after a refused delete: %v", s, err)
		}
	}
	if _, err := env.httpClient(WithChannel("web")).Delete(ctx, wire.DeleteRequest{Session: "d-web"}); err != nil {
		t.Errorf("delete from channel web: %v", err)
	}
	if _, err := env.httpClient(WithChannel("ops")).Delete(ctx, wire.DeleteRequest{Session: "d-ops"}); err != nil {
		t.Errorf("delete from the erase channel: %v", err)
	}
}
