package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
)

// The red-team pass (tests/redteam_lifecycle_test.go holds the
// attacks that held) found these; each test asserts the fixed behaviour.

// A compaction's snapshot stores its actor sealed, as any
// event does, and a sealed-looking actor is refused.
func TestRedteamLifecycleFixedCompactSealsActor(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, log := rtlEngine(t, url, "rtl-a")
	e.SetActorSealer(rtlSealer(ctx, t, log, rtlKey(1), 0))
	rtlSession(ctx, t, e, "rtl-cseal", false)
	if _, err := e.Compact(ctx, "rtl-cseal", service.Origin{Channel: "web", Actor: "alice@example.com"}, ""); err != nil {
		t.Fatal(err)
	}
	if a := rtlLastActor(t, natstest.Connect(t, url), "rtl-cseal"); !strings.HasPrefix(a, actor.EncryptPrefix) {
		t.Errorf("the snapshot stores actor %q in encrypt mode, want it sealed", a)
	}
	rtlSession(ctx, t, e, "rtl-cseal2", false)
	if _, err := e.Compact(ctx, "rtl-cseal2", service.Origin{Channel: "web", Actor: "e1:0123456789abcdef0123456789abcdef:AAAA"}, ""); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("compact with a sealed-looking actor: %v, want ErrInvalid", err)
	}
}

// A forged snapshot claiming more turns than the events it
// replaces could begin is refused by the fold, so the session can begin
// turns after it.
func TestRedteamLifecycleFixedSnapshotTurnMax(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, _ := rtlEngine(t, url, "rtl-a")
	nc := natstest.Connect(t, url)
	st := rtlSession(ctx, t, e, "rtl-tmax", false)
	v := rtlSnapshot(st)
	v.Turn = ^uint64(0)
	seq := rtlPublish(ctx, t, nc, events.New("rtl-tmax", "web", "mallory", v), st.LastSeq)
	got, err := e.Session(ctx, "rtl-tmax", seq)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rejected != st.Rejected+1 {
		t.Errorf("a snapshot claiming turn 2^64-1 after turn %d was applied: turn now %d", st.Turn, got.Turn)
	}
	if _, err := e.BeginTurn(ctx, "rtl-tmax", rtlWeb, service.ResolveRequest{}); err != nil {
		t.Errorf("begin turn after the forged snapshot: %v", err)
	}
}

// A compaction does not purge the events below a snapshot
// a direct publisher wrote whose state is not what those events fold to:
// it refuses (409 conflict, ErrSnapshotMismatch) and the log keeps them.
func TestRedteamLifecycleFixedForgedSnapshotNotPurged(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, _ := rtlEngine(t, url, "rtl-a")
	nc := natstest.Connect(t, url)
	const session = "rtl-launder"
	st := rtlSession(ctx, t, e, session, false) // disabled [bash grep]
	before := rawSubject(t, nc, "tools.events."+session)
	v := rtlSnapshot(st)
	v.Count = uint64(len(before))
	v.Intent.Disabled = nil // a state the replaced events do not fold to
	rtlPublish(ctx, t, nc, events.New(session, "web", "engine:retention", v), st.LastSeq)
	res, err := e.Compact(ctx, session, rtlWeb, "")
	after := rawSubject(t, nc, "tools.events."+session)
	if !errors.Is(err, service.ErrSnapshotMismatch) || service.KindOf(err) != service.KindConflict {
		t.Errorf("compact over a forged snapshot: %+v %v, want ErrSnapshotMismatch (a conflict)", res, err)
	}
	if len(after) != len(before)+1 {
		t.Errorf("the engine purged %d events below a snapshot a direct publisher wrote, whose state (disabled %v) is not what they fold to (%v): %+v %v",
			len(before)+1-len(after), v.Intent.Disabled, st.Intent.Disabled, res, err)
	}
}

