package tests

// The red-team suite. Each test runs one attack against the
// built binary (and, where the attack needs users, the documented
// deploy/nats-server.conf), and checks that it is refused with a clear
// error, that the engine stays up (a normal write and read succeed
// afterwards), that a bystander session is byte-identical and that
// nothing acknowledged is lost.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// rtDeploy starts the engine on the documented per-user configuration.
func rtDeploy(t *testing.T, args ...string) (*engineProc, map[string]permUser) {
	t.Helper()
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	p := startEngine(t, t.TempDir(), append(rtDeployArgs(conf, pw), args...)...)
	return p, pw
}

// rtDeployArgs are the documented serve flags for the deploy config: the
// engine's login and its API connection's.
func rtDeployArgs(conf string, pw map[string]permUser) []string {
	return []string{"--server-config", conf, "--nats-user", "engine", "--nats-password", pw["engine"].password,
		"--nats-api-user", "engine-api", "--nats-api-password", pw["engine-api"].password}
}

// rtGet GETs url with headers (name, value pairs) and returns the body; a
// status other than 200 fails the test.
func rtGet(t *testing.T, url string, headers ...string) []byte {
	t.Helper()
	status, body := rtDo(t, "GET", url, nil, headers...)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	return body
}

// rtDo sends one HTTP request and returns the status and body.
func rtDo(t *testing.T, method, url string, body []byte, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// rtErr decodes an error envelope.
func rtErr(b []byte) (code, message string) {
	var env struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(b, &env)
	return env.Error.Code, env.Error.Message
}

// bystander is a session written before the attack, by a client that is
// not the attacker; after the attack it must be byte-identical.
type bystander struct {
	p       *engineProc
	c       *engineClient
	headers []string
	acked   []uint64
	view    []byte
	history []byte
	n       int
}

func newBystander(t *testing.T, p *engineProc, c *engineClient, headers ...string) *bystander {
	t.Helper()
	ctx := e2eCtx(t)
	b := &bystander{p: p, c: c, headers: headers}
	for _, cmd := range []events.Payload{events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"}, events.PresetChosen{Preset: "research"}} {
		res, err := c.Append(ctx, "bystander", nil, cmd)
		if err != nil {
			t.Fatalf("bystander append: %v", err)
		}
		b.acked = append(b.acked, res.LastSeq)
	}
	if _, err := c.Intent(ctx, "bystander", b.acked[len(b.acked)-1]); err != nil {
		t.Fatal(err)
	}
	// A read without min_seq through the engine that acknowledged
	// the writes includes them (read-your-writes within one engine).
	b.view = rtGet(t, p.HTTPURL+"/v1/sessions/bystander", headers...)
	b.history = rtGet(t, p.HTTPURL+"/v1/sessions/bystander/history", headers...)
	return b
}

// restarted points the bystander at a restarted engine process.
func (b *bystander) restarted(p *engineProc) {
	b.p, b.c = p, p.Client("web")
}

// check asserts the engine is up and serving, the bystander unchanged
// and every acknowledged event still in the log.
func (b *bystander) check(t *testing.T) {
	t.Helper()
	select {
	case <-b.p.exited:
		t.Fatalf("the engine died: %v\n%s", b.p.exitErr, b.p.Stderr)
	default:
	}
	ctx := e2eCtx(t)
	b.n++
	session := fmt.Sprintf("after%d", b.n)
	res, err := b.c.Append(ctx, session, nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatalf("engine not serving after the attack: append: %v\n%s", err, b.p.Stderr)
	}
	if v, err := b.c.Intent(ctx, session, res.LastSeq); err != nil || v.Seq != res.LastSeq {
		t.Fatalf("engine not serving after the attack: read: %+v %v", v, err)
	}
	// The engine may have been restarted (another process): across
	// engines the contract is min_seq.
	last := b.acked[len(b.acked)-1]
	if got := rtGet(t, fmt.Sprintf("%s/v1/sessions/bystander?min_seq=%d", b.p.HTTPURL, last), b.headers...); !bytes.Equal(got, b.view) {
		t.Fatalf("bystander's view changed:\nbefore %s\nafter  %s", b.view, got)
	}
	got := rtGet(t, b.p.HTTPURL+"/v1/sessions/bystander/history", b.headers...)
	if !bytes.Equal(got, b.history) {
		t.Fatalf("bystander's history changed:\nbefore %s\nafter  %s", b.history, got)
	}
	var h wire.HistoryOf[*service.Command]
	if err := json.Unmarshal(got, &h); err != nil {
		t.Fatal(err)
	}
	for i, seq := range b.acked {
		if i >= len(h.Entries) || h.Entries[i].Seq != seq {
			t.Fatalf("acknowledged event at seq %d missing from the bystander's history %s", seq, got)
		}
	}
}

// rtRequest sends a NATS request with headers and returns the reply.
func rtRequest(t *testing.T, nc *nats.Conn, subject string, body []byte, headers ...string) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = body
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	reply, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return reply
}

