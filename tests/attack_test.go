// Red-team tests: the deploy configuration's
// trusted backend user publishes events that break an invariant straight
// to tools.events.<session>. Each must be kept in the log, not applied, and
// reported with its sequence and reason identically by the serving
// engine's projection, by a fresh replay (history over direct gets, and an
// ordered-consumer fold of the whole log), and by a second engine whose own
// projection folds the log from the first event (a rebuild); the engine
// stays up and no other session changes. Helpers are prefixed attack.

package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// attackEnv is `engine serve` with the deploy configuration, the backend
// user's connection, and a second engine in this process.
type attackEnv struct {
	p       *engineProc
	hc      *engineClient
	backend *permConn
	bjs     njs.JetStream
	// The second engine: its own connection (as admin: the engine user may
	// write only the engine's own buckets, and this one folds into a bucket
	// of its own), log, projection (durable "attack-b", bucket ATTACKB,
	// folding from the first event) and service.
	logB  *jetstream.Log
	projB *projection.Projection
	engB  *service.Engine
	// bystander is a session no attack touches, as read before them.
	bystander wire.Session
}

const (
	attackVictim    = "victim"
	attackBystander = "bystander"
)

func attackStart(t *testing.T) *attackEnv {
	t.Helper()
	conf, err := filepath.Abs(permConfig)
	if err != nil {
		t.Fatal(err)
	}
	pw := permUsers(t, conf)
	a := &attackEnv{p: startEngine(t, t.TempDir(), "--server-config", conf, "--nats-user", "engine", "--nats-password", pw["engine"].password)}
	a.hc = a.p.Client("web")
	a.backend = permConnect(t, a.p.NATSURL, "backend", pw["backend"])
	if a.bjs, err = njs.New(a.backend.nc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	nc := natstest.Connect(t, a.p.NATSURL, nats.UserInfo("admin", pw["admin"].password), nats.Name("attack-engine-b"))
	if a.logB, err = jetstream.OpenLog(ctx, nc, jetstream.LogConfig{}); err != nil {
		t.Fatal(err)
	}
	if a.projB, err = projection.Open(ctx, a.logB, projection.Config{Durable: "attack-b", Bucket: "ATTACKB"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.projB.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second engine's projection: %v", err)
		}
	})
	a.engB = service.New(a.logB, a.projB, resolver.Default(), service.Config{})

	res, err := a.hc.Append(ctx, attackBystander, nil, events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if a.bystander, err = a.hc.Intent(ctx, attackBystander, res.LastSeq); err != nil {
		t.Fatal(err)
	}
	return a
}

// prepare writes a victim session through the API: intent, turn 1 begun
// and, unless open, ended (with its checkpoint). It returns the view.
func (a *attackEnv) prepare(t *testing.T, open bool) wire.Session {
	t.Helper()
	ctx := e2eCtx(t)
	if _, err := a.hc.Append(ctx, attackVictim, nil, events.ToolsToggled{Enabled: e2eBool(true)}, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.hc.BeginTurn(ctx, wire.BeginTurnRequest{Session: attackVictim}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.hc.Discover(ctx, attackVictim, "", "send_message"); err != nil {
		t.Fatal(err)
	}
	if !open {
		if _, err := a.hc.EndTurn(ctx, attackVictim); err != nil {
			t.Fatal(err)
		}
	}
	h, err := a.hc.History(ctx, wire.HistoryRequest{Session: attackVictim})
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.hc.Intent(ctx, attackVictim, h.State.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if v.Turn != 1 || v.InTurn != open || v.Rejected != 0 || v.Skipped != 0 || len(v.Loaded) != 1 {
		t.Fatalf("victim before the attack: %+v", v)
	}
	return v
}

// publish publishes body to the victim's subject as the backend, after the
// session's last sequence (a well-behaved writer's CAS header), with
// Nats-Msg-Id msgID ("" for none), and returns the stored sequence.
func (a *attackEnv) publish(t *testing.T, after uint64, msgID string, body []byte) uint64 {
	t.Helper()
	m := nats.NewMsg("tools.events." + attackVictim)
	m.Data = body
	if msgID != "" {
		m.Header.Set("Nats-Msg-Id", msgID)
	}
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(after))
	ack, err := a.bjs.PublishMsg(e2eCtx(t), m)
	if err != nil {
		t.Fatalf("backend publish after %d: %v", after, err)
	}
	if ack.Duplicate || ack.Sequence <= after {
		t.Fatalf("backend publish ack %+v, want a new message after %d", ack, after)
	}
	return ack.Sequence
}

// attackBad is one published event that must not be applied.
type attackBad struct {
	seq  uint64
	id   string
	typ  string
	kind string // aggregate.KindRejected or KindSkipped
	// reason is a part of the reason every report must give.
	reason string
	body   []byte
}

// attackReport is what a fold reports about a session.
type attackReport struct {
	Seq                      uint64
	Events, Skipped, Rejects uint64
	Rejections               []aggregate.Rejection
	Intent                   string
	Loaded                   []string
	Turn                     uint64
	InTurn                   bool
	Checkpoint               uint64
}

func attackReportOfView(v wire.Session) attackReport {
	in, _ := json.Marshal(v.Intent)
	r := attackReport{Seq: v.Seq, Events: v.Events, Skipped: v.Skipped, Rejects: v.Rejected, Intent: string(in),
		Loaded: crashNonNil(v.Loaded), Turn: v.Turn, InTurn: v.InTurn}
	for _, x := range v.Rejections {
		r.Rejections = append(r.Rejections, aggregate.Rejection{Seq: x.Seq, ID: x.ID, Type: x.Type, Kind: x.Kind, Reason: x.Reason})
	}
	if v.Checkpoint != nil {
		r.Checkpoint = v.Checkpoint.Seq
	}
	return r
}

func attackReportOfState(st aggregate.State) attackReport {
	in, _ := json.Marshal(st.Intent)
	r := attackReport{Seq: st.LastSeq, Events: st.Events, Skipped: st.Skipped, Rejects: st.Rejected, Intent: string(in),
		Loaded: crashNonNil(st.Loaded), Turn: st.Turn, InTurn: st.InTurn, Rejections: st.Rejections}
	if st.Checkpoint != nil {
		r.Checkpoint = st.Checkpoint.Seq
	}
	return r
}

// check verifies what a bad event published after the victim's view
// before must leave unchanged.
func (a *attackEnv) check(t *testing.T, before wire.Session, bad ...attackBad) {
	t.Helper()
	ctx := e2eCtx(t)
	last := bad[len(bad)-1].seq

	// Kept in the log: the backend reads each event back by direct get.
	stored := map[string][]byte{}
	for _, m := range permDirectRead(t, a.backend.nc, attackVictim) {
		stored[m.Header.Get("Nats-Sequence")] = m.Data
	}
	for _, b := range bad {
		if got, ok := stored[fmt.Sprint(b.seq)]; !ok || string(got) != string(b.body) {
			t.Fatalf("seq %d is not in the log as published (found %v)", b.seq, ok)
		}
	}

	// Not applied, and reported by the serving engine's projection.
	view, err := a.hc.Intent(ctx, attackVictim, last)
	if err != nil {
		t.Fatal(err)
	}
	got, want := attackReportOfView(view), attackReportOfView(before)
	want.Seq = last
	var tail []aggregate.Rejection
	for i, b := range bad {
		if b.kind == aggregate.KindRejected {
			want.Rejects++
		} else {
			want.Skipped++
		}
		if len(got.Rejections) < len(bad) {
			break
		}
		r := got.Rejections[len(got.Rejections)-len(bad)+i]
		if r.Seq != b.seq || r.ID != b.id || r.Type != b.typ || r.Kind != b.kind || !strings.Contains(r.Reason, b.reason) {
			t.Errorf("reported %+v, want seq %d id %s type %s kind %s with a reason naming %q", r, b.seq, b.id, b.typ, b.kind, b.reason)
		}
		tail = append(tail, r)
	}
	want.Rejections = append(want.Rejections, tail...)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the serving engine's view after the attack:\n got %+v\nwant %+v (the view before, nothing applied, each event reported)", got, want)
	}

	// The direct publisher learns it from the session view, over the API
	// channel its user may read (deploy/accounts.conf).
	bc := newNATSEngineClient(a.backend.nc, client.WithChannel("backend"))
	if bv, err := bc.Intent(ctx, attackVictim, last); err != nil || !reflect.DeepEqual(attackReportOfView(bv), got) {
		t.Errorf("the backend's read of the view: %+v, %v", bv, err)
	}
	if bh, err := bc.History(ctx, wire.HistoryRequest{Session: attackVictim}); err != nil || !reflect.DeepEqual(attackReportOfView(bh.State), got) {
		t.Errorf("the backend's read of the history: %+v, %v", bh.State, err)
	}

	// The same report from a fresh replay over direct gets (history),
	// whose entries name the reason too.
	h, err := a.hc.History(ctx, wire.HistoryRequest{Session: attackVictim})
	if err != nil {
		t.Fatal(err)
	}
	if hr := attackReportOfView(h.State); !reflect.DeepEqual(hr, got) {
		t.Errorf("history's fold:\n got %+v\nwant %+v", hr, got)
	}
	entries := map[uint64]wire.HistoryEntryOf[*service.Command]{}
	for _, e := range h.Entries {
		entries[e.Seq] = e
	}
	for _, b := range bad {
		e := entries[b.seq]
		if e.Seq != b.seq || !strings.Contains(e.Error, b.reason) || e.Rejected != (b.kind == aggregate.KindRejected) {
			t.Errorf("history entry %d: seq %d error %q rejected %v; want the reason naming %q", b.seq, e.Seq, e.Error, e.Rejected, b.reason)
		}
	}
	// ... from an ordered-consumer replay of the whole log ...
	if rr := attackReportOfState(natstest.FoldLog(t, a.logB)[attackVictim]); !reflect.DeepEqual(rr, got) {
		t.Errorf("replay of the log:\n got %+v\nwant %+v", rr, got)
	}
	// ... and from the second engine's projection, which folded the log
	// from the first event with its own durable feed.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := a.projB.WaitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	stB, err := a.projB.Read(ctx, attackVictim, projection.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if br := attackReportOfState(stB); !reflect.DeepEqual(br, got) {
		t.Errorf("second engine's projection:\n got %+v\nwant %+v", br, got)
	}
	if stB2, err := a.engB.Session(ctx, attackVictim, last); err != nil || !reflect.DeepEqual(attackReportOfState(stB2), got) {
		t.Errorf("second engine's session read: %+v, %v", stB2, err)
	}

	// Later events still apply.
	id := ulid.Make().String()
	next := a.publish(t, last, id, e2eWireBody(t, id, attackVictim, "backend", "svc:billing", "PresetChosen", map[string]any{"preset": "coding"}))
	after, err := a.hc.Intent(ctx, attackVictim, next)
	if err != nil {
		t.Fatal(err)
	}
	if after.Intent.Preset != "coding" || after.Events != view.Events+1 || after.Seq != next {
		t.Fatalf("a valid event after the attack: %+v, want it applied", after)
	}

	// No other session changed, on either engine.
	by, err := a.hc.Intent(ctx, attackBystander, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(attackReportOfView(by), attackReportOfView(a.bystander)) {
		t.Errorf("bystander changed:\n got %+v\nwant %+v", by, a.bystander)
	}
	// Across engines the read names the sequence it must include.
	if byB, err := a.engB.Session(ctx, attackBystander, a.bystander.Seq); err != nil || !reflect.DeepEqual(attackReportOfState(byB), attackReportOfView(a.bystander)) {
		t.Errorf("bystander on the second engine: %+v, %v", byB, err)
	}

	// The engine is up, and counted what it did not apply.
	select {
	case <-a.p.exited:
		t.Fatalf("engine exited: %v\n%s", a.p.exitErr, a.p.Stderr)
	default:
	}
	resp, err := http.Get(a.p.HTTPURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz %d after the attack", resp.StatusCode)
	}
	// The projection's feed reports what it did not apply when it folds
	// the events, which a paced feed does up to its pace after a
	// read that folded them from the log: wait for the counts.
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		m := scrape(t, a.p.HTTPURL)
		if m["engine_rejected_events_total"] != float64(want.Rejects) || m["engine_undecodable_events_total"] != float64(want.Skipped) {
			return fmt.Errorf("metrics: %v rejected, %v undecodable; want %d, %d", m["engine_rejected_events_total"], m["engine_undecodable_events_total"], want.Rejects, want.Skipped)
		}
		return nil
	})
	// ... and logged each event with its sequence.
	a.p.Stop(t)
	logs := a.p.Stderr.String()
	for _, b := range bad {
		if !strings.Contains(logs, fmt.Sprintf(`"seq":%d,`, b.seq)) || !strings.Contains(logs, "event "+b.kind) {
			t.Errorf("no log line for seq %d (%s):\n%s", b.seq, b.kind, logs)
		}
	}
}

