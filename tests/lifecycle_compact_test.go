package tests

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// publishAgedLog publishes ps on a new session as one backend writing the
// log, each event with time_ms at and the CAS header on the previous one.
func publishAgedLog(t *testing.T, nc *nats.Conn, session string, at time.Time, ps ...events.Payload) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last uint64
	for _, p := range ps {
		env := events.New(session, "web", "alice", p)
		env.TimeMs = at.UnixMilli()
		body, err := events.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("tools.events." + session)
		m.Data = body
		m.Header.Set("Nats-Msg-Id", env.ID)
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(last, 10))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("publish %s: %v", session, err)
		}
		last = ack.Sequence
	}
}

// Engine serve --retain-action compact (the built binary) rolls an
// idle session's events up into one snapshot event: a raw JetStream read
// of its subject finds that one message, written by engine:retention; the
// session keeps its intent and stays writable (the write lands after the
// snapshot); a bystander is byte for byte unchanged; the audit stream
// records the compaction; and the engine stays ready and restarts clean:
// the store check and the acknowledged watermark do not take the purge
// for data loss, after a stop, a crash and an engine rebuild.
func TestLifecycleRetentionCompactBinary(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir, "--retain-idle", "90d", "--retain-action", "compact", "--retain-tick", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	c := p.GoClient("web")
	if _, err := c.Append(ctx, client.AppendRequest{Session: "bystander", Commands: []client.Command{client.Enable()}}); err != nil {
		t.Fatal(err)
	}
	bystander := rawSubject(t, nc, "tools.events.bystander")
	publishAgedLog(t, nc, "dormant", time.Now().Add(-200*24*time.Hour),
		events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"}, events.WebSearchSet{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "grep"})
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if n := len(rawSubject(t, nc, "tools.events.dormant")); n != 1 {
			return errors.New("not compacted yet: " + strconv.Itoa(n) + " messages")
		}
		return nil
	})
	env := lastRaw(t, nc, "dormant")
	snap, ok := env.Payload.(events.SessionCompacted)
	if !ok || env.Actor != "engine:retention" || snap.Count != 4 || !strings.HasPrefix(snap.Reason, "retention: idle since ") {
		t.Fatalf("dormant holds %s by %s: %+v", env.Type, env.Actor, env.Payload)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := js.Stream(ctx, "TOOLS_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := audit.GetLastMsgForSubject(ctx, "tools.audit.compact.dormant")
	if err != nil || !strings.Contains(string(rec.Data), `"kind":"compact"`) || !strings.Contains(string(rec.Data), `"purged":4`) || strings.Contains(string(rec.Data), "alice") {
		t.Fatalf("audit record of the compaction: %v %s", err, rec.Data)
	}
	// The tick's count reaches the metrics.
	if m := waitMetric(t, p, `engine_retention_deleted_total{action="compact"}`, 1); m[`engine_retention_deleted_total{action="delete"}`] != 0 {
		t.Errorf("compaction counted as a delete: %v", m)
	}
	check := func(when string, wantDisabled []string) {
		t.Helper()
		v, err := c.Intent(ctx, client.IntentRequest{Session: "dormant"})
		if err != nil || !slices.Equal(v.Intent.Disabled, wantDisabled) || v.Intent.WebSearch == nil || !*v.Intent.WebSearch {
			t.Errorf("%s: intent of the compacted session %+v %v; want disabled %v, web_search on", when, v.Intent, err, wantDisabled)
		}
		if got := rawSubject(t, nc, "tools.events.bystander"); strings.Join(got, ",") != strings.Join(bystander, ",") {
			t.Errorf("%s: bystander changed", when)
		}
	}
	check("after compaction", []string{"bash", "grep"})
	if _, err := c.Append(ctx, client.AppendRequest{Session: "dormant", Commands: []client.Command{client.DisableTool("read_file")}}); err != nil {
		t.Fatalf("write after compaction: %v", err)
	}
	if n := len(rawSubject(t, nc, "tools.events.dormant")); n != 2 {
		t.Fatalf("after a write the compacted session holds %d messages, want the snapshot and the write", n)
	}
	want := []string{"bash", "grep", "read_file"}
	check("after a write", want)
	// The watermark records every second: the purge is not a loss.
	time.Sleep(2500 * time.Millisecond)
	resp, err := http.Get(p.HTTPURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz %d after the compaction\n%s", resp.StatusCode, p.Stderr)
	}
	p.Stop(t)
	p = startEngine(t, dir)
	c, nc = p.GoClient("web"), natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after a restart", want)
	p.Kill()
	p = startEngine(t, dir)
	c, nc = p.GoClient("web"), natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after a crash", want)
	p.Stop(t)
	if out, _, err := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("engine rebuild after a compaction: %v\n%s", err, out)
	}
	p = startEngine(t, dir)
	c, nc = p.GoClient("web"), natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after engine rebuild", want)
	p.Stop(t)
}

