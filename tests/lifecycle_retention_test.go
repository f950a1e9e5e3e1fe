package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// publishAged publishes, as a backend allowed to write the log, one event
// of session in the documented wire format (msgpack envelope, Nats-Msg-Id
// its id, the CAS header of a new session) whose time_ms is at: a session
// last written then.
func publishAged(t *testing.T, nc *nats.Conn, session string, at time.Time, p events.Payload) {
	t.Helper()
	publishAgedTo(t, nc, "tools.events."+session, session, at, p)
}

// publishAgedTo is publishAged to the session's subject subject (a
// partition's).
func publishAgedTo(t *testing.T, nc *nats.Conn, subject, session string, at time.Time, p events.Payload) {
	t.Helper()
	env := events.New(session, "web", "alice", p)
	env.TimeMs = at.UnixMilli()
	body, err := events.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set("Nats-Msg-Id", env.ID)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publish %s: %v", session, err)
	}
}

// lastRaw decodes the last event stored on session (a raw JetStream read).
func lastRaw(t *testing.T, nc *nats.Conn, session string) events.Envelope {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "tools.events."+session)
	if err != nil {
		t.Fatalf("last event of %s: %v", session, err)
	}
	env, err := events.Decode(m.Data)
	if err != nil {
		t.Fatalf("decode the last event of %s: %v", session, err)
	}
	return env
}

// waitMetric waits until /metrics shows name at want.
func waitMetric(t *testing.T, p *engineProc, name string, want float64) map[string]float64 {
	t.Helper()
	var got map[string]float64
	natstest.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		got = scrape(t, p.HTTPURL)
		if got[name] != want {
			return fmt.Errorf("%s = %v, want %v", name, got[name], want)
		}
		return nil
	})
	return got
}

// Engine serve --retain-idle 90d (the built binary) deletes the
// sessions whose last event is older than 90 days (events published in the
// wire format with an old time_ms), in ticks of at most --retain-batch
// sessions, as engine:retention on channel engine with the reason
// "retention: idle since <time>"; fresh sessions stay byte for byte; the
// counts are in /metrics and a tick that deleted logs them at info.
func TestLifecycleRetentionBinary(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--retain-idle", "90d", "--retain-tick", "200ms", "--retain-batch", "5", "--log-level", "info")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	old := time.Now().Add(-100 * 24 * time.Hour)
	const idle = 12
	for i := range idle {
		publishAged(t, nc, fmt.Sprintf("old%02d", i), old, events.ToolsToggled{Enabled: e2eBool(true)})
	}
	c := p.GoClient("web")
	fresh := map[string][]string{}
	for _, s := range []string{"fresh1", "fresh2"} {
		if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable(), client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
		fresh[s] = rawSubject(t, nc, "tools.events."+s)
	}
	m := waitMetric(t, p, `engine_retention_deleted_total{action="delete"}`, idle)
	// At most 5 sessions a tick: 12 deletes take at least 3 ticks.
	if m["engine_retention_ticks_total"] < 3 || m["engine_retention_examined_total"] < idle || m["engine_retention_last_tick_timestamp_seconds"] <= 0 {
		t.Errorf("metrics: %v ticks, %v examined, last tick %v; want at least 3 ticks of at most 5 for %d idle sessions",
			m["engine_retention_ticks_total"], m["engine_retention_examined_total"], m["engine_retention_last_tick_timestamp_seconds"], idle)
	}
	if _, ok := m["engine_retention_conflicts_total"]; !ok {
		t.Error("no engine_retention_conflicts_total in /metrics")
	}
	if _, ok := m["engine_retention_last_tick_seconds"]; !ok {
		t.Error("no engine_retention_last_tick_seconds in /metrics")
	}
	wantReason := "retention: idle since " + time.UnixMilli(old.UnixMilli()).UTC().Format(time.RFC3339)
	for i := range idle {
		s := fmt.Sprintf("old%02d", i)
		env := lastRaw(t, nc, s)
		d, ok := env.Payload.(events.SessionDeleted)
		if !ok || env.Channel != "engine" || env.Actor != "engine:retention" || d.Reason != wantReason {
			t.Errorf("%s ends with %s by %s/%s (%+v); want SessionDeleted by engine/engine:retention, %q", s, env.Type, env.Channel, env.Actor, env.Payload, wantReason)
		}
		if _, err := c.Intent(ctx, client.IntentRequest{Session: s}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("intent of %s: %v, want deleted", s, err)
		}
	}
	for s, was := range fresh {
		if got := rawSubject(t, nc, "tools.events."+s); strings.Join(got, ",") != strings.Join(was, ",") {
			t.Errorf("%s changed:\n%v\nwas\n%v", s, got, was)
		}
		if _, err := c.Intent(ctx, client.IntentRequest{Session: s}); err != nil {
			t.Errorf("intent of %s: %v", s, err)
		}
	}
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if !strings.Contains(p.Stderr.String(), `"message":"retention tick"`) {
			return errors.New("no retention tick logged at info")
		}
		return nil
	})
	var logged bool
	for _, line := range strings.Split(p.Stderr.String(), "\n") {
		if strings.Contains(line, `"message":"retention tick"`) && strings.Contains(line, `"level":"info"`) && !strings.Contains(line, `"deleted":0`) {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no info line of a tick that deleted:\n%s", p.Stderr)
	}
	p.Stop(t)
}

