package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// permConfig is the documented server configuration with per-channel users.
const permConfig = "../deploy/nats-server.conf"

// permUser is one user of the configuration.
type permUser struct {
	password string
	// inbox is the reply subject prefix the user may subscribe to
	// ("_INBOX" unless the file gives the user a private one, e.g.
	// _INBOX_web.>).
	inbox string
}

// permUsers reads the users of the configuration (includes resolved)
// with nats-server's own parser, so that the test follows the file
// rather than a copy of it.
func permUsers(t *testing.T, conf string) map[string]permUser {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("parse %s: %v", conf, err)
	}
	out := map[string]permUser{}
	for _, u := range opts.Users {
		pu := permUser{password: u.Password, inbox: "_INBOX"}
		if u.Permissions != nil && u.Permissions.Subscribe != nil {
			for _, a := range u.Permissions.Subscribe.Allow {
				if strings.HasPrefix(a, "_INBOX") && strings.HasSuffix(a, ".>") && !strings.ContainsAny(strings.TrimSuffix(a, ".>"), "*>") {
					pu.inbox = strings.TrimSuffix(a, ".>")
				}
			}
		}
		out[u.Username] = pu
	}
	for _, u := range []string{"engine", "engine-api", "admin", "eraser", "web", "slack", "tui", "backend", "auditor"} {
		if out[u].password == "" {
			t.Fatalf("%s defines no password for user %q (users: %v)", conf, u, slices.Sorted(maps.Keys(out)))
		}
	}
	return out
}

// permConn is a connection as one user of the configuration; it records
// the errors the server reports asynchronously (permission violations).
type permConn struct {
	user string
	nc   *nats.Conn
	mu   sync.Mutex
	errs []string
}

func permConnect(t *testing.T, url, user string, pu permUser) *permConn {
	t.Helper()
	c := &permConn{user: user}
	c.nc = natstest.Connect(t, url, nats.UserInfo(user, pu.password), nats.Name("perm-"+user), nats.CustomInboxPrefix(pu.inbox),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err.Error())
			c.mu.Unlock()
		}))
	return c
}

// mark is the number of errors seen so far.
func (c *permConn) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errs)
}

// find returns the first permissions violation for op to subject
// reported after mark, or "".
func (c *permConn) find(from int, op, subject string) string {
	want := fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs[from:] {
		if strings.Contains(e, want) {
			return e
		}
	}
	return ""
}

// attempt runs call, which publishes to subject, until it returns or the
// server reports a violation for the subject (then call's context is
// cancelled). It returns call's error and the violation text ("" if none).
func (c *permConn) attempt(t *testing.T, subject string, call func(ctx context.Context) error) (violation string, callErr error) {
	t.Helper()
	from := c.mark()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	finished := false
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		select {
		case callErr = <-done:
			finished = true
			return nil
		default:
		}
		if violation = c.find(from, "Publish", subject); violation != "" {
			return nil
		}
		return fmt.Errorf("user %s: %s neither answered nor refused", c.user, subject)
	})
	cancel()
	if !finished {
		callErr = <-done
	}
	return violation, callErr
}

// violation waits for a permissions violation for op ("Publish" or
// "Subscription") to subject reported after mark, and returns its text.
func (c *permConn) violation(t *testing.T, from int, op, subject string) string {
	t.Helper()
	var got string
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got = c.find(from, op, subject); got != "" {
			return nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return fmt.Errorf("user %s: no permissions violation for %s to %q among the server's errors %q", c.user, op, subject, c.errs[from:])
	})
	return got
}

// deniedRequest sends a request that the server must refuse: it waits
// for the violation naming subject, then gives up on the request, and
// checks that no reply came. It returns the server's error text.
func (c *permConn) deniedRequest(t *testing.T, subject string, body []byte) string {
	t.Helper()
	from := c.mark()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		msg *nats.Msg
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := c.nc.RequestWithContext(ctx, subject, body)
		done <- result{m, err}
	}()
	text := c.violation(t, from, "Publish", subject)
	cancel()
	r := <-done
	if r.err == nil {
		t.Fatalf("user %s: request to %s was answered: %s %v", c.user, subject, r.msg.Data, r.msg.Header)
	}
	return text
}

// deniedPublish publishes to subject and waits for the violation.
func (c *permConn) deniedPublish(t *testing.T, subject string, body []byte) string {
	t.Helper()
	from := c.mark()
	if err := c.nc.Publish(subject, body); err != nil {
		t.Fatal(err)
	}
	return c.violation(t, from, "Publish", subject)
}