// Engine compact (the built binary, over HTTP as the erase channel)
// and the NATS operation compact a session: its subject holds one
// message, history starts with the compaction entry naming the replaced
// range, a point before it answers that it was compacted, and the intent
// is unchanged; another channel is refused (403 forbidden over HTTP and
// NATS) before anything is written; a compaction during an open turn is a
// conflict; compacting again says it was compact already.
func TestLifecycleCompactCLIBinary(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := p.GoClient("web")
	for _, cmd := range []client.Command{client.Enable(), client.DisableTool("bash"), client.DisableTool("grep")} {
		if _, err := c.Append(ctx, client.AppendRequest{Session: "long", Commands: []client.Command{cmd}}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Intent(ctx, client.IntentRequest{Session: "long"})
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	if _, err := c.SessionCompact(ctx, client.CompactRequest{Session: "long"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("compact from channel web over HTTP: %v, want forbidden", err)
	}
	web := client.NewNATS(nc, client.WithChannel("web"))
	if _, err := web.SessionCompact(ctx, client.CompactRequest{Session: "long"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("compact from channel web over NATS: %v, want forbidden", err)
	}
	if n := len(rawSubject(t, nc, "tools.events.long")); n != 3 {
		t.Fatalf("a refused compaction changed the log: %d messages, want 3", n)
	}
	out, err := p.runCLI(t, "compact", "long", "--reason", "archive")
	if err != nil || !strings.Contains(out, "compacted") || !strings.Contains(out, "3 events, seq 1..3") {
		t.Fatalf("engine compact: %v\n%s", err, out)
	}
	if n := len(rawSubject(t, nc, "tools.events.long")); n != 1 {
		t.Fatalf("after engine compact the subject holds %d messages, want 1", n)
	}
	after, err := c.Intent(ctx, client.IntentRequest{Session: "long"})
	if err != nil || !slices.Equal(after.Intent.Disabled, before.Intent.Disabled) || after.Intent.Enabled == nil || !*after.Intent.Enabled {
		t.Fatalf("intent after compaction %+v %v, want %+v", after.Intent, err, before.Intent)
	}
	h, err := c.History(ctx, client.HistoryRequest{Session: "long"})
	if err != nil || len(h.Entries) != 1 || h.Entries[0].Compacted == nil || h.Entries[0].Compacted.Count != 3 || h.Entries[0].Compacted.Reason != "archive" {
		t.Fatalf("history after compaction: %+v %v, want one entry naming 3 replaced events", h.Entries, err)
	}
	if _, err := c.History(ctx, client.HistoryRequest{Session: "long", Until: client.UntilSeq(2)}); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("history until seq 2 (compacted): %v, want an error saying it was compacted", err)
	}
	ops := client.NewNATS(nc, client.WithChannel("ops"))
	again, err := ops.SessionCompact(ctx, client.CompactRequest{Session: "long"})
	if err != nil || !again.Already || again.Purged != 0 {
		t.Fatalf("compact again over NATS: %+v %v, want already", again, err)
	}
	if _, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: "long"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.SessionCompact(ctx, client.CompactRequest{Session: "long"}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("compact during an open turn: %v, want a conflict", err)
	}
}
