package tests

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// liveNext pulls the next event of a Watch iterator (started by liveIter).
type liveItem struct {
	ev  client.LiveEvent
	err error
}

func liveIter(t *testing.T, seq func(func(client.LiveEvent, error) bool)) <-chan liveItem {
	ch := make(chan liveItem, 16)
	go func() {
		defer close(ch)
		seq(func(ev client.LiveEvent, err error) bool {
			ch <- liveItem{ev, err}
			return err == nil
		})
	}()
	return ch
}

func liveWant(t *testing.T, ch <-chan liveItem, what string, want uint64) client.LiveEvent {
	t.Helper()
	select {
	case it, ok := <-ch:
		if !ok || it.err != nil || it.ev.Seq != want {
			t.Fatalf("%s: %+v %v (open %v), want seq %d", what, it.ev, it.err, ok, want)
		}
		return it.ev
	case <-time.After(30 * time.Second): // hang guard
		t.Fatalf("%s: no event, want seq %d", what, want)
	}
	return client.LiveEvent{}
}

// openLive opens a raw SSE stream with a bearer token; it returns the
// status and, for 200, the open body.
func openLive(t *testing.T, ctx context.Context, url, token string) (int, io.ReadCloser) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	return resp.StatusCode, resp.Body
}

// Against the built binary with --http-tokens: a read-only token
// watches; resume after a sequence gets exactly the events after it; two
// sessions' streams don't mix; the all-sessions stream (over NATS) is in
// stream order; an event a plain JetStream publisher writes appears on
// the streams; the ninth stream of a channel is 429 busy; SIGTERM with
// streams open ends them and exits well within the shutdown grace period.
func TestLiveSubscriptionsBinary(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"web-live-token-0123456","channel":"web"},{"token":"audit-live-token-012345","channel":"audit","read_only":true}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startEngine(t, t.TempDir(), "--http-tokens", tokens)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	web := client.NewHTTP(p.HTTPURL, client.WithToken("web-live-token-0123456"))
	audit := client.NewHTTP(p.HTTPURL, client.WithToken("audit-live-token-012345"))
	var all, s1 []uint64
	for i, cmd := range []client.Command{client.Enable(), client.Enable(), client.DisableTool("bash"), client.DisableTool("grep"), client.Disable(), client.Disable()} {
		s := []string{"live-s1", "live-s2"}[i%2]
		r, err := web.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{cmd}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r.LastSeq)
		if s == "live-s1" {
			s1 = append(s1, r.LastSeq)
		}
	}
	seq1, err := audit.Watch(ctx, "live-s1", s1[0])
	if err != nil {
		t.Fatalf("read-only token watch: %v", err)
	}
	w1 := liveIter(t, seq1)
	for _, want := range s1[1:] {
		if ev := liveWant(t, w1, "s1 resumed", want); ev.Session != "live-s1" {
			t.Fatalf("s1 stream got %+v", ev)
		}
	}
	nc, err := nats.Connect(p.NATSURL, p.natsAuth(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	seqAll, err := client.NewNATS(nc, client.WithChannel("audit")).Watch(ctx, "", 0)
	if err != nil {
		t.Fatalf("NATS watch: %v", err)
	}
	wAll := liveIter(t, seqAll)
	for _, want := range all {
		liveWant(t, wAll, "all sessions in stream order", want)
	}
	// A plain JetStream publisher (docs/wire-format.md) writes to s1.
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	env := events.New("live-s1", "backend", "svc", events.ToolEnabled{Name: "bash"})
	body, err := events.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("tools.events.live-s1")
	msg.Data = body
	msg.Header.Set("Nats-Msg-Id", env.ID)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := web.Append(ctx, client.AppendRequest{Session: "live-s2", Commands: []client.Command{client.Enable()}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := liveWant(t, w1, "direct publisher's event on s1", ack.Sequence); ev.ID != env.ID || ev.Type != "ToolEnabled" || ev.Channel != "backend" {
		t.Fatalf("direct event as streamed: %+v", ev)
	}
	liveWant(t, wAll, "direct publisher's event on all", ack.Sequence)
	liveWant(t, wAll, "s2 after it on all", s2.LastSeq)
	select {
	case it := <-w1:
		t.Fatalf("s1's stream got %+v %v: s2's event must not reach it", it.ev, it.err)
	default:
	}
	// The cap: 8 streams per channel, both transports (w1 over HTTP and
	// the NATS watch on channel audit are two of audit's).
	url := p.HTTPURL + strings.Replace(wire.OpLive.Path, "{session}", "live-s2", 1)
	var open []io.ReadCloser
	for range 6 {
		code, b := openLive(t, ctx, url, "audit-live-token-012345")
		if code != http.StatusOK {
			t.Fatalf("stream %d of audit: %d, want 200", len(open)+3, code)
		}
		open = append(open, b)
	}
	if code, _ := openLive(t, ctx, url, "audit-live-token-012345"); code != http.StatusTooManyRequests {
		t.Fatalf("ninth stream of a channel: %d, want 429", code)
	}
	// SIGTERM with nine streams open (eight HTTP, one NATS).
	ended := make(chan error, 1)
	go func() {
		rd := bufio.NewReader(open[0])
		for {
			if _, err := rd.ReadString('\n'); err != nil {
				ended <- err
				return
			}
		}
	}()
	start := time.Now()
	p.Stop(t)
	// The bound is the engine's shutdown grace period (10 s):,
	// http.Server.Shutdown waited that long for the streams to go idle.
	if took := time.Since(start); took >= 10*time.Second {
		t.Fatalf("SIGTERM with live streams open took %s to exit, want well under the 10 s grace period", took)
	} else {
		t.Logf("SIGTERM with 9 live streams open: exited in %s", took)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "EOF") {
			t.Logf("stream ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an open stream did not end when the engine stopped")
	}
	for _, b := range open {
		b.Close()
	}
}

// Under deploy/nats-server.conf a channel user (web: publish
// tools.api.web.>, subscribe _INBOX_web.> only, no JetStream, no event
// subjects) follows a session live over NATS with no right beyond its
// API rights: the engine streams to the request's inbox.
func TestLiveNATSChannelUserDeploy(t *testing.T) {
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	p := startEngine(t, t.TempDir(), rtDeployArgs(conf, pw)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	web := permConnect(t, p.NATSURL, "web", pw["web"])
	c := client.NewNATS(web.nc, client.WithChannel("web"))
	first, err := c.Append(ctx, client.AppendRequest{Session: "perm-live", Commands: []client.Command{client.Enable()}})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := c.Watch(ctx, "perm-live", 0)
	if err != nil {
		t.Fatalf("web user's watch: %v", err)
	}
	w := liveIter(t, seq)
	liveWant(t, w, "stored event", first.LastSeq)
	next, err := c.Append(ctx, client.AppendRequest{Session: "perm-live", Commands: []client.Command{client.DisableTool("bash")}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := liveWant(t, w, "live event", next.LastSeq); ev.Channel != "web" || ev.Type != "ToolDisabled" {
		t.Fatalf("live event %+v", ev)
	}
	web.mu.Lock()
	errs := append([]string(nil), web.errs...)
	web.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("the web user's watch met server errors (a permission it lacks?): %q", errs)
	}
}