// permDirectRead reads a session the way docs/wire-format.md says: batched
// direct gets {"seq":N,"next_by_subj":...,"batch":256} until the end of
// batch, and returns the messages.
func permDirectRead(t *testing.T, nc *nats.Conn, session string) []*nats.Msg {
	t.Helper()
	return permDirectReadFrom(t, nc, "TOOLS_EVENTS", "tools.events."+session)
}

// permDirectReadFrom is permDirectRead of subject in stream.
func permDirectReadFrom(t *testing.T, nc *nats.Conn, stream, subject string) []*nats.Msg {
	t.Helper()
	var out []*nats.Msg
	seq := uint64(1)
	for {
		inbox := nc.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": subject, "batch": 256})
		if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("direct get of %s in %s from seq %d: %v", subject, stream, seq, err)
			}
			if st := m.Header.Get("Status"); st != "" {
				if st == "404" && n == 0 || st == "204" {
					break // no (more) messages, or end of batch
				}
				t.Fatalf("direct get of %s in %s: status %s %s", subject, stream, st, m.Header.Get("Description"))
			}
			n++
			out = append(out, m)
			var last uint64
			fmt.Sscan(m.Header.Get("Nats-Sequence"), &last)
			seq = last + 1
		}
		_ = sub.Unsubscribe()
		if n < 256 {
			return out
		}
	}
}

// permEnvelope decodes a stored body by hand (a msgpack map).
func permEnvelope(t *testing.T, m *nats.Msg) map[string]any {
	t.Helper()
	var env map[string]any
	if err := msgpack.Unmarshal(m.Data, &env); err != nil {
		t.Fatalf("decode %s seq %s: %v", m.Header.Get("Nats-Subject"), m.Header.Get("Nats-Sequence"), err)
	}
	return env
}