// The built binary compacting an idle session (retention
// compact) is killed with SIGKILL the moment its audit record of the
// compaction appears, that is after the snapshot's append and before the
// purge. Restarted without retention it serves the session's state from
// the history and the snapshot; restarted with retention its next pass
// finishes the purge (a raw read finds the snapshot alone) with the same
// state; and an engine rebuild afterwards folds to it too.
func TestRedteamLifecycleFixedRetentionFinishesPurgeBinary(t *testing.T) {
	dir := t.TempDir()
	retain := []string{"--retain-idle", "90d", "--retain-action", "compact", "--retain-tick", "200ms"}
	p := startEngine(t, dir, retain...)
	ctx := rtlCtx(t)
	watch := natstest.Connect(t, p.NATSURL, p.adminAuth(t), nats.NoReconnect())
	killed := make(chan struct{})
	if _, err := watch.Subscribe("tools.audit.compact.dormant", func(*nats.Msg) {
		p.Kill()
		close(killed)
	}); err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t), nats.NoReconnect())
	publishAgedLog(t, nc, "dormant", time.Now().Add(-200*24*time.Hour),
		events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"}, events.WebSearchSet{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "grep"})
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("no compaction audit record")
	}
	check := func(p *engineProc, when string) {
		t.Helper()
		v, err := p.GoClient("web").Intent(ctx, client.IntentRequest{Session: "dormant"})
		if err != nil || strings.Join(v.Intent.Disabled, ",") != "bash,grep" || v.Intent.WebSearch == nil || !*v.Intent.WebSearch || v.Rejected != 0 {
			t.Errorf("%s: dormant %+v %v, want disabled bash,grep, web_search on, nothing rejected", when, v, err)
		}
	}
	p = startEngine(t, dir)
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	n := len(rawSubject(t, nc, "tools.events.dormant"))
	t.Logf("after the kill the subject holds %d messages", n)
	if n != 5 && n != 1 {
		// 5: killed before the purge (the usual case); 1: the purge
		// request left before the SIGKILL landed.
		t.Errorf("killed after the audit record: the subject holds %d messages, want the 4 events and the snapshot (or the snapshot alone)", n)
	}
	check(p, "after the kill")
	p.Stop(t)
	p = startEngine(t, dir, retain...)
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if n := len(rawSubject(t, nc, "tools.events.dormant")); n != 1 {
			return fmt.Errorf("%d messages, want the snapshot alone", n)
		}
		return nil
	})
	check(p, "after the purge finished")
	p.Stop(t)
	if out, _, err := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("engine rebuild: %v\n%s", err, out)
	}
	p = startEngine(t, dir)
	check(p, "after a rebuild")
}

// A key file other than the one the key bucket's keys were
// made with is detected (the key check), and serve in encrypt mode
// refuses to start with it, naming the flag; the right file starts.
func TestRedteamLifecycleFixedWrongKeyFile(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	_, log := rtlEngine(t, url, "rtl-a")
	if err := rtlSealer(ctx, t, log, rtlKey(1), 0).Check(ctx); err != nil {
		t.Fatalf("first check (creates the check key): %v", err)
	}
	if err := rtlSealer(ctx, t, log, rtlKey(1), 0).Check(ctx); err != nil {
		t.Fatalf("the same key file: %v", err)
	}
	if err := rtlSealer(ctx, t, log, rtlKey(100), 0).Check(ctx); !errors.Is(err, actor.ErrWrongKey) {
		t.Fatalf("another key file: %v, want ErrWrongKey", err)
	}

	dir := t.TempDir()
	keys := t.TempDir()
	right, wrong := filepath.Join(keys, "right.key"), filepath.Join(keys, "wrong.key")
	if err := os.WriteFile(right, []byte(strings.Repeat("a1", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, []byte(strings.Repeat("b2", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startEngine(t, dir, "--actor-mode", "encrypt", "--actor-key-file", right)
	if _, err := p.GoClient("web").Append(ctx, client.AppendRequest{Session: "wk", Commands: []client.Command{client.Enable()}}); err != nil {
		t.Fatal(err)
	}
	p.Stop(t)
	out, _, err := runEngineWithin(t, 60*time.Second, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--actor-mode", "encrypt", "--actor-key-file", wrong)
	if err == nil || !strings.Contains(out, "--actor-key-file") || !strings.Contains(out, "made with another key file") {
		t.Fatalf("serve with another key file: %v\n%s", err, tail(out))
	}
	p = startEngine(t, dir, "--actor-mode", "encrypt", "--actor-key-file", right)
	h, err := p.GoClient("web").History(ctx, client.HistoryRequest{Session: "wk"})
	if err != nil || len(h.Entries) != 1 || strings.HasPrefix(h.Entries[0].Actor, actor.EncryptPrefix) {
		t.Fatalf("history with the right key file: %+v %v, want the actor revealed", h.Entries, err)
	}
}