// rtMsgpackAttack sends a hostile msgpack body over HTTP and, as channel
// user web, over NATS, and checks both refusals.
func rtMsgpackAttack(t *testing.T, httpBody, natsBody []byte, mention string) {
	p, pw := rtDeploy(t)
	by := newBystander(t, p, p.Client("web"))
	status, b := rtDo(t, "POST", p.HTTPURL+"/v1/sessions/victim/events", httpBody, "Content-Type", "application/msgpack")
	if code, msg := rtErr(b); status != 400 || code != "invalid" || !strings.Contains(msg, mention) {
		t.Fatalf("HTTP msgpack attack: %d %s, want 400 invalid mentioning %q", status, b, mention)
	}
	web := permConnect(t, p.NATSURL, "web", pw["web"])
	reply := rtRequest(t, web.nc, "tools.api.web.events.append", natsBody, "Content-Type", "application/msgpack")
	if reply.Header.Get("Nats-Service-Error-Code") != "400" || !strings.Contains(string(reply.Data), mention) {
		t.Fatalf("NATS msgpack attack as web: %v %s, want a 400 mentioning %q", reply.Header, reply.Data, mention)
	}
	by.check(t)
}

// Item 1: an array32 header claiming 4G elements made msgpack.Unmarshal
// allocate ~68 GB (fatal out of memory).
func TestAttackMsgpackHugeArrayHeader(t *testing.T) {
	body := []byte{0xdd, 0xff, 0xff, 0xff, 0xff}
	rtMsgpackAttack(t, body, body, "claims 4294967295 elements")
}

// Item 1: 1 MiB of nested one-element arrays was a fatal stack overflow.
func TestAttackMsgpackNestedArrays(t *testing.T) {
	rtMsgpackAttack(t, bytes.Repeat([]byte{0x91}, 1<<20), bytes.Repeat([]byte{0x91}, 1<<20-4096), "nesting deeper than 16")
}

// Item 1: bytes after the msgpack body were ignored.
func TestAttackMsgpackTrailingBytes(t *testing.T) {
	body, err := msgpack.Marshal(map[string]any{"session": "victim", "commands": []any{map[string]any{"type": "ToolsToggled", "enabled": false}}})
	if err != nil {
		t.Fatal(err)
	}
	body = append(body, 0xc0, 0xc0)
	rtMsgpackAttack(t, body, body, "2 trailing bytes")
}

// Item 2: the read-only auditor could reconfigure, read and acknowledge
// the engine's durable consumer "views" (headers_only: every event
// folded without a body; another filter: views frozen).
func TestAttackAuditorReconfiguresEngineConsumer(t *testing.T) {
	p, pw := rtDeploy(t)
	by := newBystander(t, p, p.Client("web"))
	auditor := permConnect(t, p.NATSURL, "auditor", pw["auditor"])
	hostile, _ := json.Marshal(map[string]any{"stream_name": "TOOLS_EVENTS", "config": map[string]any{
		"durable_name": "views", "name": "views", "deliver_policy": "all", "ack_policy": "all", "headers_only": true, "filter_subject": "tools.events.nobody"}})
	for _, subj := range []string{
		"$JS.API.CONSUMER.CREATE.TOOLS_EVENTS.views.tools.events.nobody",
		"$JS.API.CONSUMER.CREATE.TOOLS_EVENTS.views",
		"$JS.API.CONSUMER.CREATE.TOOLS_EVENTS",
		"$JS.API.CONSUMER.DURABLE.CREATE.TOOLS_EVENTS.views",
		"$JS.API.CONSUMER.MSG.NEXT.TOOLS_EVENTS.views",
		"$JS.API.CONSUMER.DELETE.TOOLS_EVENTS.views",
		"$JS.API.CONSUMER.PAUSE.TOOLS_EVENTS.views",
	} {
		if text := auditor.deniedRequest(t, subj, hostile); !strings.Contains(text, "Permissions Violation") {
			t.Fatalf("auditor %s: %q", subj, text)
		}
	}
	auditor.deniedPublish(t, "$JS.ACK.TOOLS_EVENTS.views.1.1.1.1.1", nil)
	// The auditor still reads, by direct gets (it may create no
	// consumer at all, see TestAttackAuditorCannotCreateConsumers).
	msgs := permDirectRead(t, auditor.nc, "bystander")
	if len(msgs) != len(by.acked) {
		t.Fatalf("auditor read %d events of bystander, want %d", len(msgs), len(by.acked))
	}
	for i, m := range msgs {
		if m.Header.Get("Nats-Sequence") != fmt.Sprint(by.acked[i]) {
			t.Fatalf("auditor read seq %s, want %d", m.Header.Get("Nats-Sequence"), by.acked[i])
		}
	}
	// A durable under another name is refused too.
	other, _ := json.Marshal(map[string]any{"stream_name": "TOOLS_EVENTS", "config": map[string]any{
		"durable_name": "audit-copy", "deliver_policy": "all", "ack_policy": "none", "headers_only": true, "filter_subject": "tools.events.>"}})
	if text := auditor.deniedRequest(t, "$JS.API.CONSUMER.CREATE.TOOLS_EVENTS.audit-copy.tools.events.>", other); !strings.Contains(text, "Permissions Violation") {
		t.Fatalf("auditor's own durable: %q", text)
	}
	// The engine's consumer is as it made it: ready, and new events fold.
	if st, b := rtDo(t, "GET", p.HTTPURL+"/readyz", nil); st != 200 {
		t.Fatalf("readyz after the attack: %d %s", st, b)
	}
	by.check(t)
}