// Permissions with a real server configured as documented:
// `engine serve --server-config deploy/nats-server.conf`, and each user of
// that file connecting over TCP. A channel user may call the API on its
// own channel only (and the event records that channel), cannot publish
// another channel's commands or events, cannot delete or purge; the
// backend may publish events in the wire format, and they are folded; the
// auditor reads by direct get and cannot publish events. Every refusal is
// a permissions violation from the server naming the subject.
func TestChannelPermissions(t *testing.T) {
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	// Erases purge through the eraser user, never a channel's.
	p := startEngine(t, t.TempDir(), append(rtDeployArgs(conf, pw), "--nats-erase-user", "eraser", "--nats-erase-password", pw["eraser"].password)...)
	ctx := e2eCtx(t)
	hc := p.Client("")

	// No anonymous client, no wrong password.
	if nc, err := nats.Connect(p.NATSURL, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("anonymous connection accepted")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("anonymous connection: %v, want an authorization violation", err)
	}
	if nc, err := nats.Connect(p.NATSURL, nats.UserInfo("web", "wrong"), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("web with a wrong password accepted")
	}

	users := map[string]*permConn{}
	for _, u := range []string{"engine", "web", "slack", "tui", "backend", "auditor", "eraser"} {
		users[u] = permConnect(t, p.NATSURL, u, pw[u])
	}

	// Channel users: their own channel works and is what the event records.
	channels := []string{"web", "slack", "tui"}
	for i, ch := range channels {
		c := users[ch]
		session := "perm-" + ch
		res, err := newNATSEngineClient(c.nc, client.WithChannel(ch), client.WithActor("alice@"+ch)).
			Append(ctx, session, nil, events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"})
		if err != nil {
			t.Fatalf("user %s: append on tools.api.%s.events.append: %v", ch, ch, err)
		}
		h, err := hc.History(ctx, wire.HistoryRequest{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Entries) != 2 || h.State.Seq != res.LastSeq {
			t.Fatalf("history of %s: %+v, want 2 events up to %d", session, h.Entries, res.LastSeq)
		}
		for _, e := range h.Entries {
			if e.Channel != ch || e.Actor != "alice@"+ch {
				t.Fatalf("%s seq %d written by %s/%s, want %s/alice@%s", session, e.Seq, e.Channel, e.Actor, ch, ch)
			}
		}
		// Reads on the own channel work too.
		if v, err := newNATSEngineClient(c.nc, client.WithChannel(ch)).Intent(ctx, session, res.LastSeq); err != nil || v.Seq != res.LastSeq {
			t.Fatalf("user %s: intent of %s: %+v, %v", ch, session, v, err)
		}

		// Another channel's commands (and reads) are refused by the server.
		other := channels[(i+1)%len(channels)]
		for _, op := range []string{"events.append", "session.intent"} {
			subj := "tools.api." + other + "." + op
			body, _ := json.Marshal(map[string]any{"session": session, "commands": []any{map[string]any{"type": "ToolDisabled", "name": "grep"}}})
			if op != "events.append" {
				body, _ = json.Marshal(map[string]any{"session": session})
			}
			c.deniedRequest(t, subj, body)
		}
		// The API client sees the refusal as a request that gets no answer.
		violation, err := c.attempt(t, "tools.api."+other+".events.append", func(ctx context.Context) error {
			_, err := newNATSEngineClient(c.nc, client.WithChannel(other)).Append(ctx, session, nil, events.ToolDisabled{Name: "grep"})
			return err
		})
		if err == nil || violation == "" {
			t.Fatalf("user %s: append on channel %s: %v, server error %q; want a refused request", ch, other, err, violation)
		}
		// The channel is taken from the subject, never from the body.
		msg, err := c.nc.RequestWithContext(ctx, "tools.api."+ch+".events.append",
			[]byte(`{"session":"`+session+`","channel":"`+other+`","commands":[{"type":"ToolDisabled","name":"grep"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Header.Get("Nats-Service-Error-Code") != "400" || msg.Header.Get(api.HeaderErrorCode) != api.CodeInvalid || !strings.Contains(string(msg.Data), `\"channel\"`) {
			t.Fatalf("user %s: append with a body channel: %v %s, want a 400 naming the field \"channel\"", ch, msg.Header, msg.Data)
		}
		// Events straight to the stream: plain publish and JetStream publish.
		c.deniedPublish(t, "tools.events."+session, []byte("x"))
		c.deniedRequest(t, "tools.events.perm-backend", e2eWireBody(t, ulid.Make().String(), "perm-backend", ch, "mallory", "ToolsToggled", map[string]any{"enabled": false}))
		// No JetStream API at all, and no reading the event subjects.
		c.deniedRequest(t, "$JS.API.INFO", nil)
		c.deniedRequest(t, "$JS.API.DIRECT.GET.TOOLS_EVENTS", []byte(`{"seq":1}`))
		from := c.mark()
		if _, err := c.nc.SubscribeSync("tools.events.>"); err != nil {
			t.Fatal(err)
		}
		c.violation(t, from, "Subscription", "tools.events.>")
		from = c.mark()
		if _, err := c.nc.SubscribeSync("tools.api." + other + ".>"); err != nil {
			t.Fatal(err)
		}
		c.violation(t, from, "Subscription", "tools.api."+other+".>")

		// Nothing of the refused attempts was written.
		h2, err := hc.History(ctx, wire.HistoryRequest{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		if len(h2.Entries) != 2 {
			t.Fatalf("history of %s after refused writes: %+v", session, h2.Entries)
		}
	}

	// The backend publishes an event in the wire format; the engine folds it.
	backend := users["backend"]
	js, err := jetstream.New(backend.nc)
	if err != nil {
		t.Fatal(err)
	}
	pub := &e2ePublisher{js: js, last: map[string]uint64{}}
	bs := "perm-backend"
	seqB1 := pub.publish(t, bs, func(id string) []byte {
		return e2eWireBody(t, id, bs, "backend", "svc:billing", "PresetChosen", map[string]any{"preset": "research"})
	})
	seqB2 := pub.publish(t, bs, func(id string) []byte {
		return e2eWireBody(t, id, bs, "backend", "svc:billing", "ToolDisabled", map[string]any{"name": "web_fetch"})
	})
	v, err := hc.Intent(ctx, bs, seqB2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Intent.Preset != "research" || !slices.Equal(v.Intent.Disabled, []string{"web_fetch"}) || v.Events != 2 || v.Skipped != 0 {
		t.Fatalf("backend's events not folded: %+v", v)
	}
	// The backend reads its session back by direct get.
	msgs := permDirectRead(t, backend.nc, bs)
	if len(msgs) != 2 || msgs[0].Header.Get("Nats-Sequence") != fmt.Sprint(seqB1) || permEnvelope(t, msgs[1])["type"] != "ToolDisabled" {
		t.Fatalf("backend direct get of %s: %d messages", bs, len(msgs))
	}
	// The backend may read its sessions' views on the API channel
	// "backend" (to learn whether its events were applied), has no
	// other API subject, and cannot change the stream.
	if bv, err := newNATSEngineClient(backend.nc, client.WithChannel("backend")).Intent(ctx, bs, seqB2); err != nil || bv.Seq != seqB2 || bv.Rejected != 0 {
		t.Fatalf("backend reading %s on tools.api.backend.session.intent: %+v, %v", bs, bv, err)
	}
	backend.deniedRequest(t, "tools.api.backend.events.append", []byte(`{"session":"perm-backend","commands":[{"type":"ToolsToggled","enabled":false}]}`))
	backend.deniedRequest(t, "tools.api.web.events.append", []byte(`{"session":"perm-web","commands":[{"type":"ToolsToggled","enabled":false}]}`))
	backend.deniedRequest(t, "$JS.API.STREAM.UPDATE.TOOLS_EVENTS", []byte(`{}`))

	// The auditor reads: direct gets of any session, the API on its channel.
	auditor := users["auditor"]
	for _, s := range []string{"perm-web", bs} {
		msgs := permDirectRead(t, auditor.nc, s)
		if len(msgs) != 2 {
			t.Fatalf("auditor direct get of %s: %d messages, want 2", s, len(msgs))
		}
		env := permEnvelope(t, msgs[0])
		if env["session"] != s || env["id"] == "" {
			t.Fatalf("auditor read %s seq %s: %v", s, msgs[0].Header.Get("Nats-Sequence"), env)
		}
	}
	ah, err := newNATSEngineClient(auditor.nc, client.WithChannel("audit")).History(ctx, wire.HistoryRequest{Session: bs})
	if err != nil || len(ah.Entries) != 2 || ah.Entries[0].Channel != "backend" || ah.Entries[0].Actor != "svc:billing" {
		t.Fatalf("auditor history of %s over tools.api.audit: %+v, %v", bs, ah.Entries, err)
	}
	// ... and cannot publish events, with a plain publish or JetStream.
	auditor.deniedPublish(t, "tools.events."+bs, []byte("x"))
	ajs, err := jetstream.New(auditor.nc)
	if err != nil {
		t.Fatal(err)
	}
	forged := e2eWireBody(t, ulid.Make().String(), bs, "audit", "eve", "ToolsToggled", map[string]any{"enabled": false})
	if violation, err := auditor.attempt(t, "tools.events."+bs, func(ctx context.Context) error {
		_, err := ajs.Publish(ctx, "tools.events."+bs, forged)
		return err
	}); err == nil || violation == "" {
		t.Fatalf("auditor's JetStream publish to tools.events.%s: %v, server error %q; want refused", bs, err, violation)
	}
	auditor.deniedRequest(t, "$JS.API.STREAM.UPDATE.TOOLS_EVENTS", []byte(`{}`))

	// Nobody, the engine's own user included, may purge or delete: the
	// stream API and message delete are refused by the server.
	ejs, err := jetstream.New(users["engine"].nc)
	if err != nil {
		t.Fatal(err)
	}
	info := func() *jetstream.StreamInfo {
		t.Helper()
		s, err := ejs.Stream(ctx, "TOOLS_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo()
	}
	before := info()
	// Deny_delete on; deny_purge off since erase purges a session's
	// subject, which only the admin path may do (the loop below).
	if !before.Config.DenyDelete || before.Config.DenyPurge {
		t.Fatalf("stream config: deny_delete %v deny_purge %v, want deny_delete on and deny_purge off", before.Config.DenyDelete, before.Config.DenyPurge)
	}
	for _, u := range []string{"engine", "web", "slack", "tui", "backend", "auditor"} {
		for _, subj := range []string{"$JS.API.STREAM.PURGE.TOOLS_EVENTS", "$JS.API.STREAM.DELETE.TOOLS_EVENTS", "$JS.API.STREAM.MSG.DELETE.TOOLS_EVENTS"} {
			body := []byte(`{}`)
			if strings.Contains(subj, "MSG.DELETE") {
				body = []byte(`{"seq":1,"no_erase":true}`)
			}
			text := users[u].deniedRequest(t, subj, body)
			if !strings.Contains(text, "permissions violation") {
				t.Fatalf("user %s %s: %q", u, subj, text)
			}
		}
	}
	// The nats.go JetStream calls fail the same way for the backend (whose
	// account has no JetStream of its own: it reaches the stream through
	// service imports of tools.events.* and direct gets only).
	for name, call := range map[string]func(context.Context) error{
		"$JS.API.STREAM.DELETE.TOOLS_EVENTS": func(ctx context.Context) error { return js.DeleteStream(ctx, "TOOLS_EVENTS") },
	} {
		if violation, err := backend.attempt(t, name, call); err == nil || violation == "" {
			t.Fatalf("backend: nats.go call on %s: %v, server error %q; want refused", name, err, violation)
		}
	}
	after := info()
	if after.State.Msgs != before.State.Msgs || after.State.FirstSeq != 1 {
		t.Fatalf("stream state changed: %+v, before %+v", after.State, before.State)
	}

	// The auditor is "read-only" (deploy/nats-server.conf, docs/security.md): it may
	// not write events through the API either.
	t.Run("auditor cannot append through the API", func(t *testing.T) {
		var res wire.AppendReply
		violation, err := auditor.attempt(t, "tools.api.audit.events.append", func(ctx context.Context) error {
			var err error
			res, err = newNATSEngineClient(auditor.nc, client.WithChannel("audit"), client.WithActor("eve")).
				Append(ctx, bs, nil, events.ToolsToggled{Enabled: e2eBool(false)})
			return err
		})
		if err == nil && violation == "" {
			t.Errorf("auditor appended ToolsToggled{enabled:false} to %s at seq %d over tools.api.audit.events.append: "+
				"the configuration lets the read-only auditor write events (its allow list has tools.api.audit.>)", bs, res.LastSeq)
		}
	})

	// "read only what they need": a channel user must not receive the
	// replies the engine sends to another channel's user.
	t.Run("a channel user cannot read another channel's replies", func(t *testing.T) {
		web := users["web"]
		from := web.mark()
		spy, err := web.nc.SubscribeSync("_INBOX.>")
		if err != nil {
			t.Fatal(err)
		}
		defer spy.Unsubscribe()
		if err := web.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := newNATSEngineClient(users["slack"].nc, client.WithChannel("slack")).Intent(e2eCtx(t), "perm-slack", 0); err != nil {
			t.Fatal(err)
		}
		// The reply reached slack, so the server queued any copy for web
		// before it answers web's ping: after the flush it is here or never.
		if err := web.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		var toSlack, other []string
		for {
			m, err := spy.NextMsg(50 * time.Millisecond)
			if err != nil {
				if !errors.Is(err, nats.ErrTimeout) {
					t.Logf("subscription to _INBOX.>: %v (server errors %q)", err, web.errs[from:])
				}
				break
			}
			if strings.Contains(string(m.Data), `"session":"perm-slack"`) {
				toSlack = append(toSlack, m.Subject)
			} else {
				desc := fmt.Sprintf("%s, %d bytes", m.Subject, len(m.Data))
				if subj := m.Header.Get("Nats-Subject"); subj != "" {
					desc += ": a JetStream direct get of " + subj + " in " + m.Header.Get("Nats-Stream")
				}
				other = append(other, desc)
			}
		}
		if len(toSlack)+len(other) > 0 {
			t.Errorf("user web, subscribed to _INBOX.> as deploy/nats-server.conf allows, received %d copies of the engine's JSON reply to slack's "+
				"session.intent request (%v) and %d other replies addressed to other connections (%v)",
				len(toSlack), toSlack, len(other), other)
		}
	})

	// The eraser may not delete or update the stream, nor delete a
	// message, nor publish an event; an erase (channel ops, over the
	// engine's eraser connection) purges the session and nothing else.
	t.Run("erase goes through the eraser user only", func(t *testing.T) {
		er := users["eraser"]
		for _, subj := range []string{"$JS.API.STREAM.DELETE.TOOLS_EVENTS", "$JS.API.STREAM.UPDATE.TOOLS_EVENTS", "$JS.API.STREAM.MSG.DELETE.TOOLS_EVENTS"} {
			if text := er.deniedRequest(t, subj, []byte(`{"seq":1,"no_erase":true}`)); !strings.Contains(text, "permissions violation") {
				t.Errorf("eraser %s: %q", subj, text)
			}
		}
		if text := er.deniedPublish(t, "tools.events.perm-erase", []byte("x")); !strings.Contains(text, "permissions violation") {
			t.Errorf("eraser publishes an event: %q", text)
		}
		ops := p.GoClient("ops")
		if _, err := ops.Append(ctx, client.AppendRequest{Session: "perm-erase", Commands: []client.Command{client.Enable()}}); err != nil {
			t.Fatal(err)
		}
		before := len(permDirectRead(t, users["engine"].nc, bs))
		res, err := ops.SessionDelete(ctx, client.DeleteRequest{Session: "perm-erase", Erase: true})
		if err != nil || !res.Erased || res.Purged != 1 {
			t.Fatalf("erase under the deployed accounts: %+v %v", res, err)
		}
		if n := len(permDirectRead(t, users["engine"].nc, "perm-erase")); n != 1 {
			t.Errorf("the erased session still has %d events, want its SessionDeleted only", n)
		}
		if n := len(permDirectRead(t, users["engine"].nc, bs)); n != before {
			t.Errorf("bystander %s has %d events, had %d", bs, n, before)
		}
	})
}
