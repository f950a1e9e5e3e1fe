package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// msgpackAsJSON decodes msgpack and re-encodes it as (key-sorted) JSON.
func msgpackAsJSON(t *testing.T, b []byte) string {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.UseLooseInterfaceDecoding(true)
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("reply is not msgpack: %v (%q)", err, b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func sortedJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("reply is not JSON: %v (%q)", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// Msgpack replies when asked, with the same content as JSON.
func TestMsgpackReply(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := ctxT(t)
	if _, err := e.httpClient().Append(ctx, "mp", nil, events.PresetChosen{Preset: "research"}); err != nil {
		t.Fatal(err)
	}
	req := `{"session":"mp","min_seq":1}`
	js := rawNATS(t, e.nc, "tools.api.web.session.resolve", req)
	mp := rawNATS(t, e.nc, "tools.api.web.session.resolve", req, "Accept", wire.MIMEMsgpack)
	if ct := mp.Header.Get("Content-Type"); ct != wire.MIMEMsgpack {
		t.Fatalf("Content-Type %q", ct)
	}
	if js.Header.Get("Content-Type") != MIMEJSON {
		t.Fatalf("JSON reply Content-Type %q", js.Header.Get("Content-Type"))
	}
	if a, b := sortedJSON(t, js.Data), msgpackAsJSON(t, mp.Data); a != b {
		t.Fatalf("msgpack and JSON differ:\njson    %s\nmsgpack %s", a, b)
	}
	// Over HTTP too, errors included.
	_, h, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/mp/resolve", "", "Accept", wire.MIMEMsgpack)
	if h.Get("Content-Type") != wire.MIMEMsgpack || !strings.Contains(msgpackAsJSON(t, body), `"source":"session-intent"`) {
		t.Fatalf("HTTP msgpack reply: %s", msgpackAsJSON(t, body))
	}
	status, _, body := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/a.b", "", "Accept", wire.MIMEMsgpack)
	if status != 400 || !strings.Contains(msgpackAsJSON(t, body), `"code":"invalid"`) {
		t.Fatalf("msgpack error reply %d: %s", status, msgpackAsJSON(t, body))
	}
	// A msgpack request body.
	cmd, _ := msgpack.Marshal(map[string]any{"session": "mp", "commands": []any{map[string]any{"type": "ToolDisabled", "name": "grep"}}})
	reply := rawNATS(t, e.nc, "tools.api.web.events.append", string(cmd), "Content-Type", wire.MIMEMsgpack, "Accept", wire.MIMEMsgpack)
	if reply.Header.Get(micro.ErrorCodeHeader) != "" || !strings.Contains(msgpackAsJSON(t, reply.Data), `"disabled":["grep"]`) {
		t.Fatalf("msgpack append: %v %s", reply.Header, msgpackAsJSON(t, reply.Data))
	}
}

// nats micro info sees the service and every endpoint.
func TestMicroInfo(t *testing.T) {
	e := newEnv(t, Config{})
	msg, err := e.nc.Request("$SRV.INFO."+ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != ServiceName || info.Version != Version {
		t.Fatalf("info %s %s", info.Name, info.Version)
	}
	got := map[string]micro.EndpointInfo{}
	for _, ep := range info.Endpoints {
		got[ep.Name] = ep
	}
	for _, op := range Operations() {
		ep, ok := got[op.Name]
		if !ok {
			t.Errorf("endpoint %s missing from $SRV.INFO", op.Name)
			continue
		}
		if want := "tools.api.*." + op.Subject; ep.Subject != want {
			t.Errorf("endpoint %s subject %q, want %q", op.Name, ep.Subject, want)
		}
		if ep.QueueGroup != ServiceName {
			t.Errorf("endpoint %s queue group %q", op.Name, ep.QueueGroup)
		}
		if !strings.HasSuffix(ep.Metadata["http"], " "+op.Path) {
			t.Errorf("endpoint %s http metadata %q", op.Name, ep.Metadata["http"])
		}
	}
	// The operations, the live ones and the endpoint answering
	// unknown ones.
	if len(info.Endpoints) != len(Operations())+len(liveOps)+1 {
		t.Errorf("%d endpoints, want %d", len(info.Endpoints), len(Operations())+len(liveOps)+1)
	}
	// PING and STATS answer too; errors are counted.
	rawNATS(t, e.nc, "tools.api.web.session.intent", `{"session":"a.b"}`)
	// The micro service counts a request after its handler has replied,
	// so the count may lag the reply a moment: ask until it shows.
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		msg, err := e.nc.Request("$SRV.STATS."+ServiceName, nil, 5*time.Second)
		if err != nil {
			return err
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			return err
		}
		for _, ep := range stats.Endpoints {
			if ep.Name == "intent" && (ep.NumRequests != 1 || ep.NumErrors != 1) {
				return fmt.Errorf("intent stats: %d requests %d errors, want 1 and 1", ep.NumRequests, ep.NumErrors)
			}
		}
		return nil
	})
}

// The channel comes from the subject token (NATS) or the header
// (HTTP), the actor from Engine-Actor or the body; an event without
// an actor records service.Anonymous, as a version-2 event names its actor.
func TestOriginRecorded(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := ctxT(t)
	on := func(c *Client, cmd events.Payload) {
		t.Helper()
		if _, err := c.Append(ctx, "origin", nil, cmd); err != nil {
			t.Fatal(err)
		}
	}
	on(e.natsClient(WithChannel("web"), WithActor("alice")), events.ToolsToggled{Enabled: ptr(true)})
	on(e.httpClient(WithChannel("tui"), WithActor("bob")), events.ToolDisabled{Name: "bash"})
	on(e.httpClient(), events.ToolDisabled{Name: "grep"})
	// Body actor as fallback, over NATS.
	msg := rawNATS(t, e.nc, "tools.api.slack.events.append", `{"session":"origin","actor":"carol","commands":[{"type":"PresetChosen","preset":"coding"}]}`)
	if msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("append: %s", msg.Data)
	}
	// The header wins over the body.
	msg = rawNATS(t, e.nc, "tools.api.slack.events.append", `{"session":"origin","actor":"mallory","commands":[{"type":"ToolEnabled","name":"bash"}]}`, wire.HeaderActor, "dave")
	if msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("append: %s", msg.Data)
	}
	h, err := e.httpClient().History(ctx, wire.HistoryRequest{Session: "origin"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range h.Entries {
		got = append(got, en.Type+"@"+en.Channel+"/"+en.Actor)
	}
	want := []string{"ToolsToggled@web/alice", "ToolDisabled@tui/bob", "ToolDisabled@http/" + service.Anonymous, "PresetChosen@slack/carol", "ToolEnabled@slack/dave"}
	if !slices.Equal(got, want) {
		t.Fatalf("origins %v, want %v", got, want)
	}
	// History payloads read back as commands.
	if p, ok := h.Entries[1].Payload.Payload.(events.ToolDisabled); !ok || p.Name != "bash" {
		t.Fatalf("payload %#v", h.Entries[1].Payload)
	}
}

// History --until by sequence and by time.
func TestHistoryUntilTime(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := ctxT(t)
	c := e.httpClient()
	if _, err := c.Append(ctx, "tt", nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	h, err := c.History(ctx, wire.HistoryRequest{Session: "tt"})
	if err != nil || len(h.Entries) != 1 {
		t.Fatalf("history: %v %d", err, len(h.Entries))
	}
	cut := h.Entries[0].Time
	w, err := c.Append(ctx, "tt", nil, events.PresetChosen{Preset: "research"})
	if err != nil {
		t.Fatal(err)
	}
	// The second event must be stored after the cut for the test to mean
	// anything (a precondition checked, not a sleep).
	if h, err := c.History(ctx, wire.HistoryRequest{Session: "tt", Until: wire.UntilSeq(w.LastSeq)}); err != nil || len(h.Entries) != 2 || !h.Entries[1].Time.After(cut) {
		t.Fatalf("precondition: the second event stored after %s: %v %+v", cut, err, h.Entries)
	}
	transports(t, e, func(t *testing.T, c *Client) {
		h, err := c.History(ctx, wire.HistoryRequest{Session: "tt", Until: wire.UntilTime(cut)})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Entries) != 1 || h.State.Intent.Preset != "" {
			t.Fatalf("until %s: %d entries, preset %q", cut, len(h.Entries), h.State.Intent.Preset)
		}
		full, err := c.History(ctx, wire.HistoryRequest{Session: "tt"})
		if err != nil || len(full.Entries) != 2 || full.Entries[1].Cause != "intent" || !slices.Contains(full.Entries[1].Lost, "bash") {
			t.Fatalf("full history: %v %+v", err, full.Entries)
		}
	})
	// A JSON number works as until over NATS.
	msg := rawNATS(t, e.nc, "tools.api.web.session.history", `{"session":"tt","until":`+jsonUint(h.Entries[0].Seq)+`}`)
	var hr wire.HistoryOf[*service.Command]
	if err := json.Unmarshal(msg.Data, &hr); err != nil || len(hr.Entries) != 1 {
		t.Fatalf("until as number: %v %s", err, msg.Data)
	}
}

func jsonUint(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// Per-channel NATS users (testdata/channels.conf): a channel's user can
// call the API on its own channel only, so the recorded channel is
// verified by the server.
func TestChannelPermissions(t *testing.T) {
	conf, err := filepath.Abs("testdata/channels.conf")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: t.TempDir(), ConfigFile: conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := newEnvOn(t, ctx, srv, srv.ClientURL(), Config{}, nats.UserInfo("engine", "engine-secret"))

	asyncErrs := make(chan error, 64)
	web, err := nats.Connect(srv.ClientURL(), nats.UserInfo("web", "web-secret"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case asyncErrs <- err:
			default: // the test has what it needs
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)

	own := NewNATSClient(web, WithChannel("web"), WithActor("alice"))
	if _, err := own.Append(ctxT(t), "perm", nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
		t.Fatalf("web user on its own channel: %v", err)
	}
	// Another channel's subject is refused by the server.
	other := NewNATSClient(web, WithChannel("tui"))
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()
	if _, err := other.Append(short, "perm", nil, events.ToolDisabled{Name: "bash"}); err == nil {
		t.Fatal("web user wrote on channel tui")
	}
	// Publishing straight to the event stream is refused too.
	if err := web.Publish("tools.events.perm", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = web.Flush()
	// The server reports both violations asynchronously: wait for them
	// (the error callback, not a fixed sleep).
	want := []string{"Permissions Violation for Publish to \"tools.api.tui.events.append\"", "Permissions Violation for Publish to \"tools.events.perm\""}
	var got strings.Builder
	deadline := time.After(10 * time.Second)
	for slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(got.String(), w) }) {
		select {
		case err := <-asyncErrs:
			got.WriteString(err.Error() + "\n")
		case <-deadline:
			t.Fatalf("async errors %q, want publish permission violations %q", got.String(), want)
		}
	}
	h, err := e.httpClient().History(ctxT(t), wire.HistoryRequest{Session: "perm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Entries) != 1 || h.Entries[0].Channel != "web" || h.Entries[0].Actor != "alice" {
		t.Fatalf("history %+v", h.Entries)
	}
	if st, _, _ := rawHTTP(t, "GET", e.httpURL+"/v1/sessions/perm", ""); st != http.StatusOK {
		t.Fatalf("HTTP read: %d", st)
	}
	if _, err := os.Stat(conf); err != nil {
		t.Fatal(err)
	}
}

func TestSubject(t *testing.T) {
	if s, err := Subject("", "web", "append"); err != nil || s != "tools.api.web.events.append" {
		t.Fatalf("Subject = %q, %v", s, err)
	}
	if _, err := Subject("", "web", "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := Subject("", "a.b", "append"); err == nil || !strings.Contains(err.Error(), `"a.b"`) {
		t.Fatalf("bad channel: %v", err)
	}
}