// rtReady polls /readyz until its status is want and the body contains
// mention, and returns the body.
func rtReady(t *testing.T, p *engineProc, want int, mention string) string {
	t.Helper()
	var body []byte
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		var st int
		st, body = rtDo(t, "GET", p.HTTPURL+"/readyz", nil)
		if st != want || !strings.Contains(string(body), mention) {
			return fmt.Errorf("readyz %d %s, want %d mentioning %q", st, body, want, mention)
		}
		return nil
	})
	return string(body)
}

// Items 2 and 4: whoever still can reconfigure the engine's consumer (an
// admin, or a server configured as the issue found it) makes the engine
// not ready, naming the change, and a headers-only delivery is never
// folded as an empty event: the feed restores its consumer and folds it.
func TestAttackConsumerReconfiguredHeadersOnly(t *testing.T) {
	p := startEngine(t, t.TempDir())
	by := newBystander(t, p, p.Client("web"))
	admin := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	c, err := js.Consumer(ctx, "TOOLS_EVENTS", "views")
	if err != nil {
		t.Fatal(err)
	}
	// The feed has acknowledged the bystander's events before the attack:
	// otherwise a paced feed fetches them headers-only, restores its
	// consumer at once (the repair this test checks below) and readiness
	// never sees the change.
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("feed: %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	cfg := c.CachedInfo().Config
	cfg.HeadersOnly = true
	if _, err := js.UpdateConsumer(ctx, "TOOLS_EVENTS", cfg); err != nil {
		t.Fatal(err)
	}
	rtReady(t, p, 503, "headers_only is true")
	p.waitLog(t, `"level":"error"`, "log integrity", "headers_only is true")
	// An event appended now reaches the feed headers-only: it must be
	// folded with its body, not skipped.
	res, err := p.Client("web").Append(ctx, "victim", nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Client("web").Intent(ctx, "victim", res.LastSeq)
	if err != nil || v.Skipped != 0 || len(v.Intent.Disabled) != 1 {
		t.Fatalf("event delivered headers-only: %+v %v, want it folded (disabled [grep], 0 skipped)", v, err)
	}
	rtReady(t, p, 200, `"ok":true`)
	by.check(t)
}

// Item 2: a consumer filter changed so that the views freeze makes the
// engine not ready (it said ok before); a restart restores it and folds
// what was appended meanwhile.
func TestAttackConsumerReconfiguredFilter(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	by := newBystander(t, p, p.Client("web"))
	admin := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	c, err := js.Consumer(ctx, "TOOLS_EVENTS", "views")
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	cfg.FilterSubject = "tools.events.nobody"
	if _, err := js.UpdateConsumer(ctx, "TOOLS_EVENTS", cfg); err != nil {
		t.Fatal(err)
	}
	rtReady(t, p, 503, "tools.events.nobody")
	res, err := p.Client("web").Append(ctx, "victim", nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(t)
	p = startEngine(t, dir)
	by.restarted(p)
	if v, err := p.Client("web").Intent(ctx, "victim", res.LastSeq); err != nil || len(v.Intent.Disabled) != 1 {
		t.Fatalf("event appended while the filter was changed: %+v %v", v, err)
	}
	by.check(t)
}

// rtReplyInjection sends, as channel user web, an API request whose
// reply subject is reply, and checks that nothing was published there.
func rtReplyInjection(t *testing.T, reply string) {
	p, pw := rtDeploy(t, "--registry-kv")
	by := newBystander(t, p, p.Client("web"))
	engine := natstest.Connect(t, p.NATSURL, nats.UserInfo("engine", pw["engine"].password))
	js, err := jetstream.New(engine)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	// What an injected reply would change: the log, the registry bucket
	// (written only by a push), the bystander's view (a msgpack view, or a
	// JSON reply if the engine published one there).
	state := func() string {
		t.Helper()
		s, err := js.Stream(ctx, "TOOLS_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("events last seq %d msgs %d", s.CachedInfo().State.LastSeq, s.CachedInfo().State.Msgs)
		r, err := js.Stream(ctx, "KV_TOOLS_REGISTRY")
		if err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintf("; registry bucket last seq %d", r.CachedInfo().State.LastSeq)
		kv, err := js.KeyValue(ctx, "TOOLS_VIEWS")
		if err != nil {
			t.Fatal(err)
		}
		var e jetstream.KeyValueEntry
		natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			e, err = kv.Get(ctx, "bystander")
			return err // the projection writes the view shortly after the fold
		})
		if len(e.Value()) > 0 && e.Value()[0] == '{' {
			out += "; bystander's view is JSON: " + string(e.Value())
		}
		return out
	}
	before := state()
	web := permConnect(t, p.NATSURL, "web", pw["web"])
	for _, op := range []string{"session.intent", "events.append", "sessions.list"} {
		body := []byte(`{"session":"bystander"}`)
		if op == "events.append" {
			body = []byte(`{"session":"victim","commands":[{"type":"ToolsToggled","enabled":false}]}`)
		}
		if err := web.nc.PublishRequest("tools.api.web."+op, reply, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := web.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := strings.Count(p.Stderr.String(), "reply subject is not an inbox"); n < 3 {
			return fmt.Errorf("%d refusals logged, want 3:\n%s", n, p.Stderr)
		}
		return nil
	})
	if after := state(); after != before {
		t.Fatalf("the engine published into the log or a bucket: before %s, after %s", before, after)
	}
	// And the API's own connection may not publish there at all.
	apiUser := permConnect(t, p.NATSURL, "engine-api", pw["engine-api"])
	apiUser.deniedPublish(t, reply, []byte(`{"stream":"TOOLS_EVENTS","seq":1}`))
	by.check(t)
	// The engine restarts with --registry-kv.
	p.Stop(t)
	conf, _ := filepath.Abs(permConfig)
	by.restarted(startEngine(t, p.DataDir, append(rtDeployArgs(conf, pw), "--registry-kv")...))
	by.check(t)
}

// Item 3: the reply to a channel user's request went into the event log.
func TestAttackReplyToEventSubject(t *testing.T) { rtReplyInjection(t, "tools.events.bystander") }

// Item 3: ... into the views bucket.
func TestAttackReplyToViewsKV(t *testing.T) { rtReplyInjection(t, "$KV.TOOLS_VIEWS.bystander") }

// Item 3: ... into the registry bucket (an engine with --registry-kv then
// could not restart).
func TestAttackReplyToRegistryKV(t *testing.T) { rtReplyInjection(t, "$KV.TOOLS_REGISTRY.current") }

// Item 3: micro answers $SRV.PING|INFO|STATS itself, to any reply
// subject; no user but engine and admin may publish there.
func TestAttackServiceDiscoveryReply(t *testing.T) {
	p, pw := rtDeploy(t)
	by := newBystander(t, p, p.Client("web"))
	for _, u := range []string{"web", "slack", "tui", "backend", "auditor"} {
		c := permConnect(t, p.NATSURL, u, pw[u])
		for _, subj := range []string{"$SRV.INFO", "$SRV.PING.tool-engine", "$SRV.STATS"} {
			from := c.mark()
			if err := c.nc.PublishRequest(subj, "tools.events.bystander", nil); err != nil {
				t.Fatal(err)
			}
			c.violation(t, from, "Publish", subj)
		}
	}
	by.check(t)
}

// Item 3: the backend's JetStream acknowledgement is sent by the server
// to whatever reply subject the backend chose, outside every user
// permission: with reply $KV.TOOLS_REGISTRY.current it overwrote the
// registry (an engine with --registry-kv could not restart). The deploy
// config puts the backend in its own account, which reaches the stream
// through service imports: the ack goes back into the backend's account,
// never into the engine's log or buckets.
func TestAttackBackendAckReplyToKV(t *testing.T) {
	p, pw := rtDeploy(t, "--registry-kv")
	by := newBystander(t, p, p.Client("web"))
	reg := rtGet(t, p.HTTPURL+"/v1/registry")
	engine := natstest.Connect(t, p.NATSURL, nats.UserInfo("engine", pw["engine"].password))
	ejs, err := jetstream.New(engine)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	lastSeq := func(stream string) uint64 {
		t.Helper()
		s, err := ejs.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.LastSeq
	}
	events0, registry0 := lastSeq("TOOLS_EVENTS"), lastSeq("KV_TOOLS_REGISTRY")
	backend := permConnect(t, p.NATSURL, "backend", pw["backend"])
	replies := []string{"$KV.TOOLS_VIEWS.bystander", "$KV.TOOLS_REGISTRY.current", "tools.events.bystander"}
	for i, reply := range replies {
		m := nats.NewMsg(fmt.Sprintf("tools.events.bk%d", i))
		m.Data = e2eWireBody(t, events.NewID(), fmt.Sprintf("bk%d", i), "backend", "svc", "ToolsToggled", map[string]any{"enabled": true})
		m.Reply = reply
		if err := backend.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// One more, acknowledged: the stream handled the three before it.
	bjs, err := jetstream.New(backend.nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := bjs.Publish(ctx, "tools.events.bk9", e2eWireBody(t, events.NewID(), "bk9", "backend", "svc", "ToolsToggled", map[string]any{"enabled": true}))
	if err != nil {
		t.Fatalf("backend's acknowledged publish: %v", err)
	}
	if got := lastSeq("TOOLS_EVENTS"); got != events0+4 || ack.Sequence != got {
		t.Fatalf("events stream at %d after the backend's 4 events (ack %d), want %d: an ack was stored as an event", got, ack.Sequence, events0+4)
	}
	if got := lastSeq("KV_TOOLS_REGISTRY"); got != registry0 {
		t.Fatalf("registry bucket at seq %d, was %d: an ack overwrote the registry", got, registry0)
	}
	kv, err := ejs.KeyValue(ctx, "TOOLS_VIEWS")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "bystander"); err == nil && len(e.Value()) > 0 && e.Value()[0] == '{' {
		t.Fatalf("bystander's view is an ack: %s", e.Value())
	}
	by.check(t)
	p.Stop(t)
	conf, _ := filepath.Abs(permConfig)
	p = startEngine(t, p.DataDir, append(rtDeployArgs(conf, pw), "--registry-kv")...)
	by.restarted(p)
	if got := rtGet(t, p.HTTPURL+"/v1/registry"); !bytes.Equal(got, reg) {
		t.Fatalf("restarted engine serves another registry:\n%s\nwant\n%s", got, reg)
	}
	by.check(t)
}

// Item 3: whatever still writes an invalid value into the registry bucket
// (an admin's mistake, a server configured as the issue found it), an
// engine with --registry-kv restarts, serving the newest valid revision
// and saying so.
func TestAttackInvalidRegistryRevisionSurvivesRestart(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--registry-kv")
	by := newBystander(t, p, p.Client("web"))
	reg := rtGet(t, p.HTTPURL+"/v1/registry")
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	kv, err := js.KeyValue(ctx, "TOOLS_REGISTRY")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := kv.Put(ctx, "current", []byte(`{"stream":"TOOLS_EVENTS","seq":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	p.waitLog(t, "registry in KV is invalid: keeping the current one")
	by.check(t)
	p.Stop(t)
	p = startEngine(t, p.DataDir, "--registry-kv")
	by.restarted(p)
	p.waitLog(t, "serving the newest valid revision")
	if got := rtGet(t, p.HTTPURL+"/v1/registry"); !bytes.Equal(got, reg) {
		t.Fatalf("restarted engine serves another registry:\n%s\nwant\n%s", got, reg)
	}
	by.check(t)
}

// Item 4: on a default install any local anonymous client could delete
// the log (nats stream rm TOOLS_EVENTS) while /readyz stayed ok.
func TestAttackDeleteStreamDefaultInstall(t *testing.T) {
	p := startEngine(t, t.TempDir())
	by := newBystander(t, p, p.Client("web"))
	if nc, err := nats.Connect(p.NATSURL, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("anonymous connection to the embedded server accepted")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("anonymous connection: %v, want an authorization violation", err)
	}
	if info, err := os.Stat(filepath.Join(p.DataDir, "nats-users.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v, want mode 0600", info, err)
	}
	// The engine's own user may not delete, purge or update the stream.
	eng := &permConn{user: "engine"}
	eng.nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		eng.mu.Lock()
		eng.errs = append(eng.errs, err.Error())
		eng.mu.Unlock()
	}))
	for _, subj := range []string{"$JS.API.STREAM.DELETE.TOOLS_EVENTS", "$JS.API.STREAM.PURGE.TOOLS_EVENTS", "$JS.API.STREAM.UPDATE.TOOLS_EVENTS", "$JS.API.STREAM.MSG.DELETE.TOOLS_EVENTS"} {
		eng.deniedRequest(t, subj, []byte(`{}`))
	}
	by.check(t)
	// The admin can; the engine then says loudly it is not ready.
	admin := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(e2eCtx(t), "TOOLS_EVENTS"); err != nil {
		t.Fatal(err)
	}
	rtReady(t, p, 503, "no longer exists")
}

// Item 4: under the deploy config the engine user could update the
// stream: max_msgs_per_subject=1 dropped 63 of 85 events.
func TestAttackUpdateStreamMaxMsgsPerSubject(t *testing.T) {
	p, pw := rtDeploy(t)
	by := newBystander(t, p, p.Client("web"))
	engine := permConnect(t, p.NATSURL, "engine", pw["engine"])
	ejs, err := jetstream.New(engine.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eCtx(t)
	s, err := ejs.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.MaxMsgsPerSubject = 1
	if violation, err := engine.attempt(t, "$JS.API.STREAM.UPDATE.TOOLS_EVENTS", func(ctx context.Context) error {
		_, err := ejs.UpdateStream(ctx, sc)
		return err
	}); err == nil || violation == "" {
		t.Fatalf("engine user updated the stream: %v %q", err, violation)
	}
	by.check(t)
	// Only the admin may; the engine reports the drift and stream repair
	// (as admin) restores the configuration.
	admin := natstest.Connect(t, p.NATSURL, nats.UserInfo("admin", pw["admin"].password))
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	sc.MaxMsgsPerSubject = 1000
	if _, err := ajs.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	rtReady(t, p, 503, "max_msgs_per_subject is 1000")
	out, err := exec.Command(engineBin, "stream", "repair", "--nats", p.NATSURL, "--nats-user", "admin", "--nats-password", pw["admin"].password).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "repaired") {
		t.Fatalf("engine stream repair: %v\n%s", err, out)
	}
	rtReady(t, p, 200, `"ok":true`)
	by.check(t)
}

// rtCSRF sends a write as a browser page of another origin would, with
// and without fetch metadata, and checks it is refused.
func rtCSRF(t *testing.T, contentType, body string) {
	p := startEngine(t, t.TempDir())
	by := newBystander(t, p, p.Client("web"))
	url := p.HTTPURL + "/v1/sessions/bystander/events"
	for _, c := range []struct {
		headers []string
		status  int
		code    string
	}{
		{[]string{"Content-Type", contentType, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, 403, "forbidden"},
		{[]string{"Content-Type", contentType, "Origin", "http://evil.example"}, 403, "forbidden"},
		{[]string{"Content-Type", contentType}, 415, "unsupported_media_type"},
	} {
		status, b := rtDo(t, "POST", url, []byte(body), c.headers...)
		if code, msg := rtErr(b); status != c.status || code != c.code || msg == "" {
			t.Fatalf("%v: %d %s, want %d %s", c.headers, status, b, c.status, c.code)
		}
	}
	by.check(t)
}

// Item 5: a page on another origin wrote events with a no-cors fetch
// (its body is text/plain).
func TestAttackCrossSiteNoCorsFetch(t *testing.T) {
	rtCSRF(t, "text/plain;charset=UTF-8", `{"commands":[{"type":"ToolsToggled","enabled":false}]}`)
}

// Item 5: ... and with a plain HTML form.
func TestAttackCrossSiteFormPost(t *testing.T) {
	rtCSRF(t, "application/x-www-form-urlencoded", `{"commands":[{"type":"ToolsToggled","enabled":false}],"x":"="}`)
}

// Item 5: the same attacks from a real browser (Debian's chromium): a page
// served on another origin posts with a no-cors fetch and a text/plain
// form; the engine records nothing.
func TestAttackCrossSiteFromBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is needed (.ci/run installs it): %v", chromiumPath, err)
	}
	p := startEngine(t, t.TempDir())
	by := newBystander(t, p, p.Client("web"))
	var hits atomic.Int32
	target := p.HTTPURL
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body>
<iframe name="sink" id="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="%[1]s/v1/sessions/csrf-form/events">
<input name='{"commands":[{"type":"ToolsToggled","enabled":false}],"x":"' value='"}'></form>
<script>
fetch("%[1]s/v1/sessions/csrf-fetch/events", {method: "POST", mode: "no-cors",
  body: JSON.stringify({commands: [{type: "ToolsToggled", enabled: false}]})})
  .then(() => { document.body.dataset.fetch = "sent"; }, (e) => { document.body.dataset.fetch = "error " + e; });
document.getElementById("sink").addEventListener("load", () => { document.body.dataset.form = "sent"; });
document.getElementById("f").submit();
</script></body>`, target)
	}))
	defer evil.Close()
	// localhost vs 127.0.0.1: another site, as an attacker's page is.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	ctx, _ := startBrowser(t)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(evilURL)); err != nil {
		t.Fatalf("attacker page: %v", err)
	}
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](`!!(document.body.dataset.fetch && document.body.dataset.form)`,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("attacker page did not finish: %v", err)
	}
	fetched, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.dataset.fetch`))
	if err != nil {
		t.Fatal(err)
	}
	formed, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.dataset.form`))
	if err != nil {
		t.Fatal(err)
	}
	if fetched != "sent" || formed != "sent" || hits.Load() == 0 {
		t.Fatalf("the attacker page did not send: fetch %q form %q", fetched, formed)
	}
	for _, s := range []string{"csrf-fetch", "csrf-form"} {
		v, err := p.Client("web").Intent(e2eCtx(t), s, 0)
		if err != nil || v.Events != 0 {
			t.Fatalf("session %s written by a cross-site page: %+v %v", s, v, err)
		}
	}
	by.check(t)
}