// --retain-action erase deletes and purges an idle session through
// the engine's privileged connection: a raw read finds none of its events,
// the audit record names it, a bystander is untouched, and the count is
// under action="erase".
func TestLifecycleRetentionEraseBinary(t *testing.T) {
	p := startEngine(t, t.TempDir(), "--retain-idle", "90d", "--retain-action", "erase", "--retain-tick", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	c := p.GoClient("web")
	if _, err := c.Append(ctx, client.AppendRequest{Session: "bystander", Commands: []client.Command{client.Enable()}}); err != nil {
		t.Fatal(err)
	}
	bystander := rawSubject(t, nc, "tools.events.bystander")
	publishAged(t, nc, "forgotten", time.Now().Add(-400*24*time.Hour), events.ToolsToggled{Enabled: e2eBool(true)})
	m := waitMetric(t, p, `engine_retention_deleted_total{action="erase"}`, 1)
	if m[`engine_retention_deleted_total{action="delete"}`] != 0 {
		t.Errorf("erase action counted deletes: %v", m)
	}
	if got := rawSubject(t, nc, "tools.events.forgotten"); len(got) != 1 {
		t.Errorf("the erased session has %d events in the stream, want its SessionDeleted only", len(got))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "TOOLS_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetLastMsgForSubject(ctx, "tools.audit.erase.forgotten")
	if err != nil || !strings.Contains(string(rec.Data), `"session":"forgotten"`) || strings.Contains(string(rec.Data), "retention") {
		t.Fatalf("audit record: %v %s; want the session, no reason", err, rec.Data)
	}
	if got := rawSubject(t, nc, "tools.events.bystander"); strings.Join(got, ",") != strings.Join(bystander, ",") {
		t.Errorf("bystander changed:\n%v\nwas\n%v", got, bystander)
	}
	if _, err := c.Intent(ctx, client.IntentRequest{Session: "forgotten"}); !errors.Is(err, client.ErrDeleted) {
		t.Errorf("intent of the erased id: %v, want deleted", err)
	}
}

// The retention flags parse (90d, 1d12h, from ENGINE_RETAIN_IDLE
// too), bad values are refused naming the flag and the fix, and --help
// explains them.
func TestRetentionFlagsBinary(t *testing.T) {
	run := func(env []string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, engineBin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	help, err := run(nil, "serve", "--help")
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, help)
	}
	for _, w := range []string{"--retain-idle", "90d", "ENGINE_RETAIN_IDLE", "--retain-action", "erase", "--retain-tick", "--retain-batch", "engine:retention"} {
		if !strings.Contains(help, w) {
			t.Errorf("serve --help does not mention %q", w)
		}
	}
	data := t.TempDir()
	for _, c := range []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, []string{"--retain-idle", "9x"}, []string{"--retain-idle", "90d"}},
		{nil, []string{"--retain-idle", "0d"}, []string{"--retain-idle", "positive"}},
		{nil, []string{"--retain-idle=-3h"}, []string{"--retain-idle", "positive"}},
		{[]string{"ENGINE_RETAIN_IDLE=ninety"}, nil, []string{"--retain-idle", "90d"}},
		{nil, []string{"--retain-idle", "90d", "--retain-action", "archive"}, []string{"--retain-action", "delete", "erase"}},
		{nil, []string{"--retain-idle", "90d", "--retain-batch", "0"}, []string{"--retain-batch", "1000"}},
		{nil, []string{"--retain-idle", "90d", "--retain-tick", "0s"}, []string{"--retain-tick", "1m"}},
	} {
		args := append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--http", ""}, c.args...)
		out, err := run(c.env, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v %v: %v, want exit 2 (a usage error)\n%s", c.env, c.args, err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v %v: the refusal does not say %q:\n%s", c.env, c.args, w, out)
			}
		}
	}
	// Good values start: the engine serves with retention on.
	p := startEngine(t, t.TempDir(), "--retain-idle", "1d12h", "--retain-action", "delete", "--log-level", "info")
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(p.Stderr.String(), `"idle":"36h0m0s"`) {
			return errors.New("no retention start line with idle 36h")
		}
		return nil
	})
	p.Stop(t)
}