// attackBody is a wire-format body by the backend.
func attackBody(t *testing.T, id, typ string, data map[string]any) []byte {
	return e2eWireBody(t, id, attackVictim, "backend", "svc:billing", typ, data)
}

// attackOne publishes one bad event (Nats-Msg-Id = its id) and checks it.
func (a *attackEnv) attackOne(t *testing.T, before wire.Session, typ string, data map[string]any, reason string) {
	t.Helper()
	id := ulid.Make().String()
	body := attackBody(t, id, typ, data)
	seq := a.publish(t, before.Seq, id, body)
	a.check(t, before, attackBad{seq: seq, id: id, typ: typ, kind: aggregate.KindRejected, reason: reason, body: body})
}

// realContract is the victim's contract under the embedded registry, as
// a checkpoint records it.
func realContract(t *testing.T) (string, string, []map[string]any) {
	t.Helper()
	reg := resolver.Default()
	res, err := reg.Resolve(resolver.Request{Session: intent.Intent{Enabled: e2eBool(true), Disabled: []string{"grep"}}})
	if err != nil {
		t.Fatal(err)
	}
	var c []map[string]any
	for _, tl := range res.Tools {
		c = append(c, map[string]any{"name": tl.Name, "hash": resolver.ToolHash(tl)})
	}
	return res.ContractHash, res.RegistryVersion, c
}