// Item 5: DNS rebinding: a page whose name now resolves to the engine's
// address reads and writes as same-origin, but sends its own Host.
func TestAttackDNSRebindingHost(t *testing.T) {
	p := startEngine(t, t.TempDir())
	by := newBystander(t, p, p.Client("web"))
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions/bystander", ""},
		{"GET", "/metrics", ""},
		{"GET", "/inspector/", ""},
		{"POST", "/v1/sessions/bystander/events", `{"commands":[{"type":"ToolsToggled","enabled":false}]}`},
	} {
		status, b := rtDo(t, r.method, p.HTTPURL+r.path, []byte(r.body), "Host", "rebind.evil.example:7420", "Content-Type", "application/json")
		if code, msg := rtErr(b); status != 403 || code != "forbidden" || !strings.Contains(msg, "rebind.evil.example") {
			t.Fatalf("%s %s with a foreign Host: %d %s", r.method, r.path, status, b)
		}
	}
	by.check(t)
}

// Item 6: --http 0.0.0.0:P started without authentication or warning.
func TestAttackHTTPExposedWithoutAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, engineBin, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--http-tokens") || !strings.Contains(string(out), "not a loopback address") {
		t.Fatalf("serve --http 0.0.0.0:0 without tokens: %v\n%s\nwant a refusal naming --http-tokens", err, out)
	}
}