// deletedOnce waits until each session's log ends with a SessionDeleted
// and checks that it holds exactly one.
func deletedOnce(t *testing.T, nc *nats.Conn, sessions []string) {
	t.Helper()
	natstest.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		for _, s := range sessions {
			if env := lastRaw(t, nc, s); env.Type != events.TypeSessionDeleted {
				return fmt.Errorf("%s ends with %s", s, env.Type)
			}
		}
		return nil
	})
	for _, s := range sessions {
		deletes := 0
		for _, raw := range rawSubject(t, nc, "tools.events."+s) {
			if strings.Contains(raw, fmt.Sprintf("%x", "SessionDeleted")) {
				deletes++
			}
		}
		if deletes != 1 {
			t.Errorf("%s has %d SessionDeleted events, want 1", s, deletes)
		}
	}
}

// Two engines on one stream, both with --retain-idle: only the one
// that runs the projection runs retention (the other's tick counter stays
// at 0), every idle session is deleted once, and when the runner dies the
// other takes over retention with the projection.
func TestLifecycleRetentionTwoEnginesBinary(t *testing.T) {
	srv := natstest.Server(t)
	args := []string{"--nats", srv.ClientURL(), "--retain-idle", "90d", "--retain-tick", "200ms"}
	a := startEngine(t, t.TempDir(), args...)
	b := startEngine(t, t.TempDir(), args...)
	nc := natstest.Connect(t, srv.ClientURL())
	old := time.Now().Add(-100 * 24 * time.Hour)
	var first []string
	for i := range 10 {
		s := fmt.Sprintf("one%02d", i)
		publishAged(t, nc, s, old, events.ToolsToggled{Enabled: e2eBool(true)})
		first = append(first, s)
	}
	deletedOnce(t, nc, first)
	ma, mb := scrape(t, a.HTTPURL), scrape(t, b.HTTPURL)
	runner, standby := a, b
	if mb[`engine_retention_deleted_total{action="delete"}`] > 0 {
		runner, standby, ma, mb = b, a, mb, ma
	}
	if ma[`engine_retention_deleted_total{action="delete"}`] != 10 || mb["engine_retention_ticks_total"] != 0 {
		t.Fatalf("runner deleted %v, standby ran %v ticks; want 10 and 0", ma[`engine_retention_deleted_total{action="delete"}`], mb["engine_retention_ticks_total"])
	}
	runner.Kill()
	var second []string
	for i := range 5 {
		s := fmt.Sprintf("two%02d", i)
		publishAged(t, nc, s, old, events.ToolsToggled{Enabled: e2eBool(true)})
		second = append(second, s)
	}
	deletedOnce(t, nc, second)
	if got := scrape(t, standby.HTTPURL)[`engine_retention_deleted_total{action="delete"}`]; got != 5 {
		t.Errorf("after the runner died the other engine deleted %v, want 5", got)
	}
}
