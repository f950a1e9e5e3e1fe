package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// waitApplied waits until the engine's projection has folded up to seq.
func waitApplied(t *testing.T, p *engineProc, seq uint64) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		_, applied := healthInfo(t, p)
		if applied < seq {
			return fmt.Errorf("projection at %d of %d", applied, seq)
		}
		return nil
	})
}

// lastAudit reads the last audit record of session's erase (ok false:
// none).
func lastAudit(t *testing.T, audit natsjs.Stream, session string) (jetstream.AuditRecord, bool) {
	t.Helper()
	var rec jetstream.AuditRecord
	m, err := audit.GetLastMsgForSubject(context.Background(), "tools.audit.erase."+session)
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return rec, false
	}
	if err != nil {
		t.Fatalf("audit record of %s: %v", session, err)
	}
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		t.Fatalf("audit record of %s: %v", session, err)
	}
	return rec, true
}

// An erase pass of retention killed with -9 at 20 random points, over
// 3,000 idle sessions beside 300 fresh ones: once the engine runs again,
// every idle session is erased to the end (its events purged below the
// SessionDeleted that stays as its tombstone, and its audit records ending
// in "done"), whatever step each crash interrupted, and no fresh session
// is touched, byte for byte.
func TestRetentionEraseKilledMidPassIsFinished(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	on := true
	const idle, fresh = 3000, 300
	for i := range idle {
		publishAged(t, nc, fmt.Sprintf("idle-%04d", i), time.Now().Add(-400*24*time.Hour), events.ToolsToggled{Enabled: &on})
	}
	for i := range fresh {
		publishAged(t, nc, fmt.Sprintf("fresh-%03d", i), time.Now(), events.ToolsToggled{Enabled: &on})
	}
	waitApplied(t, p, idle+fresh)
	before := map[string][]string{}
	for i := range fresh {
		s := fmt.Sprintf("tools.events.fresh-%03d", i)
		before[s] = rawSubject(t, nc, s)
	}
	nc.Close()
	p.Stop(t)

	args := []string{"--retain-idle", "90d", "--retain-action", "erase", "--retain-tick", "100ms", "--retain-batch", "250", "--erase-takeover", "1s"}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 42))
	t.Logf("kill points from seed %d", seed)
	for k := range 20 {
		p = startEngine(t, dir, args...)
		wait := time.Duration(rng.IntN(1500)) * time.Millisecond
		time.Sleep(wait)
		p.Kill()
		t.Logf("kill %d after %v ready", k+1, wait)
	}
	p = startEngine(t, dir, args...)
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := js.Stream(context.Background(), "TOOLS_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 3*time.Minute, time.Second, func() error {
		counts := subjectCounts(t, nc)
		left := 0
		for i := range idle {
			if counts[fmt.Sprintf("tools.events.idle-%04d", i)] != 1 {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d idle sessions still hold more than their tombstone", left, idle)
		}
		return nil
	})
	// Every idle session: its one message is a SessionDeleted, its last
	// audit record says done.
	notDone := 0
	for i := range idle {
		s := fmt.Sprintf("idle-%04d", i)
		if env := lastRaw(t, nc, s); env.Type != events.TypeSessionDeleted {
			t.Errorf("%s holds a %s, want its SessionDeleted", s, env.Type)
		}
		natstest.CheckFor(t, time.Minute, 200*time.Millisecond, func() error {
			if rec, ok := lastAudit(t, audit, s); !ok || rec.Phase != jetstream.PhaseDone {
				notDone++
				return fmt.Errorf("%s: last audit record %+v (found %v), want done", s, rec, ok)
			}
			return nil
		})
	}
	for s, raw := range before {
		if got := rawSubject(t, nc, s); strings.Join(got, ",") != strings.Join(raw, ",") {
			t.Errorf("fresh session %s changed", s)
		}
		if _, ok := lastAudit(t, audit, strings.TrimPrefix(s, "tools.events.")); ok {
			t.Errorf("fresh session %s has an audit record", s)
		}
	}
	c := p.GoClient("web")
	if _, err := c.Intent(context.Background(), client.IntentRequest{Session: "idle-0000"}); !errors.Is(err, client.ErrDeleted) {
		t.Errorf("an erased id reads %v, want deleted", err)
	}
	resp, err := http.Get(p.HTTPURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("readyz %d after the pass", resp.StatusCode)
	}
	t.Logf("%d audit reads waited for a done record", notDone)
}