// The frozen-list failure the design forbids: the 21 defaults stored as a
// picked list.
func TestAttackDirectPublishMaterializedPicked(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	defaults := resolver.Default().DefaultTools()
	if len(defaults) != 21 {
		t.Fatalf("the embedded registry has %d defaults, the attack wants 21", len(defaults))
	}
	a.attackOne(t, before, "ToolsPicked", map[string]any{"names": defaults}, "ToolsPicked has 21 names, at most 16")
}

// A tool_search load after the turn ended.
func TestAttackDirectPublishLoadOutsideTurn(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	a.attackOne(t, before, "DeferredLoaded", map[string]any{"names": []string{"playwright_browser"}, "turn": 1}, "DeferredLoaded outside a turn")
}

// A load that names another turn than the open one.
func TestAttackDirectPublishLoadInAnotherTurn(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, true)
	a.attackOne(t, before, "DeferredLoaded", map[string]any{"names": []string{"playwright_browser"}, "turn": 7}, "DeferredLoaded turn 7, want the open turn 1")
}

// A checkpoint that loads tools and records no contract.
func TestAttackDirectPublishCheckpointWithoutContract(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	hash, version, _ := realContract(t)
	a.attackOne(t, before, "CheckpointRecorded", map[string]any{"loaded_deferred_tools": []string{"send_message", "playwright_browser"},
		"contract_hash": hash, "registry_version": version, "turn": 1}, `loads "send_message" but records no contract`)
}