// Item 6: Engine-Channel was trusted; with a tokens file the channel is
// the token's, verified on HTTP as on NATS.
func TestAttackEngineChannelSpoofWithTokens(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"web-secret-token-0001","channel":"web"},{"token":"audit-secret-token-01","channel":"audit","read_only":true}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startEngine(t, t.TempDir(), "--http-tokens", tokens, "--http", "0.0.0.0:0")
	_, port, err := net.SplitHostPort(strings.TrimPrefix(p.HTTPURL, "http://")) // listening on all interfaces ([::]:port)
	if err != nil {
		t.Fatal(err)
	}
	p.HTTPURL = "http://127.0.0.1:" + port
	web := newEngineClient(p.HTTPURL, client.WithHTTPClient(&http.Client{Transport: rtBearer("web-secret-token-0001")}))
	by := newBystander(t, p, web, "Authorization", "Bearer web-secret-token-0001")
	url := p.HTTPURL + "/v1/sessions/bystander/events"
	body := []byte(`{"commands":[{"type":"ToolsToggled","enabled":false}]}`)
	for _, c := range []struct {
		headers []string
		status  int
		code    string
	}{
		{[]string{HeaderChannelForTest, "slack"}, 401, "unauthorized"},
		{[]string{"Authorization", "Bearer guessed-token-000000"}, 401, "unauthorized"},
		{[]string{"Authorization", "Bearer web-secret-token-0001", HeaderChannelForTest, "slack"}, 403, "forbidden"},
		{[]string{"Authorization", "Bearer audit-secret-token-01"}, 403, "forbidden"},
	} {
		status, b := rtDo(t, "POST", url, body, append(c.headers, "Content-Type", "application/json")...)
		if code, msg := rtErr(b); status != c.status || code != c.code || msg == "" {
			t.Fatalf("%v: %d %s, want %d %s", c.headers, status, b, c.status, c.code)
		}
	}
	// The read-only token reads.
	rtGet(t, p.HTTPURL+"/v1/sessions/bystander/history", "Authorization", "Bearer audit-secret-token-01")
	by.check(t)
	var h wire.HistoryOf[*service.Command]
	if err := json.Unmarshal(rtGet(t, p.HTTPURL+"/v1/sessions/after1/history", "Authorization", "Bearer audit-secret-token-01"), &h); err != nil || len(h.Entries) != 1 || h.Entries[0].Channel != "web" {
		t.Fatalf("event written with the web token: %+v %v, want channel web", h.Entries, err)
	}
}

