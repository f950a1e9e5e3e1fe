// Red-team tests of compaction and pseudonymous actors: each test attacks
// one entry of the two features and asserts the behaviour docs/lifecycle.md
// and docs/semantics.md "Compaction" and "Pseudonymous actors" promise. Helpers are prefixed rtl.

package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/actor"
	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// rtlWeb is the origin the attacks write the sessions with.
var rtlWeb = service.Origin{Channel: "web", Actor: "alice"}

// rtlEngine is an in-process engine on url: its own connection, log,
// running projection (durable and bucket named by name) and eraser.
func rtlEngine(t *testing.T, url, name string) (*service.Engine, *jetstream.Log) {
	t.Helper()
	return rtlEngineReg(t, url, name, resolver.Default())
}

// rtlEngineReg is rtlEngine serving reg.
func rtlEngineReg(t *testing.T, url, name string, reg *resolver.Registry) (*service.Engine, *jetstream.Log) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc := natstest.Connect(t, url, nats.Name(name))
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = proj.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := service.New(log, proj, reg, service.Config{})
	x, err := log.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEraser(x)
	return e, log
}

// rtlCtx is a bounded context for one test.
func rtlCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rtlSession writes session: intent, turn 1 begun, ended (with its
// checkpoint) and one more intent change; with open, turn 2 is left open.
func rtlSession(ctx context.Context, t *testing.T, e *service.Engine, session string, open bool) aggregate.State {
	t.Helper()
	if _, err := e.Apply(ctx, session, rtlWeb, nil, events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, session, rtlWeb, service.ResolveRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EndTurn(ctx, session, rtlWeb); err != nil {
		t.Fatal(err)
	}
	res, err := e.Apply(ctx, session, rtlWeb, nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Last
	if open {
		if _, err := e.BeginTurn(ctx, session, rtlWeb, service.ResolveRequest{}); err != nil {
			t.Fatal(err)
		}
		last = 0
	}
	st, err := e.Session(ctx, session, last)
	if err != nil {
		t.Fatal(err)
	}
	if open {
		if st, err = rtlFold(ctx, t, e, session); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// rtlFold folds session's whole log from the stream (a fresh replay).
func rtlFold(ctx context.Context, t *testing.T, e *service.Engine, session string) (aggregate.State, error) {
	t.Helper()
	_, st, err := e.History(ctx, session, service.Until{}, service.ResolveRequest{})
	return st, err
}

// rtlSameIntent reports whether a and b hold the same intent.
func rtlSameIntent(a, b aggregate.State) bool {
	ab := func(p *bool) string { return fmt.Sprint(p != nil && *p, p == nil) }
	return ab(a.Intent.Enabled) == ab(b.Intent.Enabled) && ab(a.Intent.WebSearch) == ab(b.Intent.WebSearch) &&
		strings.Join(a.Intent.Disabled, ",") == strings.Join(b.Intent.Disabled, ",") && a.Intent.Preset == b.Intent.Preset
}

// rtlPublish publishes env as a direct publisher on the session's subject,
// after sequence after (the CAS header), and returns the stored sequence.
func rtlPublish(ctx context.Context, t *testing.T, nc *nats.Conn, env events.Envelope, after uint64) uint64 {
	t.Helper()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(env)
	if err != nil {
		t.Fatalf("encode the forged %s: %v", env.Type, err)
	}
	m := nats.NewMsg("tools.events." + env.Session)
	m.Data = body
	m.Header.Set("Nats-Msg-Id", env.ID)
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(after))
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatalf("direct publish: %v", err)
	}
	return ack.Sequence
}

// rtlSnapshot is a well-formed SessionCompacted of st covering 1..st.LastSeq.
func rtlSnapshot(st aggregate.State) events.SessionCompacted {
	now := time.Now().UnixMilli()
	return events.SessionCompacted{FirstSeq: 1, LastSeq: st.LastSeq, Count: 1, FirstMs: now, LastMs: now,
		Intent: st.Intent.Clone(), Turn: st.Turn, TurnSeq: st.TurnSeq, Events: st.Events, Skipped: st.Skipped, Rejected: st.Rejected}
}

// Forged SessionCompacted events sent straight to
// tools.events.<session> by a direct publisher are judged by the fold:
// after a delete, after an event past the range they claim, with counts
// that do not fit, claiming events after themselves, and inside an open
// turn at the point they replace, each is kept in the log, not applied,
// and counted as rejected, by the serving engine and a fresh replay; the
// session's intent is unchanged.
func TestRedteamLifecycleForgedSnapshotRefused(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, _ := rtlEngine(t, url, "rtl-a")
	nc := natstest.Connect(t, url)
	for _, c := range []struct {
		name   string
		open   bool
		delete bool
		forge  func(st aggregate.State, v *events.SessionCompacted)
	}{
		{name: "after-delete", delete: true, forge: func(st aggregate.State, v *events.SessionCompacted) { v.Intent.Disabled = nil }},
		{name: "not-covering", forge: func(st aggregate.State, v *events.SessionCompacted) {
			v.LastSeq = st.LastSeq - 1
			v.Intent.Disabled = nil
		}},
		{name: "count-past-range", forge: func(st aggregate.State, v *events.SessionCompacted) {
			v.Count = st.LastSeq + 5
			v.Intent.Disabled = nil
		}},
		{name: "covers-itself", forge: func(st aggregate.State, v *events.SessionCompacted) {
			v.LastSeq = st.LastSeq + 1000
			v.Intent.Disabled = nil
		}},
		{name: "open-turn", open: true, forge: func(st aggregate.State, v *events.SessionCompacted) { v.Intent.Disabled = nil }},
		{name: "counts-short", forge: func(st aggregate.State, v *events.SessionCompacted) {
			v.Count, v.Events, v.Skipped, v.Rejected = 3, 1, 0, 0
			v.Intent.Disabled = nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			session := "rtl-forge-" + c.name
			st := rtlSession(ctx, t, e, session, c.open)
			if c.delete {
				d, err := e.Delete(ctx, session, rtlWeb, "red team")
				if err != nil {
					t.Fatal(err)
				}
				st.LastSeq = d.Seq
			}
			v := rtlSnapshot(st)
			c.forge(st, &v)
			seq := rtlPublish(ctx, t, nc, events.New(session, "web", "mallory", v), st.LastSeq)
			if c.delete {
				if _, err := e.Session(ctx, session, seq); !errors.Is(err, service.ErrDeleted) {
					t.Fatalf("deleted session after a forged snapshot: %v, want still deleted", err)
				}
				return
			}
			got, err := e.Session(ctx, session, seq)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := rtlFold(ctx, t, e, session)
			if err != nil {
				t.Fatal(err)
			}
			for who, s := range map[string]aggregate.State{"view": got, "replay": fresh} {
				if s.Rejected != st.Rejected+1 || len(s.Intent.Disabled) != 2 || s.InTurn != c.open || s.LastSeq != seq {
					t.Errorf("%s after the forged snapshot at %d: rejected %d (was %d), disabled %v, in turn %v, last %d",
						who, seq, s.Rejected, st.Rejected, s.Intent.Disabled, s.InTurn, s.LastSeq)
				}
			}
		})
	}
}

// A crash between the snapshot's append and the purge (the
// eraser fails right before purging) leaves the history and the snapshot,
// which fold to the state of the history alone, for the serving engine and
// a second engine; compacting again from the second engine purges (a raw
// read of the subject finds the snapshot alone) and a third compaction is
// a no-op; the session stays writable and its checkpoint resumes.
func TestRedteamLifecycleCrashBetweenAppendAndPurge(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	a, logA := rtlEngine(t, url, "rtl-a")
	b, _ := rtlEngine(t, url, "rtl-b")
	const session = "rtl-crash"
	want := rtlSession(ctx, t, a, session, false)
	x, err := logA.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	x.BeforePurge = func(jetstream.EraseReport) error { return errors.New("killed") }
	a.SetEraser(x)
	res, err := a.Compact(ctx, session, rtlWeb, "red team")
	if err == nil || res.Seq == 0 {
		t.Fatalf("compaction with a crash before the purge: %+v %v", res, err)
	}
	nc := natstest.Connect(t, url)
	if n := len(rawSubject(t, nc, "tools.events."+session)); n != int(res.Count)+1 {
		t.Fatalf("after the crash the subject holds %d messages, want the %d events and the snapshot", n, res.Count)
	}
	for who, e := range map[string]*service.Engine{"a": a, "b": b} {
		got, err := e.Session(ctx, session, res.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !rtlSameIntent(got, want) || got.Turn != want.Turn || got.Checkpoint == nil || got.InTurn {
			t.Errorf("engine %s after the crash: %+v, want the intent of %+v, turn %d and its checkpoint", who, got, want, want.Turn)
		}
	}
	again, err := b.Compact(ctx, session, rtlWeb, "red team again")
	if err != nil || again.Seq != res.Seq || again.Purged != res.Count {
		t.Fatalf("compacting again on engine b: %+v %v, want the snapshot at %d purging %d", again, err, res.Seq, res.Count)
	}
	if n := len(rawSubject(t, nc, "tools.events."+session)); n != 1 {
		t.Fatalf("after compacting again the subject holds %d messages, want the snapshot", n)
	}
	third, err := a.Compact(ctx, session, rtlWeb, "")
	if err == nil {
		// a's eraser still fails before purging, but nothing is left to purge.
		if !third.Already || third.Purged != 0 {
			t.Errorf("third compaction: %+v", third)
		}
	} else {
		t.Errorf("third compaction: %v", err)
	}
	if _, err := b.Resume(ctx, session, rtlWeb, service.ResolveRequest{}); err != nil {
		t.Errorf("resume of the compacted checkpoint: %v", err)
	}
	if _, err := a.Apply(ctx, session, rtlWeb, nil, events.ToolEnabled{Name: "grep"}); err != nil {
		t.Errorf("write after the compaction: %v", err)
	}
}

// Two engines: while engine b holds a turn open, engine a's
// compaction is refused as a conflict (ErrTurnOpen) and writes nothing;
// after b ends the turn a compacts, and b folds the snapshot to the state
// it had.
func TestRedteamLifecycleCompactWhileOtherEngineTurn(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	a, _ := rtlEngine(t, url, "rtl-a")
	b, _ := rtlEngine(t, url, "rtl-b")
	const session = "rtl-two"
	rtlSession(ctx, t, b, session, true)
	nc := natstest.Connect(t, url)
	before := rawSubject(t, nc, "tools.events."+session)
	if _, err := a.Compact(ctx, session, rtlWeb, ""); !errors.Is(err, service.ErrTurnOpen) || !errors.Is(err, logport.ErrConflict) {
		t.Fatalf("compaction during b's open turn: %v, want a turn-open conflict", err)
	}
	if got := rawSubject(t, nc, "tools.events."+session); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Fatal("a refused compaction changed the log")
	}
	cp, err := b.EndTurn(ctx, session, rtlWeb)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.Session(ctx, session, cp.Seq)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Compact(ctx, session, rtlWeb, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Session(ctx, session, res.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if !rtlSameIntent(got, want) || got.Turn != want.Turn || got.Checkpoint == nil || got.Checkpoint.Seq != want.Checkpoint.Seq {
		t.Errorf("b after a's compaction: %+v, want %+v", got, want)
	}
	if _, err := b.BeginTurn(ctx, session, rtlWeb, service.ResolveRequest{}); err != nil {
		t.Errorf("b begins a turn after the compaction: %v", err)
	}
}

// rtlKeyFile is a 32-byte operator key.
func rtlKey(b byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

// rtlSealer is an encrypt-mode sealer on log's key bucket.
func rtlSealer(ctx context.Context, t *testing.T, log *jetstream.Log, key []byte, cacheFor time.Duration) *actor.Sealer {
	t.Helper()
	keys, err := log.OpenActorKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := actor.New(actor.Config{Mode: actor.Encrypt, Key: key, Keys: keys, CacheFor: cacheFor})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rtlLastActor is the actor stored in session's last event.
func rtlLastActor(t *testing.T, nc *nats.Conn, session string) string {
	t.Helper()
	return lastRaw(t, nc, session).Actor
}

// In encrypt mode an actor of the longest sealable length is
// stored sealed and reads back in history; one byte more is refused as
// invalid (nothing written); an actor of odd unicode (combining marks,
// right-to-left override, emoji) round-trips; an actor in a sealed form
// (h1:, e1:) is refused.
func TestRedteamLifecycleActorEdges(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, log := rtlEngine(t, url, "rtl-a")
	e.SetActorSealer(rtlSealer(ctx, t, log, rtlKey(1), 0))
	nc := natstest.Connect(t, url)
	long := strings.Repeat("x", actor.MaxActorLen)
	odd := "e\u0301ve\u202e\U0001F600\u200d"
	for _, who := range []string{long, odd} {
		session := fmt.Sprintf("rtl-actor-%d", len(who))
		res, err := e.Apply(ctx, session, service.Origin{Channel: "web", Actor: who}, nil, events.ToolsToggled{Enabled: e2eBool(true)})
		if err != nil {
			t.Fatalf("actor of %d bytes: %v", len(who), err)
		}
		stored := rtlLastActor(t, nc, session)
		if !strings.HasPrefix(stored, actor.EncryptPrefix) || strings.Contains(stored, who) {
			t.Errorf("stored actor %q", stored)
		}
		h, _, err := e.History(ctx, session, service.Until{Seq: res.Last}, service.ResolveRequest{})
		if err != nil || len(h) == 0 || h[len(h)-1].Actor != who {
			t.Errorf("history of an actor of %d bytes: %v %+v", len(who), err, h)
		}
	}
	for _, who := range []string{long + "x", actor.EncryptPrefix + "0123", actor.HashPrefix + "abc"} {
		_, err := e.Apply(ctx, "rtl-actor-bad", service.Origin{Channel: "web", Actor: who}, nil, events.ToolsToggled{Enabled: e2eBool(true)})
		if !errors.Is(err, service.ErrInvalid) {
			t.Errorf("actor %.20q (%d bytes): %v, want ErrInvalid", who, len(who), err)
		}
	}
	if n := len(rawSubject(t, nc, "tools.events.rtl-actor-bad")); n != 0 {
		t.Errorf("refused actors wrote %d events", n)
	}
}

// An engine restarted with another key file shows an actor
// sealed under the first as stored, never as erased (the person was not
// forgotten); a person the first engine never saw gets a key of the new
// file. An admin who deletes the key bucket makes writes fail or stay
// sealed: no actor is ever stored plain.
func TestRedteamLifecycleWrongKeyAndDeletedBucket(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, log := rtlEngine(t, url, "rtl-a")
	e.SetActorSealer(rtlSealer(ctx, t, log, rtlKey(1), 0))
	nc := natstest.Connect(t, url)
	const session = "rtl-wrongkey"
	if _, err := e.Apply(ctx, session, service.Origin{Channel: "web", Actor: "carol"}, nil, events.ToolsToggled{Enabled: e2eBool(true)}); err != nil {
		t.Fatal(err)
	}
	stored := rtlLastActor(t, nc, session)
	e.SetActorSealer(rtlSealer(ctx, t, log, rtlKey(100), 0))
	if got := e.RevealActor(ctx, stored); got != stored {
		t.Errorf("reveal under another key file: %q, want the stored form %q", got, stored)
	}
	if _, err := e.Apply(ctx, session, service.Origin{Channel: "web", Actor: "dave"}, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Errorf("write by a new person under the new key file: %v", err)
	}

	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, jetstream.ActorKeysBucket("tools")); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"dave", "erin"} {
		_, err := e.Apply(ctx, session, service.Origin{Channel: "web", Actor: who}, nil, events.ToolEnabled{Name: "grep"})
		t.Logf("%s writes after the key bucket was deleted: %v", who, err)
		if err == nil {
			if a := rtlLastActor(t, nc, session); !strings.HasPrefix(a, actor.EncryptPrefix) {
				t.Errorf("after the key bucket was deleted %s's write stored actor %q", who, a)
			}
		}
	}
	t.Logf("reveal of carol after the bucket was deleted: %q", e.RevealActor(ctx, stored))
	for _, r := range rawSubject(t, nc, "tools.events."+session) {
		for _, who := range []string{"carol", "dave", "erin"} {
			if strings.Contains(r, fmt.Sprintf("%x", who)) {
				t.Errorf("the log holds %q in plain", who)
			}
		}
	}
}

// A write retried with its idempotency key after a
// compaction replaced (and purged) the events it stored is answered as a
// duplicate on the engine that wrote it and on another one; nothing is
// written again.
func TestRedteamLifecycleIdempotentAfterCompact(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, _ := rtlEngine(t, url, "rtl-a")
	first, err := e.ApplyKeyed(ctx, "rtl-idem", rtlWeb, nil, "key-1", events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Compact(ctx, "rtl-idem", rtlWeb, ""); err != nil {
		t.Fatal(err)
	}
	b, _ := rtlEngine(t, url, "rtl-b")
	for who, x := range map[string]*service.Engine{"a": e, "b": b} {
		again, err := x.ApplyKeyed(ctx, "rtl-idem", rtlWeb, nil, "key-1", events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"})
		if err != nil || !again.Duplicate {
			t.Errorf("engine %s: retry of key-1 after the compaction: %+v %v, want a duplicate of %+v", who, again, err, first)
		}
	}
	if n := len(rawSubject(t, natstest.Connect(t, url), "tools.events.rtl-idem")); n != 1 {
		t.Errorf("after retries the subject holds %d messages, want the snapshot", n)
	}
}

// A forged snapshot that carries the user's answers to asks
// never widens a channel's policy: a session grant of bash (ask)
// claimed on "public", whose policy denies bash, does not make bash
// callable in a turn of "web" (it stays ask) nor of "public" (deny); a
// grant claimed on "web" does not reach a turn of "public" (and makes bash
// callable in a turn of "web", the control).
func TestRedteamLifecycleSnapshotGrantsNeverWiden(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	reg, err := resolver.LoadFile(policyRegistryFile(t))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := rtlEngineReg(t, url, "rtl-a", reg)
	nc := natstest.Connect(t, url)
	for _, c := range []struct{ grantOn, turnOn, want string }{
		{"public", "web", "ask"}, {"public", "public", "deny"}, {"web", "public", "deny"},
		{"web", "web", "allow"}, // the control: a snapshot's answer counts where the policy lets it
	} {
		session := "rtl-grant-" + c.grantOn + "-" + c.turnOn
		on := service.Origin{Channel: c.turnOn, Actor: "alice"}
		if _, err := e.Apply(ctx, session, on, nil, events.ToolsToggled{Enabled: e2eBool(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.BeginTurn(ctx, session, on, service.ResolveRequest{}); err != nil {
			t.Fatal(err)
		}
		cp, err := e.EndTurn(ctx, session, on)
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.Session(ctx, session, cp.Seq)
		if err != nil {
			t.Fatal(err)
		}
		v := rtlSnapshot(st)
		v.Grants = []events.CompactedGrant{{Tool: "bash", Scope: events.ScopeSession, By: "mallory", Channel: c.grantOn, Turn: st.Turn, Seq: st.LastSeq}}
		seq := rtlPublish(ctx, t, nc, events.New(session, c.grantOn, "mallory", v), st.LastSeq)
		if _, err := e.Session(ctx, session, seq); err != nil {
			t.Fatal(err)
		}
		if _, err := e.BeginTurn(ctx, session, on, service.ResolveRequest{Override: intent.Override{Kind: intent.OverrideNames, Names: []string{"bash", "read_file"}}}); err != nil {
			t.Fatal(err)
		}
		cc, err := e.CallCheck(ctx, session, "bash")
		if err != nil {
			t.Fatal(err)
		}
		if cc.Callable != (c.want == "allow") || cc.Decision != c.want {
			t.Errorf("grant claimed on %s, turn on %s: call-check bash %+v, want %s", c.grantOn, c.turnOn, cc, c.want)
		}
	}
}

// In encrypt mode, after a compaction: history of the
// session starts with the compaction entry and reveals the tail's actor;
// history and explain of a point before the compaction answer
// ErrCompacted (also ErrNotFound), naming the range; after bob is
// forgotten through another engine's sealer (engine actor forget), a
// second engine shows his events as erased, and his next write, sealed
// under a new key, reads back as bob.
func TestRedteamLifecycleCompactedHistoryAndForget(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	a, logA := rtlEngine(t, url, "rtl-a")
	b, logB := rtlEngine(t, url, "rtl-b")
	a.SetActorSealer(rtlSealer(ctx, t, logA, rtlKey(7), 0))
	b.SetActorSealer(rtlSealer(ctx, t, logB, rtlKey(7), 0))
	const session = "rtl-hist"
	bob := service.Origin{Channel: "web", Actor: "bob"}
	rtlSession(ctx, t, a, session, false)
	c, err := a.Compact(ctx, session, service.Origin{Channel: "web", Actor: service.Anonymous}, "red team")
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.Apply(ctx, session, bob, nil, events.ToolEnabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := b.History(ctx, session, service.Until{Seq: w.Last}, service.ResolveRequest{})
	if err != nil || len(h) != 2 || h[0].Seq != c.Seq || h[1].Actor != "bob" {
		t.Fatalf("history after the compaction: %v %+v", err, h)
	}
	var ce *service.CompactedError
	if _, _, err := b.History(ctx, session, service.Until{Seq: c.Seq - 1}, service.ResolveRequest{}); !errors.As(err, &ce) || !errors.Is(err, service.ErrNotFound) || ce.FirstSeq != c.FirstSeq || ce.LastSeq != c.LastSeq {
		t.Errorf("history before the compaction: %v", err)
	}
	if _, err := b.Explain(ctx, session, "grep", service.Until{Seq: c.Seq - 1}, service.ResolveRequest{}); !errors.Is(err, service.ErrCompacted) {
		t.Errorf("explain before the compaction: %v", err)
	}
	cli := rtlSealer(ctx, t, logA, rtlKey(7), 0)
	if _, err := cli.Forget(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	h, _, err = b.History(ctx, session, service.Until{Seq: w.Last}, service.ResolveRequest{})
	if err != nil || h[1].Actor != service.ErasedActor {
		t.Errorf("history after forget: %v %+v, want bob's event by %s", err, h, service.ErasedActor)
	}
	w2, err := b.Apply(ctx, session, bob, nil, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err = a.History(ctx, session, service.Until{Seq: w2.Last}, service.ResolveRequest{})
	if err != nil || len(h) != 3 || h[1].Actor != service.ErasedActor || h[2].Actor != "bob" {
		t.Errorf("history after bob wrote again: %v %+v, want (erased) then bob", err, h)
	}
}

// A compacted session can be deleted (later compactions are
// refused as deleted) and erased: the raw subject is empty afterwards and
// the audit stream keeps the compaction's and the erase's records.
func TestRedteamLifecycleDeleteAndEraseAfterCompact(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, _ := rtlEngine(t, url, "rtl-a")
	nc := natstest.Connect(t, url)
	const session = "rtl-del"
	rtlSession(ctx, t, e, session, false)
	if _, err := e.Compact(ctx, session, rtlWeb, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Delete(ctx, session, rtlWeb, "red team"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Compact(ctx, session, rtlWeb, ""); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("compact after delete: %v, want ErrDeleted", err)
	}
	if _, err := e.Erase(ctx, session, rtlWeb, "red team"); err != nil {
		t.Fatal(err)
	}
	if n := len(rawSubject(t, nc, "tools.events."+session)); n != 1 {
		t.Errorf("after erase the subject holds %d messages, want its SessionDeleted only", n)
	}
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := js.Stream(ctx, "TOOLS_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"tools.audit.compact." + session} {
		if _, err := audit.GetLastMsgForSubject(ctx, subj); err != nil {
			t.Errorf("audit %s: %v", subj, err)
		}
	}
	if _, err := e.Compact(ctx, session, rtlWeb, ""); err == nil {
		t.Error("compact after erase succeeded")
	}
}

// A forged snapshot whose checkpoint names a registry
// version and contract no engine served, loading a tool the registry does
// not have, does not make resume restore that tool: resume answers with
// an outcome (nothing restored that the live contract does not have) and
// the engine keeps serving the session. A forged snapshot with more
// grants than the format allows cannot be encoded, one at the limit folds
// and leaves the session usable, and a body over the stream's message
// limit is refused by the server.
func TestRedteamLifecycleForgedSnapshotCheckpointAndOversize(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	e, _ := rtlEngine(t, url, "rtl-a")
	nc := natstest.Connect(t, url)
	const session = "rtl-cp"
	st := rtlSession(ctx, t, e, session, false)
	v := rtlSnapshot(st)
	v.Checkpoint = &events.CheckpointRecorded{Loaded: []string{"no_such_tool"}, ContractHash: strings.Repeat("0", 64), RegistryVersion: "forged-1", Turn: st.Turn}
	v.CheckpointSeq = st.LastSeq
	seq := rtlPublish(ctx, t, nc, events.New(session, "web", "mallory", v), st.LastSeq)
	if _, err := e.Session(ctx, session, seq); err != nil {
		t.Fatal(err)
	}
	r, err := e.Resume(ctx, session, rtlWeb, service.ResolveRequest{})
	if err != nil {
		t.Fatalf("resume of a forged checkpoint: %v", err)
	}
	for _, n := range r.Outcome.Restored {
		if n == "no_such_tool" {
			t.Errorf("resume restored a tool the registry does not have: %+v", r.Outcome)
		}
	}
	if _, err := e.BeginTurn(ctx, session, rtlWeb, service.ResolveRequest{}); err != nil {
		t.Errorf("begin turn after the forged checkpoint: %v", err)
	}

	const big = "rtl-oversize"
	st = rtlSession(ctx, t, e, big, false)
	v = rtlSnapshot(st)
	for i := range 2*events.MaxListLen + 1 {
		v.Grants = append(v.Grants, events.CompactedGrant{Tool: fmt.Sprintf("t%d", i), Scope: events.ScopeSession, By: "m"})
	}
	body, err := events.Encode(events.New(big, "web", "mallory", v))
	if err == nil {
		t.Fatalf("encode accepted %d grants (%d bytes)", len(v.Grants), len(body))
	}
	// The most grants the format allows fold (a direct publisher may
	// answer for any tool, as with PermissionGranted) and the session
	// stays usable.
	v.Grants = v.Grants[:2*events.MaxListLen]
	seq = rtlPublish(ctx, t, nc, events.New(big, "web", "mallory", v), st.LastSeq)
	got, err := e.Session(ctx, big, seq)
	if err != nil || got.LastSeq != seq {
		t.Fatalf("after a snapshot of %d grants: %+v %v", len(v.Grants), got, err)
	}
	if _, err := e.BeginTurn(ctx, big, rtlWeb, service.ResolveRequest{}); err != nil {
		t.Errorf("begin turn after a snapshot of %d grants: %v", len(v.Grants), err)
	}
	// A body over the stream's message limit never reaches the log.
	m := nats.NewMsg("tools.events." + big)
	m.Data = make([]byte, events.MaxEventBytes+8192)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, m); err == nil {
		t.Error("the stream stored a message over its limit")
	}
}

// Engine b holds the session in its cache when engine a
// compacts it; b's next write (without and with an expected sequence at
// the snapshot) lands after the snapshot with the state the history had,
// and a write expecting the pre-compaction sequence is a conflict.
func TestRedteamLifecycleStaleCacheAfterCompact(t *testing.T) {
	ctx := rtlCtx(t)
	url := natstest.Server(t).ClientURL()
	a, _ := rtlEngine(t, url, "rtl-a")
	b, _ := rtlEngine(t, url, "rtl-b")
	const session = "rtl-stale"
	want := rtlSession(ctx, t, b, session, false)
	if _, err := b.Session(ctx, session, want.LastSeq); err != nil {
		t.Fatal(err)
	}
	c, err := a.Compact(ctx, session, rtlWeb, "")
	if err != nil {
		t.Fatal(err)
	}
	old := want.LastSeq
	if _, err := b.Apply(ctx, session, rtlWeb, &old, events.WebSearchSet{Enabled: e2eBool(true)}); !errors.Is(err, logport.ErrConflict) {
		t.Errorf("write expecting the sequence before the compaction: %v, want a conflict", err)
	}
	w, err := b.Apply(ctx, session, rtlWeb, nil, events.ToolEnabled{Name: "grep"})
	if err != nil || w.First <= c.Seq {
		t.Fatalf("b's write after a's compaction: %+v %v", w, err)
	}
	snap := w.Last
	w2, err := b.Apply(ctx, session, rtlWeb, &snap, events.ToolEnabled{Name: "bash"})
	if err != nil {
		t.Fatalf("b's write expecting %d: %v", snap, err)
	}
	for who, e := range map[string]*service.Engine{"a": a, "b": b} {
		got, err := e.Session(ctx, session, w2.Last)
		if err != nil || len(got.Intent.Disabled) != 0 || got.Turn != want.Turn || got.Checkpoint == nil || got.Rejected != 0 {
			t.Errorf("engine %s after the writes: %+v %v", who, got, err)
		}
	}
}