// An erased id stays erased (its reads, its writes and its history answer
// deleted) through engine rebuild, also after a direct
// publisher appended to its subject: the SessionDeleted an erase keeps
// folds first, so the rebuilt view is deleted and the appended event is
// refused. An id erased by an engine that purged the SessionDeleted too
// (its subject empty, its audit record the range only) gets the tombstone
// from the engine that finishes its erase, with the same outcome.
func TestErasedIDStaysErasedThroughRebuild(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--erase-takeover", "1s"}
	p := startEngine(t, dir, args...)
	ctx := context.Background()
	web, ops := p.GoClient("web"), p.GoClient("ops")
	for _, s := range []string{"victim", "legacy"} {
		if _, err := web.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable(), client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ops.SessionDelete(ctx, client.DeleteRequest{Session: "victim", Erase: true}); err != nil {
		t.Fatal(err)
	}
	// legacy: erased the way an earlier engine did: deleted, then every
	// event purged, its SessionDeleted too, and one audit record of the
	// range.
	del, err := web.SessionDelete(ctx, client.DeleteRequest{Session: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, p, del.Seq)
	admin := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	ajs, err := natsjs.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ajs.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, natsjs.WithPurgeSubject("tools.events.legacy")); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(jetstream.AuditRecord{Kind: "erase", Session: "legacy", Stream: "TOOLS_EVENTS", FirstSeq: 2, LastSeq: del.Seq, Purged: 3,
		Time: time.Now().Add(-time.Hour).UTC()})
	if _, err := ajs.Publish(ctx, "tools.audit.erase.legacy", rec); err != nil {
		t.Fatal(err)
	}
	// The engine finishes the legacy erase: the id gets its tombstone.
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	natstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if n := len(rawSubject(t, nc, "tools.events.legacy")); n != 1 {
			return fmt.Errorf("legacy holds %d messages, want its tombstone", n)
		}
		return nil
	})
	if env := lastRaw(t, nc, "legacy"); env.Type != events.TypeSessionDeleted {
		t.Fatalf("legacy's tombstone is a %s", env.Type)
	}
	// A direct publisher appends to both, after their tombstones.
	for _, s := range []string{"victim", "legacy"} {
		publishDirect(t, nc, s)
	}
	check := func(when string, p *engineProc) {
		t.Helper()
		c := p.GoClient("web")
		for _, s := range []string{"victim", "legacy"} {
			if _, err := c.Intent(ctx, client.IntentRequest{Session: s}); !errors.Is(err, client.ErrDeleted) {
				t.Errorf("%s: intent of the erased id %s: %v, want deleted", when, s, err)
			}
			if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Disable()}}); !errors.Is(err, client.ErrDeleted) {
				t.Errorf("%s: append to the erased id %s: %v, want deleted", when, s, err)
			}
			if _, err := c.History(ctx, client.HistoryRequest{Session: s}); !errors.Is(err, client.ErrDeleted) {
				t.Errorf("%s: history of the erased id %s: %v, want deleted", when, s, err)
			}
		}
	}
	check("after the direct publishes", p)
	p.Stop(t)
	if out, _, err := runEngine(t, "rebuild", "--data", dir); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out)
	}
	p = startEngine(t, dir, args...)
	check("after engine rebuild", p)
	p.Kill()
	p = startEngine(t, dir, args...)
	check("after kill -9", p)
}

// publishDirect appends one event to session's subject with the sequence
// it holds, as a direct publisher of the event stream may.
func publishDirect(t *testing.T, nc *nats.Conn, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, st := eventStream(ctx, t, nc)
	last, err := st.GetLastMsgForSubject(ctx, "tools.events."+session)
	if err != nil {
		t.Fatal(err)
	}
	on := true
	body, err := events.Encode(events.New(session, "web", "mallory", events.ToolsToggled{Enabled: &on}))
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("tools.events." + session)
	m.Data = body
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(last.Sequence))
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("direct publish to %s: %v", session, err)
	}
}