// HeaderChannelForTest is api.HeaderChannel.
const HeaderChannelForTest = "Engine-Channel"

// rtBearer adds a bearer token to every request.
type rtBearer string

func (b rtBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	r.Header.Del(HeaderChannelForTest)
	return http.DefaultTransport.RoundTrip(r)
}

// Item 7: six web requests with an unreachable min_seq delayed a slack
// read to 30 s (one request at a time per endpoint); a flood gets busy
// replies while other channels are served.
func TestAttackStarvationMinSeq(t *testing.T) {
	p, pw := rtDeploy(t)
	by := newBystander(t, p, p.Client("web"))
	web := permConnect(t, p.NATSURL, "web", pw["web"])
	slack := permConnect(t, p.NATSURL, "slack", pw["slack"])
	var wg sync.WaitGroup
	var busy atomic.Int32
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := web.nc.Request("tools.api.web.session.intent", []byte(`{"session":"bystander","min_seq":999999999}`), 30*time.Second)
			if err == nil && m.Header.Get("Engine-Error-Code") == "busy" {
				busy.Add(1)
			}
		}()
	}
	// Wait until the flood is in: the engine answers some with busy.
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if busy.Load() == 0 {
			return fmt.Errorf("no busy reply yet")
		}
		return nil
	})
	start := time.Now()
	v, err := client.NewNATS(slack.nc, client.WithChannel("slack")).Intent(e2eCtx(t), client.IntentRequest{Session: "bystander", MinSeq: by.acked[len(by.acked)-1]})
	if err != nil || v.Seq != by.acked[len(by.acked)-1] {
		t.Fatalf("slack read during web's flood: %+v %v", v, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("slack read took %s during web's flood of min_seq waits", d)
	}
	wg.Wait()
	if busy.Load() < 64-32 {
		t.Fatalf("%d of 64 flooding requests got busy, want at least 32 (32 in flight per channel)", busy.Load())
	}
	by.check(t)
}

// Item 7: slow HTTP bodies were never cut off: 500 connections held open
// (and with a low fd limit they stopped new NATS clients).
func TestAttackSlowHTTPBodies(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--http-max-conns", "16", "--http-read-timeout", "2s")
	by := newBystander(t, p, p.Client("web"))
	addr := strings.TrimPrefix(p.HTTPURL, "http://")
	var conns []net.Conn
	for range 48 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/sessions/slow/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
		conns = append(conns, c)
	}
	// New NATS clients still connect.
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every slow connection is cut off within the read timeout after it
	// was accepted (at most 16 at a time), so all are gone after about
	// 48/16 rounds of 2 s.
	deadline := time.Now().Add(30 * time.Second)
	for i, c := range conns {
		_ = c.SetReadDeadline(deadline)
		if _, err := io.Copy(io.Discard, bufio.NewReader(c)); err != nil {
			t.Fatalf("slow connection %d still open after %s: %v", i, 30*time.Second, err)
		}
	}
	by.check(t)
}