// A checkpoint whose contract hash is "x".
func TestAttackDirectPublishCheckpointBadHash(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	_, version, contract := realContract(t)
	a.attackOne(t, before, "CheckpointRecorded", map[string]any{"loaded_deferred_tools": []string{"send_message"},
		"contract_hash": "x", "registry_version": version, "turn": 1, "contract": contract}, `contract_hash "x" is not 64 lower-case hex digits`)
}

// A checkpoint of a turn that has not started.
func TestAttackDirectPublishCheckpointFutureTurn(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	hash, version, contract := realContract(t)
	a.attackOne(t, before, "CheckpointRecorded", map[string]any{"loaded_deferred_tools": []string{"send_message"},
		"contract_hash": hash, "registry_version": version, "turn": 5, "contract": contract}, "at turn 5, after the last started turn 1")
}

// TurnStarted{turn: 2^64-1}: applied, the next turn would wrap to 0 and the
// session would be stuck. It is rejected, and the next turn begins.
func TestAttackDirectPublishTurnWrap(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	id := ulid.Make().String()
	body := attackBody(t, id, "TurnStarted", map[string]any{"turn": uint64(math.MaxUint64)})
	seq := a.publish(t, before.Seq, id, body)
	// The session is not stuck: the next turn through the API is 2.
	ctx := e2eCtx(t)
	if _, err := a.hc.Intent(ctx, attackVictim, seq); err != nil {
		t.Fatal(err)
	}
	turn, err := a.hc.BeginTurn(ctx, wire.BeginTurnRequest{Session: attackVictim})
	if err != nil || turn.Turn != 2 {
		t.Fatalf("begin turn after the attack: turn %d, %v; want 2", turn.Turn, err)
	}
	// Check the attack against the session as the API left it: the
	// rejection is still listed, reported alike everywhere.
	v, err := a.hc.Intent(ctx, attackVictim, turn.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if v.Rejected != 1 || len(v.Rejections) != 1 || v.Rejections[0].Seq != seq || !strings.Contains(v.Rejections[0].Reason, "TurnStarted turn 18446744073709551615, want the next turn 2") {
		t.Fatalf("after the attack and a new turn: %+v", v)
	}
	// A second wrap attempt, now in turn 2, is checked in full.
	id2 := ulid.Make().String()
	body2 := attackBody(t, id2, "TurnStarted", map[string]any{"turn": uint64(math.MaxUint64)})
	seq2 := a.publish(t, v.Seq, id2, body2)
	a.check(t, v, attackBad{seq: seq2, id: id2, typ: "TurnStarted", kind: aggregate.KindRejected, reason: "want the next turn 3", body: body2})
}

// A TurnEnded with no turn open.
func TestAttackDirectPublishTurnEndedWithoutTurn(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	a.attackOne(t, before, "TurnEnded", map[string]any{"turn": 1}, "TurnEnded turn 1, but no turn is open")
}

// Events that do not say who wrote them (the audit trail).
func TestAttackDirectPublishWithoutChannelOrActor(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	id1, id2 := ulid.Make().String(), ulid.Make().String()
	b1 := e2eWireBody(t, id1, attackVictim, "", "svc:billing", "ToolDisabled", map[string]any{"name": "bash"})
	s1 := a.publish(t, before.Seq, id1, b1)
	b2 := e2eWireBody(t, id2, attackVictim, "backend", "", "ToolDisabled", map[string]any{"name": "bash"})
	s2 := a.publish(t, s1, id2, b2)
	a.check(t, before,
		attackBad{seq: s1, id: id1, typ: "ToolDisabled", kind: aggregate.KindSkipped, reason: "a version-2 event names both", body: b1},
		attackBad{seq: s2, id: id2, typ: "ToolDisabled", kind: aggregate.KindSkipped, reason: "a version-2 event names both", body: b2})
}

// A Nats-Msg-Id that differs from the envelope id: the server
// deduplicated it as another event.
func TestAttackDirectPublishMsgIDMismatch(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	id, other := ulid.Make().String(), ulid.Make().String()
	body := attackBody(t, id, "ToolDisabled", map[string]any{"name": "bash"})
	seq := a.publish(t, before.Seq, other, body)
	a.check(t, before, attackBad{seq: seq, id: id, typ: "ToolDisabled", kind: aggregate.KindRejected, reason: fmt.Sprintf("with Nats-Msg-Id %q", other), body: body})
}

// No Nats-Msg-Id at all: a retried publish would be stored twice.
func TestAttackDirectPublishWithoutMsgID(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	id := ulid.Make().String()
	body := attackBody(t, id, "ToolDisabled", map[string]any{"name": "bash"})
	seq := a.publish(t, before.Seq, "", body)
	a.check(t, before, attackBad{seq: seq, id: id, typ: "ToolDisabled", kind: aggregate.KindRejected, reason: "without a Nats-Msg-Id header", body: body})
}

// The API gap of the same item: a CheckpointRecorded command naming a
// resident tool was accepted; it is refused, and so is one whose contract
// does not add up to its hash. Nothing is written.
func TestAttackAPICheckpointResidentTool(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	hash, version, contract := realContract(t)
	var entries []events.ContractEntry
	for _, c := range contract {
		entries = append(entries, events.ContractEntry{Name: c["name"].(string), Hash: c["hash"].(string)})
	}
	ctx := e2eCtx(t)
	for _, c := range []struct {
		cmd  events.CheckpointRecorded
		want string
	}{
		{events.CheckpointRecorded{Loaded: []string{"read_file"}, ContractHash: hash, RegistryVersion: version, Turn: 1, Contract: entries}, `"read_file" is resident`},
		{events.CheckpointRecorded{Loaded: []string{"send_message"}, ContractHash: strings.Repeat("0", 64), RegistryVersion: version, Turn: 1, Contract: entries}, "add up to"},
		{events.CheckpointRecorded{Loaded: []string{"send_message"}, ContractHash: "x", RegistryVersion: version, Turn: 1, Contract: entries}, `contract_hash "x"`},
	} {
		_, err := a.hc.Append(ctx, attackVictim, nil, c.cmd)
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("append %+v: %v; want 400 naming %q", c.cmd.Loaded, err, c.want)
		}
	}
	// The engine's own checkpoint of the same contract is accepted.
	if _, err := a.hc.Append(ctx, attackVictim, nil, events.CheckpointRecorded{Loaded: []string{"send_message"}, ContractHash: hash, RegistryVersion: version, Turn: 1, Contract: entries}); err != nil {
		t.Fatalf("a valid checkpoint: %v", err)
	}
	v, err := a.hc.Intent(ctx, attackVictim, before.Seq+1)
	if err != nil || v.Seq != before.Seq+1 || v.Rejected != 0 {
		t.Fatalf("after the refused commands: %+v, %v; want only the valid checkpoint written", v, err)
	}
}
