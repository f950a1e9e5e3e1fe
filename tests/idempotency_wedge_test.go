package tests

import (
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/wire"
)

// An idempotency key already used on session A, sent on session
// B (by HTTP, or over NATS by another channel's user, as documented in
// deploy/nats-server.conf), is refused with 422 idempotency_key_in_use; the
// reply names the key and nothing of A; nothing is stored; B still reads
// and appends (before: 200 duplicate with A's sequence, then every read
// and append of B answered 503 "no replica has sequence N"); A is
// unchanged. The same key sent on A by another channel is refused too.
// Acknowledged and present events are counted with an independent
// direct-get reader of the stream.
func TestIdempotencyKeyOtherSession(t *testing.T) {
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	p := startEngine(t, t.TempDir(), rtDeployArgs(conf, pw)...)
	ctx := e2eCtx(t)
	web := client.NewNATS(permConnect(t, p.NATSURL, "web", pw["web"]).nc, client.WithChannel("web"), client.WithActor("w"))
	slack := client.NewNATS(permConnect(t, p.NATSURL, "slack", pw["slack"]).nc, client.WithChannel("slack"), client.WithActor("s"))
	httpWeb, httpSlack := p.GoClient("web"), p.GoClient("slack")
	acked := map[string]int{}

	// A: two keyed appends by web (one event; two events, the batch path).
	k1, k2 := events.NewID(), events.NewID()
	a1, err := web.Append(ctx, client.AppendRequest{Session: "idem-a", EventID: k1, Commands: []client.Command{client.DisableTool("bash")}})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := web.Append(ctx, client.AppendRequest{Session: "idem-a", EventID: k2, Commands: []client.Command{client.Enable(), client.DisableTool("grep")}})
	if err != nil {
		t.Fatal(err)
	}
	acked["idem-a"] += 3
	// B: slack's session.
	b1, err := slack.Append(ctx, client.AppendRequest{Session: "idem-b", Commands: []client.Command{client.DisableTool("bash")}})
	if err != nil {
		t.Fatal(err)
	}
	acked["idem-b"]++

	refused := func(via string, err error, key string, hidden string) {
		t.Helper()
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || ae.Code != wire.CodeKeyInUse {
			t.Fatalf("%s: key %s: %v, want 422 %s", via, key, err, wire.CodeKeyInUse)
		}
		if !errors.Is(err, client.ErrKeyInUse) || !strings.Contains(ae.Message, key) || hidden != "" && strings.Contains(ae.Message, hidden) {
			t.Fatalf("%s: message %q must name the key %s and not the session that holds it", via, ae.Message, key)
		}
	}
	// Within the log's dedupe window: the log alone would answer "duplicate".
	for _, key := range []string{k1, k2} {
		for via, c := range map[string]*client.Client{"slack over NATS": slack, "web over NATS": web, "slack over HTTP": httpSlack, "web over HTTP": httpWeb} {
			_, err := c.Append(ctx, client.AppendRequest{Session: "idem-b", EventID: key, Commands: []client.Command{client.DisableTool("read_file")}})
			refused(via+" on B", err, key, "idem-a")
		}
	}
	// The key's own session, another channel.
	_, err = slack.Append(ctx, client.AppendRequest{Session: "idem-a", EventID: k1, Commands: []client.Command{client.DisableTool("bash")}})
	refused("slack on A's session with web's key", err, k1, "")

	// B is not wedged: it reads at its last sequence and appends, over
	// both transports.
	if v, err := slack.Intent(ctx, client.IntentRequest{Session: "idem-b", MinSeq: b1.LastSeq}); err != nil || v.Seq != b1.LastSeq {
		t.Fatalf("B after the refusals: %+v %v, want its view at %d", v, err, b1.LastSeq)
	}
	b2, err := slack.Append(ctx, client.AppendRequest{Session: "idem-b", EventID: events.NewID(), Commands: []client.Command{client.DisableTool("grep")}})
	if err != nil || b2.Duplicate {
		t.Fatalf("B appends after the refusals: %+v %v", b2, err)
	}
	acked["idem-b"]++
	if v, err := httpSlack.Intent(ctx, client.IntentRequest{Session: "idem-b", MinSeq: b2.LastSeq}); err != nil || v.Seq != b2.LastSeq {
		t.Fatalf("B over HTTP: %+v %v, want its view at %d", v, err, b2.LastSeq)
	}
	// A is unchanged, and its keys still answer duplicate to web.
	if v, err := web.Intent(ctx, client.IntentRequest{Session: "idem-a", MinSeq: a2.LastSeq}); err != nil || v.Seq != a2.LastSeq {
		t.Fatalf("A: %+v %v, want its view at %d", v, err, a2.LastSeq)
	}
	// A retry sends the commands of the first call (other
	// commands are idempotency_key_mismatch).
	sent := map[string][]client.Command{k1: {client.DisableTool("bash")}, k2: {client.Enable(), client.DisableTool("grep")}}
	for key, want := range map[string]client.AppendReply{k1: a1, k2: a2} {
		got, err := httpWeb.Append(ctx, client.AppendRequest{Session: "idem-a", EventID: key, Commands: sent[key]})
		if err != nil || !got.Duplicate || got.FirstSeq != want.FirstSeq || got.LastSeq != want.LastSeq {
			t.Fatalf("retry of %s on A: %+v %v, want duplicate %d..%d", key, got, err, want.FirstSeq, want.LastSeq)
		}
	}

	// Acknowledged vs present, read by the auditor's direct gets.
	aIDs := append(append([]string{}, a1.EventIDs...), a2.EventIDs...)
	auditor := permConnect(t, p.NATSURL, "auditor", pw["auditor"])
	for session, n := range acked {
		msgs := permDirectRead(t, auditor.nc, session)
		if len(msgs) != n {
			t.Errorf("%s: %d acknowledged, %d present", session, n, len(msgs))
		}
		for _, m := range msgs {
			if id := m.Header.Get("Nats-Msg-Id"); session == "idem-b" && slices.Contains(aIDs, id) {
				t.Errorf("B holds event %s of A's keys", id)
			}
		}
	}
}
