package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// rawSubject reads every message of subject from stream by direct gets,
// as "seq:hex" strings.
func rawSubject(t *testing.T, l *jetstream.Log, stream, subject string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := l.JetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, njs.WithGetMsgSubject(subject))
		if errors.Is(err, njs.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d:%x", m.Sequence, m.Data))
		seq = m.Sequence + 1
	}
}

// closeSession appends the SessionDeleted that an erase keeps as the
// session's tombstone after the session's last event, at last, and
// returns its sequence.
func closeSession(t *testing.T, l *jetstream.Log, session string, last uint64) uint64 {
	t.Helper()
	ctx := context.Background()
	r, err := l.Append(ctx, session, last, events.New(session, "engine", "engine:erase", events.SessionDeleted{}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Last
}

// An erase purges every event of one session before the SessionDeleted
// that closed it (a raw JetStream read finds that one only), leaves the
// other sessions byte for byte, writes audit records naming the session,
// the time and the range, and no actor, channel or content, and records
// its end; a second erase purges nothing and fails nothing; the session's
// idempotency keys are forgotten, others' kept.
func TestEraseSession(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	var last = map[string]uint64{}
	for i := range 3 {
		for _, s := range []string{"victim", "by1", "by2"} {
			if i == 2 && s == "by2" {
				continue
			}
			env := events.New(s, "web", "user:alice@example.com", events.ToolDisabled{Name: fmt.Sprintf("tool_%d", i)})
			r, err := l.Append(ctx, s, last[s], env)
			if err != nil {
				t.Fatal(err)
			}
			last[s] = r.Last
		}
	}
	keys, err := l.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range map[string]string{"k-victim": "victim", "k-by1": "by1"} {
		if _, _, err := keys.Claim(ctx, k, logport.KeyClaim{Session: s, Channel: "web"}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string][]string{}
	for _, s := range []string{"by1", "by2"} {
		before[s] = rawSubject(t, l, l.StreamName(), l.Subject(s))
	}
	x, err := l.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var hooked []string
	x.BeforePurge = func(rep jetstream.EraseReport) error {
		hooked = append(hooked, fmt.Sprintf("before %d", rep.Purged))
		return nil
	}
	x.AfterPurge = func(rep jetstream.EraseReport, err error) { hooked = append(hooked, fmt.Sprintf("after %v", err)) }
	if n, err := keys.ForgetSession(ctx, "victim"); err != nil || n != 1 {
		t.Fatalf("forget keys: %d %v", n, err)
	}
	if err := x.Begin(ctx, "victim", 0); err != nil {
		t.Fatal(err)
	}
	deleted := closeSession(t, l, "victim", last["victim"])
	rep, err := x.Erase(ctx, "victim", deleted)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Purged != 3 || rep.FirstSeq != 1 || rep.LastSeq != deleted-1 || rep.AuditSeq == 0 {
		t.Fatalf("report %+v", rep)
	}
	if strings.Join(hooked, ",") != "before 3,after <nil>" {
		t.Errorf("hooks %v", hooked)
	}
	if got := rawSubject(t, l, l.StreamName(), l.Subject("victim")); len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("%d:", deleted)) {
		t.Fatalf("victim holds %v, want only its SessionDeleted at %d", got, deleted)
	}
	if seq, err := l.LastSeq(ctx, "victim"); err != nil || seq != deleted {
		t.Fatalf("victim last seq %d %v, want %d", seq, err, deleted)
	}
	for s, want := range before {
		if got := rawSubject(t, l, l.StreamName(), l.Subject(s)); !slices.Equal(got, want) {
			t.Errorf("bystander %s changed:\n%v\nwas\n%v", s, got, want)
		}
	}
	// The audit record: exactly these keys, nothing of the actor or the
	// channel.
	// The audit records: begun, the range, done; exactly these keys,
	// nothing of the actor or the channel.
	m, err := l.JetStream().Stream(ctx, "TOOLS_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for seq := uint64(1); ; {
		msg, err := m.GetMsg(ctx, seq, njs.WithGetMsgSubject("tools.audit.erase.victim"))
		if errors.Is(err, njs.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seq = msg.Sequence + 1
		var rec map[string]any
		if err := json.Unmarshal(msg.Data, &rec); err != nil {
			t.Fatal(err)
		}
		var keysOf []string
		for k := range rec {
			keysOf = append(keysOf, k)
		}
		slices.Sort(keysOf)
		phase, _ := rec["phase"].(string)
		phases = append(phases, phase)
		want := "first_seq,kind,last_seq,purged,session,stream,time"
		if phase != "" {
			want = "first_seq,kind,last_seq,phase,purged,session,stream,time"
		}
		if strings.Join(keysOf, ",") != want || rec["session"] != "victim" {
			t.Errorf("audit record %s", msg.Data)
		}
		if strings.Contains(string(msg.Data), "alice") || strings.Contains(string(msg.Data), "web") {
			t.Errorf("audit record names the actor or channel: %s", msg.Data)
		}
	}
	if strings.Join(phases, ",") != "begun,,done" {
		t.Errorf("audit records' phases %q, want begun, the range, done", phases)
	}
	if cfg := m.CachedInfo().Config; !cfg.DenyDelete || !cfg.DenyPurge {
		t.Errorf("audit stream deny_delete %v deny_purge %v, want both", cfg.DenyDelete, cfg.DenyPurge)
	}
	// Known erased, for good; the others not.
	for s, want := range map[string]bool{"victim": true, "by1": false} {
		if got, err := x.Erased(ctx, s); err != nil || got != want {
			t.Errorf("erased(%s) = %v %v", s, got, err)
		}
	}
	again, err := x.Erase(ctx, "victim", deleted)
	if err != nil || again.Purged != 0 {
		t.Errorf("second erase: %+v %v", again, err)
	}
	if open, _, err := x.Unfinished(ctx, 0); err != nil || open["victim"].Phase != jetstream.PhaseDone {
		t.Errorf("victim's last audit record: %+v %v, want done", open["victim"], err)
	}
	if _, found, err := keys.Get(ctx, "k-victim"); err != nil || found {
		t.Errorf("victim's key kept: %v %v", found, err)
	}
	if c, found, err := keys.Get(ctx, "k-by1"); err != nil || !found || c.Session != "by1" {
		t.Errorf("bystander's key: %+v %v %v", c, found, err)
	}
	// The erased range is known, and a gap inside it is covered.
	rs, err := l.ErasedRanges(ctx)
	if err != nil || len(rs) != 1 || rs[0] != (jetstream.SeqRange{First: 1, Last: deleted - 1}) {
		t.Fatalf("erased ranges %v %v", rs, err)
	}
	if !jetstream.Covered(rs, 1, 3, []uint64{2, 3}) || jetstream.Covered(rs, 1, last["by1"]+1, nil) {
		t.Errorf("Covered")
	}
}

// A stream created with deny_purge still opens and serves,
// and an erase answers ErrPurgeDenied naming the fix; nothing is purged
// and no audit record claims it was.
func TestEraseLegacyDenyPurge(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "TOOLS_EVENTS", Subjects: []string{"tools.events.*"}, Storage: njs.FileStorage,
		Duplicates: 2 * time.Minute, MaxMsgSize: int32(events.MaxEventBytes + 4096), DenyDelete: true, DenyPurge: true,
		AllowDirect: true, AllowAtomicPublish: true}); err != nil {
		t.Fatal(err)
	}
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatalf("a legacy deny_purge stream does not open: %v", err)
	}
	if err := l.CheckStream(ctx); err != nil {
		t.Errorf("legacy stream reported as drift: %v", err)
	}
	old, err := l.Append(ctx, "old", 0, toggled("old"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := l.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Erase(ctx, "old", closeSession(t, l, "old", old.Last))
	if !errors.Is(err, jetstream.ErrPurgeDenied) || !strings.Contains(err.Error(), "deny_purge") || !strings.Contains(err.Error(), "create the stream anew") {
		t.Fatalf("erase on a legacy stream: %v", err)
	}
	if got := rawSubject(t, l, l.StreamName(), l.Subject("old")); len(got) != 2 {
		t.Errorf("events of old: %v, want its event and its SessionDeleted", got)
	}
	if erased, _ := x.Erased(ctx, "old"); erased {
		t.Error("an audit record claims the refused erase")
	}
}

// An erase finds the session's events on the stream's
// leader, not on a replica behind it, which answers "none" for a session
// written since: the erase then purged nothing and reported the session
// erased (Purged 0, an audit record, every later read "erased") while
// its events stayed in the stream. And the erased ranges an audit lists
// are read from the audit stream's leader, whole.
func TestErasePastLaggingReplica(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	natstest.LaggingReplica(t, l)
	x, err := l.NewEraser(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The audit stream lags too: its mirror holds only the first erase's
	// record.
	first, err := l.Append(ctx, "first-erased", 0, toggled("first-erased"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Erase(ctx, "first-erased", closeSession(t, l, "first-erased", first.Last)); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingMirror(t, l.JetStream(), x.AuditStream(), x.AuditSubject("first-erased"))
	ranges := 1
	for i := 0; i < 12; i++ {
		s := fmt.Sprintf("gdpr-%d", i)
		res, err := l.Append(ctx, s, 0, toggled(s), toggled(s))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := x.Erase(ctx, s, closeSession(t, l, s, res.Last))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Purged != 2 || rep.FirstSeq != res.First || rep.LastSeq != res.Last {
			t.Fatalf("%s: erase report %+v, want 2 events purged, %d..%d", s, rep, res.First, res.Last)
		}
		ranges++
		info, err := l.JetStream().Stream(ctx, l.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		st, err := info.Info(ctx, njs.WithSubjectFilter(l.Subject(s)))
		if err != nil {
			t.Fatal(err)
		}
		if n := st.State.Subjects[l.Subject(s)]; n != 1 {
			t.Fatalf("%s: %d events left in the stream after the erase, want its SessionDeleted only", s, n)
		}
		for j := 0; j < 4; j++ {
			got, err := l.ErasedRanges(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != ranges {
				t.Fatalf("%s: %d erased ranges listed, want %d", s, len(got), ranges)
			}
		}
	}
}
