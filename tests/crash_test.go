package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Crash tests: the built `engine` binary runs as a child process, two
// goroutines drive eight sessions through turns with discoveries and intent
// changes, and the process is SIGKILLed at chosen points (right after an
// append returns, mid-turn after a discovery, right after a checkpoint or
// end turn, while a call is in flight once its event is published, and when
// the projection is handed an event it has not folded yet) and restarted on
// the same data directory. After every restart the test checks
// what the engine acknowledged against the log, the projection against the
// fold, and resume against the last acknowledged checkpoint. A final
// restart with a changed registry checks that resume drops the changed tool
// alone and says why per tool.
//
// Set CRASH_SEED to replay a run's choices (the interleaving of the two
// goroutines and the kill timing still vary).

// crashTimeout bounds one API call.
const crashTimeout = 20 * time.Second

// crashCatchUp bounds how long the projection may take to reach the fold
// after a restart: far more than a healthy catch-up of a few hundred
// events, and less than the feed's AckWait (30 s), so that a projection
// that only recovers when JetStream redelivers fails.
const crashCatchUp = 20 * time.Second

// crashReadyWithin bounds how long a restarted engine may take to report
// ready; a healthy restart on these data directories takes well under a
// second.
const crashReadyWithin = 10 * time.Second

// crashToggles are the tools intent changes disable and enable again. None
// is deferred, so the deferred tools stay in every session's contract;
// memory_read is not a default tool, so toggling it changes the intent but
// not the contract.
var crashToggles = []string{"notebook_edit", "diagnostics", "list_sessions", "memory_read"}

// crashDeferred are the deferred default tools sessions discover.
var crashDeferred = []string{"send_message", "playwright_browser", "enter_plan_mode", "exit_plan_mode"}

// crashCP is an acknowledged checkpoint.
type crashCP struct {
	loaded []string
	hash   string
	seq    uint64
}

// crashPending is the call a session had in flight when the engine died:
// its events may or may not be in the log, all or none.
type crashPending struct {
	op    string
	types []events.Type
	cmds  []events.Payload // append
	newly []string         // discover: the names it would load
}

// crashSession is the test's model of one session, built only from
// acknowledged results. It is touched by one goroutine at a time.
type crashSession struct {
	id       string
	intent   intent.Intent
	loaded   []string // sorted
	turn     uint64
	inTurn   bool
	turnHash string // contract hash the open turn was frozen with
	cp       *crashCP
	acked    map[uint64]events.Type
	maxSeq   uint64
	pending  *crashPending
}

func newCrashSession(id string) *crashSession {
	return &crashSession{id: id, acked: map[uint64]events.Type{}}
}

// ack records the events of one acknowledged append, the last at seq last:
// a multi-event append is one atomic batch, so its events are consecutive.
func (s *crashSession) ack(last uint64, types ...events.Type) error {
	n := uint64(len(types))
	if last < n || last-n+1 <= s.maxSeq {
		return fmt.Errorf("%s: acknowledged %v ending at seq %d, but the session is already at %d", s.id, types, last, s.maxSeq)
	}
	for i, typ := range types {
		s.acked[last-n+1+uint64(i)] = typ
	}
	s.maxSeq = last
	return nil
}

// crashStats counts what a run covered.
type crashStats struct {
	kills, restarts, acked, ops int
	landed, lost                int // in-flight calls whose events were / were not stored
	restored, empty, dropped    int // resume outcomes; dropped: post-checkpoint discoveries not restored
	perToolAll, perToolSome     int // contract changed: every loaded tool kept / some dropped
	killKinds                   map[string]int
	catchUp                     time.Duration // longest projection catch-up seen
}

func crashFold(in intent.Intent, cmds ...events.Payload) intent.Intent {
	out := in
	out.Disabled = slices.Clone(in.Disabled)
	for _, c := range cmds {
		switch v := c.(type) {
		case events.ToolDisabled:
			if !slices.Contains(out.Disabled, v.Name) {
				out.Disabled = append(out.Disabled, v.Name)
				slices.Sort(out.Disabled)
			}
		case events.ToolEnabled:
			out.Disabled = slices.DeleteFunc(out.Disabled, func(n string) bool { return n == v.Name })
			if len(out.Disabled) == 0 {
				out.Disabled = nil
			}
		case events.WebSearchSet:
			out.WebSearch = v.Enabled
		}
	}
	return out
}

func crashOn(b bool) *bool { return &b }

func crashBoolEq(a, b *bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func crashIntentEq(a, b intent.Intent) bool {
	return crashBoolEq(a.Enabled, b.Enabled) && crashBoolEq(a.WebSearch, b.WebSearch) && a.Preset == b.Preset &&
		slices.Equal(a.Disabled, b.Disabled) && slices.Equal(a.Picked, b.Picked)
}

func crashIntentString(in intent.Intent) string {
	b, _ := json.Marshal(in)
	return string(b)
}

// crashIntentChange returns one or two commands that each change in
// (none is a no-op), on distinct targets.
func crashIntentChange(rng *rand.Rand, in intent.Intent) []events.Payload {
	n := 1 + rng.IntN(2)
	targets := append(slices.Clone(crashToggles), resolver.WebSearch)
	rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	var cmds []events.Payload
	cur := in
	for _, tg := range targets[:n] {
		var c events.Payload
		switch {
		case tg == resolver.WebSearch && cur.WebSearch == nil:
			c = events.WebSearchSet{Enabled: crashOn(true)}
		case tg == resolver.WebSearch && *cur.WebSearch:
			c = events.WebSearchSet{Enabled: crashOn(false)}
		case tg == resolver.WebSearch:
			c = events.WebSearchSet{}
		case slices.Contains(cur.Disabled, tg):
			c = events.ToolEnabled{Name: tg}
		default:
			c = events.ToolDisabled{Name: tg}
		}
		cmds = append(cmds, c)
		cur = crashFold(cur, c)
	}
	return cmds
}

// crashPerTool is the per-tool resume rule computed by the test with the resolver
// library: of a checkpoint's loaded tools, recorded under registry was,
// those that the contract reg gives the intent has deferred with the
// per-tool hash they had then.
func crashPerTool(was, reg *resolver.Registry, in intent.Intent, loaded []string) []string {
	res, err := reg.Resolve(resolver.Request{Session: in})
	if err != nil {
		return nil
	}
	out := []string{}
	for _, n := range loaded {
		then, ok := was.Tool(n)
		for _, t := range res.Tools {
			if t.Name == n && ok && t.Deferred && resolver.ToolHash(t) == resolver.ToolHash(then) {
				out = append(out, n)
			}
		}
	}
	return out
}

// crashContract is the contract the default registry gives an intent,
// computed by the test with the resolver library, not asked of the engine.
func crashContract(reg *resolver.Registry, in intent.Intent) (hash string, deferred []string, err error) {
	res, err := reg.Resolve(resolver.Request{Session: in})
	if err != nil {
		return "", nil, err
	}
	for _, t := range res.Tools {
		if t.Deferred && t.Name != resolver.ToolSearch {
			deferred = append(deferred, t.Name)
		}
	}
	return res.ContractHash, deferred, nil
}

func crashSubset(sub, set []string) bool {
	for _, n := range sub {
		if !slices.Contains(set, n) {
			return false
		}
	}
	return true
}

func crashUnion(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func crashNonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// crashIsAnswer says whether err is the engine's answer (an *api.APIError)
// rather than a transport failure.
func crashIsAnswer(err error) bool {
	var ae *api.APIError
	return errors.As(err, &ae)
}

// Kill kinds.
const (
	killAfterAppend     = "after-append"     // between an append and its projection
	killMidTurn         = "mid-turn"         // after a discovery, before the turn ends
	killAfterCheckpoint = "after-checkpoint" // right after a checkpoint / end turn
	// killInFlight kills while a call is in flight: when the engine's
	// publish of an event reaches a subscriber on the session's subject,
	// before the call is acknowledged (the first event of a batch, for a
	// multi-event append).
	killInFlight = "in-flight"
	// killBeforeProjection kills when the projection's durable consumer
	// is handed an event, before it has folded and acknowledged it.
	killBeforeProjection = "before-projection"
)

// crashProjectionAck starts the reply subject of a delivery to the
// projection's durable consumer ("views") on the events stream.
const crashProjectionAck = "$JS.ACK.TOOLS_EVENTS.views."

// crashChoose picks s's next operation; force, when not "", steers toward
// that kill kind, and hit says the chosen operation is of that kind.
func crashChoose(rng *rand.Rand, s *crashSession, force string) (op string, hit bool) {
	switch force {
	case killAfterAppend:
		if !s.inTurn {
			return "append", true
		}
		return "end", false
	case killMidTurn:
		if s.inTurn {
			return "discover", true
		}
		return "begin", false
	case killAfterCheckpoint:
		if !s.inTurn {
			return "begin", false
		}
		if rng.IntN(2) == 0 {
			return "end", true
		}
		return "checkpoint", true
	}
	r := rng.IntN(100)
	switch {
	case !s.inTurn && r < 30:
		return "append", false
	case !s.inTurn:
		return "begin", false
	case r < 8:
		return "append", false // an intent change inside a frozen turn
	case r < 40:
		return "discover", false
	case r < 58:
		return "dispatch", false
	case r < 78:
		return "checkpoint", false
	}
	return "end", false
}

// crashOp is one operation: op is append, begin, discover, dispatch,
// checkpoint or end.
type crashOp struct {
	op string
	// names are discover's names (nil: random; fresh then adds one the
	// session has not loaded).
	names []string
	fresh bool
	// cmds are append's commands (nil: a random intent change).
	cmds []events.Payload
}

// crashRun runs o on s and updates the model from the acknowledged result.
// err is the call's error (s.pending then says what was in flight); model
// mismatches are reported with t.Errorf.
func crashRun(ctx context.Context, t *testing.T, c *engineClient, reg *resolver.Registry, s *crashSession, rng *rand.Rand, o crashOp) error {
	op, names, fresh := o.op, o.names, o.fresh
	ctx, cancel := context.WithTimeout(ctx, crashTimeout)
	defer cancel()
	fail := func(format string, args ...any) {
		t.Errorf("%s %s: "+format, append([]any{s.id, op}, args...)...)
	}

	switch op {
	case "append":
		cmds := o.cmds
		if cmds == nil {
			cmds = crashIntentChange(rng, s.intent)
		}
		types := make([]events.Type, len(cmds))
		for i, c := range cmds {
			types[i] = c.EventType()
		}
		s.pending = &crashPending{op: op, types: types, cmds: cmds}
		r, err := c.Append(ctx, s.id, nil, cmds...)
		if err != nil {
			return err
		}
		s.pending = nil
		if r.FirstSeq == 0 || r.LastSeq-r.FirstSeq != uint64(len(cmds)-1) {
			fail("appended %d commands atomically, got seqs %d..%d", len(cmds), r.FirstSeq, r.LastSeq)
		}
		if err := s.ack(r.LastSeq, types...); err != nil {
			fail("%v", err)
		}
		s.intent = crashFold(s.intent, cmds...)
		if !crashIntentEq(r.State.Intent, s.intent) || r.State.Seq != r.LastSeq {
			fail("state after append is seq %d intent %s, want seq %d intent %s", r.State.Seq, crashIntentString(r.State.Intent), r.LastSeq, crashIntentString(s.intent))
		}

	case "begin":
		hash, _, herr := crashContract(reg, s.intent)
		if herr != nil {
			fail("resolve: %v", herr)
		}
		s.pending = &crashPending{op: op, types: []events.Type{events.TypeTurnStarted}}
		v, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s.id})
		if err != nil {
			return err
		}
		s.pending = nil
		if err := s.ack(v.Seq, events.TypeTurnStarted); err != nil {
			fail("%v", err)
		}
		if !v.Frozen || v.Turn != s.turn+1 {
			fail("frozen %v turn %d, want frozen turn %d", v.Frozen, v.Turn, s.turn+1)
		}
		if v.ContractHash != hash {
			fail("turn contract %s, want %s for intent %s", v.ContractHash, hash, crashIntentString(s.intent))
		}
		if !crashSubset(s.loaded, v.Provider) {
			fail("loaded %v carried into the turn, provider tools are %v", s.loaded, v.Provider)
		}
		s.turn, s.inTurn, s.turnHash = v.Turn, true, v.ContractHash

	case "discover":
		if names == nil {
			var unloaded []string
			for _, d := range crashDeferred {
				if !slices.Contains(s.loaded, d) {
					unloaded = append(unloaded, d)
				}
			}
			if fresh && len(unloaded) > 0 {
				names = append(names, unloaded[rng.IntN(len(unloaded))]) // a discovery no checkpoint holds yet
			}
			for n := 1 + rng.IntN(2); len(names) < n; {
				names = append(names, crashDeferred[rng.IntN(len(crashDeferred))])
			}
		}
		var newly []string
		for _, nm := range names {
			if !slices.Contains(s.loaded, nm) && !slices.Contains(newly, nm) {
				newly = append(newly, nm)
			}
		}
		pend := &crashPending{op: op, newly: newly}
		if len(newly) > 0 {
			pend.types = []events.Type{events.TypeDeferredLoaded}
		}
		s.pending = pend
		r, err := c.Discover(ctx, s.id, "", names...)
		if err != nil {
			return err
		}
		s.pending = nil
		if !slices.Equal(r.Loaded, newly) {
			fail("discover %v loaded %v, want %v (already loaded %v)", names, r.Loaded, newly, s.loaded)
		}
		uniq := slices.Compact(slices.Sorted(slices.Values(names)))
		if len(r.Tools) != len(uniq) {
			fail("discover %v returned %d schemas, want %d", names, len(r.Tools), len(uniq))
		}
		for _, tl := range r.Tools {
			if len(tl.Parameters) == 0 {
				fail("discover returned %s without its schema", tl.Name)
			}
		}
		if len(newly) > 0 {
			if err := s.ack(r.View.Seq, events.TypeDeferredLoaded); err != nil {
				fail("%v", err)
			}
		}
		s.loaded = crashUnion(s.loaded, newly)
		// The next provider request of the turn carries what was discovered.
		if !slices.Equal(crashNonNil(r.View.Loaded), s.loaded) || !crashSubset(s.loaded, r.View.Provider) {
			fail("next request: loaded %v provider %v, want loaded %v all in provider", r.View.Loaded, r.View.Provider, s.loaded)
		}

	case "dispatch":
		provider := "anthropic"
		if rng.IntN(3) == 0 {
			provider = "openai"
		}
		v, err := c.Dispatch(ctx, s.id, provider)
		if err != nil {
			return err
		}
		if !v.Frozen || v.Turn != s.turn || v.ContractHash != s.turnHash {
			fail("dispatch frozen %v turn %d contract %s, want frozen turn %d contract %s", v.Frozen, v.Turn, v.ContractHash, s.turn, s.turnHash)
		}
		if !slices.Equal(crashNonNil(v.Loaded), s.loaded) || !crashSubset(s.loaded, v.Provider) ||
			slices.ContainsFunc(v.Catalog, func(n string) bool { return slices.Contains(s.loaded, n) }) {
			fail("dispatch loaded %v provider %v catalog %v, want loaded %v in provider and not in catalog", v.Loaded, v.Provider, v.Catalog, s.loaded)
		}
		// The dispatch's resident/deferred classification is inspectable.
		d, err := c.LastDispatch(ctx, s.id)
		if err != nil {
			return err
		}
		if d.Turn != s.turn || !slices.Equal(slices.Sorted(slices.Values(d.Loaded)), s.loaded) || d.ContractHash != v.ContractHash || len(d.Resident) == 0 {
			fail("last dispatch %+v, want turn %d loaded %v contract %s", d, s.turn, s.loaded, v.ContractHash)
		}

	case "checkpoint", "end":
		types := []events.Type{events.TypeCheckpointRecorded}
		if op == "end" {
			types = []events.Type{events.TypeTurnEnded} // Carrying the checkpoint
		}
		s.pending = &crashPending{op: op, types: types}
		var (
			r   wire.CheckpointReply
			err error
		)
		if op == "end" {
			r, err = c.EndTurn(ctx, s.id)
		} else {
			r, err = c.Checkpoint(ctx, s.id)
		}
		if err != nil {
			return err
		}
		s.pending = nil
		if err := s.ack(r.Seq, types...); err != nil {
			fail("%v", err)
		}
		// The checkpoint holds the loaded set and the hash of the
		// contract the turn was frozen with; every name is deferred in the
		// contract it lists.
		cp := r.Checkpoint
		if !slices.Equal(crashNonNil(cp.Loaded), s.loaded) || cp.ContractHash != s.turnHash || cp.Turn != s.turn || cp.RegistryVersion != reg.Version() {
			fail("checkpoint %v contract %s turn %d version %s, want %v contract %s turn %d version %s",
				cp.Loaded, cp.ContractHash, cp.Turn, cp.RegistryVersion, s.loaded, s.turnHash, s.turn, reg.Version())
		}
		var listed []string
		for _, e := range cp.Contract {
			listed = append(listed, e.Name)
		}
		if !crashSubset(cp.Loaded, listed) {
			fail("checkpoint loaded %v outside its contract %v", cp.Loaded, listed)
		}
		s.cp = &crashCP{loaded: slices.Clone(s.loaded), hash: cp.ContractHash, seq: r.Seq}
		if op == "end" {
			s.inTurn = false
		}
	default:
		panic("unknown op " + op)
	}
	return nil
}

// crashCheckLog reads the session's history after a restart and checks it
// against the model: every acknowledged event is there with its type, no
// event appears that nothing wrote, and an in-flight call stored all of its
// events or none (then the model takes them). It returns the fold's state.
func crashCheckLog(ctx context.Context, t *testing.T, c *engineClient, reg *resolver.Registry, s *crashSession, st *crashStats) wire.HistoryOf[*service.Command] {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, crashTimeout)
	defer cancel()
	h, err := c.History(ctx, wire.HistoryRequest{Session: s.id})
	if err != nil {
		t.Fatalf("%s: history: %v", s.id, err)
	}
	idx := make(map[uint64]int, len(h.Entries))
	for i, e := range h.Entries {
		if i > 0 && e.Seq <= h.Entries[i-1].Seq {
			t.Errorf("%s: history out of order at %d: seq %d after %d", s.id, i, e.Seq, h.Entries[i-1].Seq)
		}
		if e.Error != "" {
			t.Errorf("%s: history entry %d (%s) undecodable: %s", s.id, e.Seq, e.Type, e.Error)
		}
		idx[e.Seq] = i
	}
	// Every acknowledged event is in the log, once, with its type.
	for seq, typ := range s.acked {
		i, ok := idx[seq]
		if !ok {
			t.Errorf("%s: acknowledged %s at seq %d is not in the log (history has %d entries, last seq %d)", s.id, typ, seq, len(h.Entries), h.State.Seq)
			continue
		}
		if got := events.Type(h.Entries[i].Type); got != typ {
			t.Errorf("%s: seq %d is %s in the log, acknowledged as %s", s.id, seq, got, typ)
		}
	}
	var extra []wire.HistoryEntryOf[*service.Command]
	for _, e := range h.Entries {
		switch {
		case e.Seq > s.maxSeq:
			extra = append(extra, e)
		case s.acked[e.Seq] == "":
			t.Errorf("%s: seq %d (%s) is in the log but nothing acknowledged it", s.id, e.Seq, e.Type)
		}
	}
	if p := s.pending; p != nil {
		s.pending = nil
		got := make([]events.Type, len(extra))
		for i, e := range extra {
			got[i] = events.Type(e.Type)
		}
		switch {
		case len(extra) == 0:
			st.lost++
		case !slices.Equal(got, p.types):
			t.Errorf("%s: in-flight %s stored %v, want all of %v or nothing", s.id, p.op, got, p.types)
		default:
			st.landed++
			crashTakePending(t, reg, s, p, extra)
		}
	} else if len(extra) > 0 {
		t.Errorf("%s: %d events after the last acknowledged seq %d with no call in flight: first %d %s", s.id, len(extra), s.maxSeq, extra[0].Seq, extra[0].Type)
	}
	// The fold agrees with the model.
	v := h.State
	if v.Seq != s.maxSeq || !crashIntentEq(v.Intent, s.intent) || !slices.Equal(crashNonNil(v.Loaded), crashNonNil(s.loaded)) || v.InTurn != s.inTurn || v.Turn != s.turn {
		t.Errorf("%s: fold of the log is seq %d intent %s loaded %v turn %d in-turn %v; acknowledged: seq %d intent %s loaded %v turn %d in-turn %v",
			s.id, v.Seq, crashIntentString(v.Intent), v.Loaded, v.Turn, v.InTurn, s.maxSeq, crashIntentString(s.intent), s.loaded, s.turn, s.inTurn)
	}
	switch {
	case s.cp == nil && v.Checkpoint != nil:
		t.Errorf("%s: fold has checkpoint %+v, none acknowledged", s.id, *v.Checkpoint)
	case s.cp != nil && v.Checkpoint == nil:
		t.Errorf("%s: fold has no checkpoint, acknowledged %v at %d", s.id, s.cp.loaded, s.cp.seq)
	case s.cp != nil && (!slices.Equal(crashNonNil(v.Checkpoint.Loaded), s.cp.loaded) || v.Checkpoint.Seq != s.cp.seq || v.Checkpoint.ContractHash != s.cp.hash):
		t.Errorf("%s: fold's checkpoint %v at %d (%s), acknowledged %v at %d (%s)", s.id, v.Checkpoint.Loaded, v.Checkpoint.Seq, v.Checkpoint.ContractHash, s.cp.loaded, s.cp.seq, s.cp.hash)
	}
	// Read-your-writes right after the restart (no polling).
	if s.maxSeq > 0 {
		iv, err := c.Intent(ctx, s.id, s.maxSeq)
		if err != nil {
			t.Fatalf("%s: intent min_seq %d: %v", s.id, s.maxSeq, err)
		}
		if err := crashViewEq(iv, v); err != nil {
			t.Errorf("%s: intent with min_seq %d: %v%s", s.id, s.maxSeq, err, crashExplain(h, iv))
		}
	}
	return h
}

// crashExplain looks for the one event of the history whose absence from
// the fold gives the view, to say which event a wrong view is missing.
func crashExplain(h wire.HistoryOf[*service.Command], view wire.Session) string {
	fold := func(skip int) aggregate.State {
		st := aggregate.State{Session: h.Session}
		for i, e := range h.Entries {
			if i == skip || e.Payload == nil || e.Error != "" {
				continue
			}
			st.Apply(e.Seq, events.Envelope{Session: h.Session, Type: events.Type(e.Type), Payload: e.Payload.Payload})
		}
		return st
	}
	for i, e := range h.Entries {
		st := fold(i)
		if st.LastSeq == view.Seq && st.Events == view.Events && st.Turn == view.Turn && st.InTurn == view.InTurn &&
			crashIntentEq(st.Intent, view.Intent) && slices.Equal(crashNonNil(st.Loaded), crashNonNil(view.Loaded)) {
			return fmt.Sprintf(" (the view is the fold without seq %d, a %s written at %s)", e.Seq, e.Type, e.Time.Format("15:04:05.000"))
		}
	}
	return ""
}

// crashCheckpointOf is the checkpoint p records: a CheckpointRecorded, or
// a TurnEnded carrying one (how a turn end records it).
func crashCheckpointOf(p events.Payload) (events.CheckpointRecorded, bool) {
	switch v := p.(type) {
	case events.CheckpointRecorded:
		return v, true
	case events.TurnEnded:
		if v.Checkpoint != nil {
			return *v.Checkpoint, true
		}
	}
	return events.CheckpointRecorded{}, false
}

// crashTakePending applies an in-flight call that did store its events.
func crashTakePending(t *testing.T, reg *resolver.Registry, s *crashSession, p *crashPending, extra []wire.HistoryEntryOf[*service.Command]) {
	t.Helper()
	for _, e := range extra {
		s.acked[e.Seq] = events.Type(e.Type)
		s.maxSeq = e.Seq
	}
	payload := func(i int) events.Payload {
		if extra[i].Payload == nil {
			t.Errorf("%s: in-flight %s: seq %d has no payload", s.id, p.op, extra[i].Seq)
			return nil
		}
		v, _ := events.PayloadValue(extra[i].Payload.Payload)
		return v
	}
	switch p.op {
	case "append":
		s.intent = crashFold(s.intent, p.cmds...)
	case "begin":
		s.turn++
		s.inTurn = true
		s.turnHash, _, _ = crashContract(reg, s.intent)
	case "discover":
		if dl, ok := payload(0).(events.DeferredLoaded); !ok || !slices.Equal(dl.Names, p.newly) {
			t.Errorf("%s: in-flight discover stored %+v, want names %v", s.id, payload(0), p.newly)
		}
		s.loaded = crashUnion(s.loaded, p.newly)
	case "checkpoint", "end":
		last := len(extra) - 1
		cr, ok := crashCheckpointOf(payload(last))
		if !ok || !slices.Equal(crashNonNil(cr.Loaded), crashNonNil(s.loaded)) || cr.ContractHash != s.turnHash {
			t.Errorf("%s: in-flight %s stored %+v, want loaded %v contract %s", s.id, p.op, payload(last), s.loaded, s.turnHash)
			return
		}
		s.cp = &crashCP{loaded: slices.Clone(crashNonNil(s.loaded)), hash: cr.ContractHash, seq: extra[last].Seq}
		if p.op == "end" {
			s.inTurn = false
		}
	}
}

// crashViewEq compares a projection read with the fold's state.
func crashViewEq(got, want wire.Session) error {
	if got.Seq != want.Seq || got.Events != want.Events || !crashIntentEq(got.Intent, want.Intent) ||
		!slices.Equal(crashNonNil(got.Loaded), crashNonNil(want.Loaded)) || got.Turn != want.Turn || got.InTurn != want.InTurn {
		return fmt.Errorf("view seq %d events %d intent %s loaded %v turn %d in-turn %v; fold seq %d events %d intent %s loaded %v turn %d in-turn %v",
			got.Seq, got.Events, crashIntentString(got.Intent), got.Loaded, got.Turn, got.InTurn,
			want.Seq, want.Events, crashIntentString(want.Intent), want.Loaded, want.Turn, want.InTurn)
	}
	if (got.Checkpoint == nil) != (want.Checkpoint == nil) {
		return fmt.Errorf("view checkpoint %v, fold checkpoint %v", got.Checkpoint, want.Checkpoint)
	}
	if g, w := got.Checkpoint, want.Checkpoint; g != nil &&
		(!slices.Equal(crashNonNil(g.Loaded), crashNonNil(w.Loaded)) || g.ContractHash != w.ContractHash || g.Seq != w.Seq || g.RegistryVersion != w.RegistryVersion) {
		return fmt.Errorf("view checkpoint %v at %d (%s), fold checkpoint %v at %d (%s)", g.Loaded, g.Seq, g.ContractHash, w.Loaded, w.Seq, w.ContractHash)
	}
	return nil
}

// crashCheckProjection polls until the projection's view (a KV read, no
// min_seq) equals the fold.
func crashCheckProjection(t *testing.T, c *engineClient, s *crashSession, h wire.HistoryOf[*service.Command], st *crashStats) {
	t.Helper()
	want := h.State
	start := time.Now()
	defer func() { st.catchUp = max(st.catchUp, time.Since(start)) }()
	// The projection catches up to the fold of the log.
	natstest.CheckFor(t, crashCatchUp, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), crashTimeout)
		defer cancel()
		v, err := c.Intent(ctx, s.id, 0)
		if err != nil {
			return err
		}
		if err := crashViewEq(v, want); err != nil {
			return fmt.Errorf("%s: %w%s", s.id, err, crashExplain(h, v))
		}
		return nil
	})
}

// crashResume resumes s and checks the outcome against the last
// acknowledged checkpoint and the contract the test computes for the
// session's intent; then it resumes again (nothing more happens).
func crashResume(ctx context.Context, t *testing.T, c *engineClient, reg *resolver.Registry, s *crashSession, st *crashStats) wire.ResumeReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, crashTimeout)
	defer cancel()
	cur, _, err := crashContract(reg, s.intent)
	if err != nil {
		t.Fatalf("%s: resolve: %v", s.id, err)
	}
	r, err := c.Resume(ctx, wire.ResumeRequest{Session: s.id})
	if err != nil {
		t.Fatalf("%s: resume: %v", s.id, err)
	}
	o := r.Outcome
	// Resume restores exactly the loaded set of the last
	// acknowledged checkpoint when its contract hash matches the live one,
	// the empty set without a checkpoint, and otherwise each loaded tool
	// the live contract still has deferred and unchanged, with a decision
	// per loaded tool. Discoveries after that checkpoint never come back.
	switch {
	case s.cp == nil:
		st.empty++
		if !o.OK || len(o.Restored) != 0 || r.Checkpoint != nil {
			t.Errorf("%s: no checkpoint acknowledged; resume gave ok %v restored %v from %+v (%s)", s.id, o.OK, o.Restored, r.Checkpoint, o.Reason)
		}
	case s.cp.hash == cur:
		st.restored++
		if !o.OK || !slices.Equal(crashNonNil(o.Restored), s.cp.loaded) {
			t.Errorf("%s: last acknowledged checkpoint (seq %d) loaded %v, contract unchanged; resume gave ok %v restored %v (%s); loaded before the crash %v",
				s.id, s.cp.seq, s.cp.loaded, o.OK, o.Restored, o.Reason, s.loaded)
		}
		if !slices.Equal(s.loaded, s.cp.loaded) {
			st.dropped++
		}
	default:
		want := crashPerTool(reg, reg, s.intent, s.cp.loaded)
		all := len(want) == len(s.cp.loaded)
		if all {
			st.perToolAll++
		} else {
			st.perToolSome++
		}
		if o.OK != all || !slices.Equal(crashNonNil(o.Restored), want) || o.Reason == "" || len(o.Changes) == 0 || len(o.Tools) != len(s.cp.loaded) {
			t.Errorf("%s: checkpoint contract %s loaded %v, live contract %s (intent %s); resume gave ok %v restored %v changes %v decisions %v (%s); want %v restored",
				s.id, s.cp.hash, s.cp.loaded, cur, crashIntentString(s.intent), o.OK, o.Restored, o.Changes, o.Tools, o.Reason, want)
		}
	}
	if s.cp != nil && (r.Checkpoint == nil || !slices.Equal(crashNonNil(r.Checkpoint.Loaded), s.cp.loaded) || r.Checkpoint.ContractHash != s.cp.hash) {
		t.Errorf("%s: resumed from %+v, want the checkpoint at seq %d loaded %v", s.id, r.Checkpoint, s.cp.seq, s.cp.loaded)
	}
	if slices.ContainsFunc(o.Restored, func(n string) bool { return s.cp == nil || !slices.Contains(s.cp.loaded, n) }) {
		t.Errorf("%s: resume restored %v, beyond the checkpoint's %v", s.id, o.Restored, s.cp)
	}
	restored := crashNonNil(slices.Clone(o.Restored))
	if r.Seq != 0 {
		types := []events.Type{events.TypeCheckpointRecorded}
		if s.inTurn { // resume closes the turn the crash left open: one TurnEnded carrying the checkpoint
			types = []events.Type{events.TypeTurnEnded}
		}
		if err := s.ack(r.Seq, types...); err != nil {
			t.Errorf("resume: %v", err)
		}
		s.cp = &crashCP{loaded: restored, hash: cur, seq: r.Seq}
	} else if s.inTurn || !slices.Equal(crashNonNil(s.loaded), restored) {
		t.Errorf("%s: resume wrote nothing, but the session is in-turn %v with loaded %v, not the restored %v", s.id, s.inTurn, s.loaded, restored)
	}
	s.loaded, s.inTurn = restored, false

	// Resuming again changes nothing.
	r2, err := c.Resume(ctx, wire.ResumeRequest{Session: s.id})
	if err != nil {
		t.Fatalf("%s: second resume: %v", s.id, err)
	}
	if !r2.Outcome.OK || !slices.Equal(crashNonNil(r2.Outcome.Restored), restored) || r2.Seq != 0 {
		t.Errorf("%s: second resume gave ok %v restored %v seq %d (%s), want ok, %v, nothing written", s.id, r2.Outcome.OK, r2.Outcome.Restored, r2.Seq, r2.Outcome.Reason, restored)
	}
	return r
}

// crashArmKill subscribes on the engine's NATS server and calls kill at
// the first message that calls for it: for killInFlight, an event published
// on session's subject; for killBeforeProjection, any event delivered to
// the projection's consumer.
func crashArmKill(t *testing.T, p *engineProc, kind, session string, kill func()) error {
	nc, err := nats.Connect(p.NATSURL, nats.NoReconnect(), p.natsAuth(t))
	if err != nil {
		return fmt.Errorf("connect %s: %w", p.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	subject, match := "tools.events."+session, func(*nats.Msg) bool { return true }
	if kind == killBeforeProjection {
		subject, match = ">", func(m *nats.Msg) bool { return strings.HasPrefix(m.Reply, crashProjectionAck) }
	}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if match(m) {
			kill() // here, not in a goroutine: the SIGKILL goes out at once
		}
	}); err != nil {
		return err
	}
	return nc.Flush()
}

// crashSlowRestart fails a restart that took longer than crashReadyWithin
// to become ready. The engine reports ready (/readyz) once its projection
// has caught up; a projection that waits for JetStream to redeliver what
// the killed process was handed but did not acknowledge (after the feed's
// AckWait, 30 s) takes about that long.
func crashSlowRestart(t *testing.T, took time.Duration) {
	t.Helper()
	// The projection catches up from where it stopped, at once.
	if took > crashReadyWithin {
		t.Errorf("the restarted engine took %v to report ready, want under %v (is the projection waiting for JetStream to redeliver what the killed process did not acknowledge?)", took.Round(time.Millisecond), crashReadyWithin)
	}
}

// crashLogStderr prints the tail of the engine's stderr when the test fails.
func crashLogStderr(t *testing.T, p **engineProc) {
	t.Cleanup(func() {
		if t.Failed() && *p != nil {
			s := (*p).Stderr.String()
			if len(s) > 4000 {
				s = s[len(s)-4000:]
			}
			t.Logf("engine stderr (tail):\n%s", s)
		}
	})
}

func crashSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CRASH_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (rerun with CRASH_SEED=%d)", seed, seed)
	return seed
}

// TestCrashResume drives sessions through turns from two goroutines and
// SIGKILLs the engine at random points, several times on one data
// directory; after each restart it checks the log, the projection,
// checkpoints and resume. It ends with a registry
// change between a stop and a restart, after which resume drops the changed
// tool and restores the others.
func TestCrashResume(t *testing.T) {
	const (
		nSessions = 8
		nWorkers  = 2
		nCycles   = 15
	)
	seed := crashSeed(t)
	reg := resolver.Default()
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	crashLogStderr(t, &p)
	st := &crashStats{killKinds: map[string]int{}}
	sessions := make([]*crashSession, nSessions)
	for i := range sessions {
		sessions[i] = newCrashSession(fmt.Sprintf("crash-s%d", i))
	}
	kinds := []string{killAfterAppend, killMidTurn, killAfterCheckpoint, killInFlight, killBeforeProjection}
	var maxCatchUp time.Duration
	master := rand.New(rand.NewPCG(seed, 0x5eed))
	master.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })

	for cycle := range nCycles {
		kind := kinds[cycle%len(kinds)]
		killer := master.IntN(nWorkers)
		var (
			killed, stop atomic.Bool
			wg           sync.WaitGroup
			mu           sync.Mutex
			ops          int
			errs         []error
			killedAfter  string
			killedAt     time.Time
			killOnce     sync.Once
		)
		proc := p
		kill := func(after string) {
			killOnce.Do(func() {
				killedAfter, killedAt = after, time.Now()
				killed.Store(true)
				proc.Kill()
				stop.Store(true)
			})
		}
		for w := range nWorkers {
			var mine []*crashSession
			for i := w; i < nSessions; i += nWorkers {
				mine = append(mine, sessions[i])
			}
			rng := rand.New(rand.NewPCG(seed, uint64(1+cycle*nWorkers+w)))
			trigger := 8 + rng.IntN(32) // operations before the killer steers to its kill point
			c := proc.Client(fmt.Sprintf("w%d", w))
			wg.Go(func() {
				n := 0
				defer func() { mu.Lock(); ops += n; mu.Unlock() }()
				var victim *crashSession
				for ; !stop.Load(); n++ {
					s := mine[rng.IntN(len(mine))]
					force := ""
					armed := kind == killInFlight || kind == killBeforeProjection
					if w == killer && n >= trigger && !armed {
						force = kind
					}
					if w == killer && n >= trigger && armed {
						if victim == nil {
							victim = s
							if err := crashArmKill(t, proc, kind, victim.id, func() { kill(victim.id + ", a call in flight (" + kind + ")") }); err != nil {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
								stop.Store(true)
								return
							}
						}
						s = victim // write to it until a publish kills the engine
					}
					op, hit := crashChoose(rng, s, force)
					err := crashRun(ctx, t, c, reg, s, rng, crashOp{op: op, fresh: hit && kind == killMidTurn})
					if err != nil {
						if killed.Load() && !crashIsAnswer(err) {
							return // in flight at the kill: s.pending says what
						}
						mu.Lock()
						errs = append(errs, fmt.Errorf("cycle %d, %s %s: %w", cycle, s.id, op, err))
						mu.Unlock()
						stop.Store(true)
						return
					}
					if hit {
						n++
						kill(s.id + " " + op) // SIGKILL right after the acknowledgement
						return
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("before the kill: %v", errors.Join(errs...))
		}
		if !killed.Load() {
			t.Fatalf("cycle %d: no kill happened", cycle)
		}
		kill("") // waits for the kill that happened; killedAfter is set then
		after := killedAfter
		st.kills++
		st.killKinds[kind]++
		st.ops += ops
		var inflight []string
		for _, s := range sessions {
			if s.pending != nil {
				inflight = append(inflight, s.id+" "+s.pending.op)
			}
		}
		t.Logf("cycle %d: SIGKILL %s at %s, at %s (%d operations this cycle; in flight: %v)", cycle, kind, killedAt.Format("15:04:05.000"), after, ops, inflight)

		restartAt := time.Now()
		p = startEngine(t, dir)
		st.restarts++
		restartTook := time.Since(restartAt)
		crashSlowRestart(t, restartTook)
		c := p.Client("check")
		// Every other round of kill kinds resumes every session first, as a
		// backend would, before the projection has caught up; the others
		// let the projection catch up with no new write first.
		resumeFirst := (cycle/len(kinds))%2 == 1
		st.catchUp = 0
		for _, s := range sessions {
			h := crashCheckLog(ctx, t, c, reg, s, st)
			if !resumeFirst {
				crashCheckProjection(t, c, s, h, st)
			}
		}
		quiet := st.catchUp
		for _, s := range sessions {
			crashResume(ctx, t, c, reg, s, st)
		}
		for _, s := range sessions {
			crashCheckProjection(t, c, s, crashCheckLog(ctx, t, c, reg, s, st), st)
		}
		if resumeFirst {
			t.Logf("cycle %d: restarted in %v; resumed first; projection caught up %v after the resumes", cycle, restartTook, st.catchUp)
		} else {
			t.Logf("cycle %d: restarted in %v; projection caught up in %v with no new write, then %v after the resumes", cycle, restartTook, quiet, st.catchUp)
		}
		maxCatchUp = max(maxCatchUp, st.catchUp)
		if t.Failed() {
			t.FailNow()
		}
	}

	// Every session ends a turn with send_message loaded; the engine stops
	// and comes back with a registry where send_message's description
	// changed and the version was bumped.
	c := p.Client("final")
	rng := rand.New(rand.NewPCG(seed, 0xf1a1))
	for _, s := range sessions {
		for _, op := range []string{"begin", "discover", "dispatch", "end"} {
			if err := crashRun(ctx, t, c, reg, s, rng, crashOp{op: op, names: []string{"send_message", crashDeferred[rng.IntN(len(crashDeferred))]}}); err != nil {
				t.Fatalf("%s %s: %v", s.id, op, err)
			}
		}
		if s.cp == nil || !slices.Contains(s.cp.loaded, "send_message") {
			t.Fatalf("%s: set-up: want send_message checkpointed, have %+v", s.id, s.cp)
		}
	}
	stopAt := time.Now()
	p.Stop(t)
	t.Logf("SIGTERM: engine stopped in %v", time.Since(stopAt))

	changed, newVersion := crashChangedRegistry(t, "send_message")
	reg2, err := resolver.Load(changed)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(file, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	restartAt := time.Now()
	p = startEngine(t, dir, "--registry", file)
	st.restarts++
	t.Logf("restarted with registry %s in %v", newVersion, time.Since(restartAt))
	crashSlowRestart(t, time.Since(restartAt))
	c = p.Client("check")
	info, err := c.Registry(ctx)
	if err != nil || info.Version != newVersion {
		t.Fatalf("registry after restart: %q, %v; want %q", info.Version, err, newVersion)
	}
	for _, s := range sessions {
		v := crashCheckLog(ctx, t, c, reg2, s, st)
		crashCheckProjection(t, c, s, v, st)
		crashResumesPerTool(ctx, t, c, reg, reg2, s, reg.Version(), "send_message")
		v = crashCheckLog(ctx, t, c, reg2, s, st)
		crashCheckProjection(t, c, s, v, st)
	}
	for _, s := range sessions {
		st.acked += len(s.acked)
	}
	t.Logf("longest projection catch-up after a restart: %v", maxCatchUp)
	t.Logf("covered: %d SIGKILLs %v, %d restarts (the last after SIGTERM, with a changed registry), %d operations, %d acknowledged events over %d sessions; calls in flight at a kill: %d stored, %d not; resumes after a kill: %d restored a checkpoint (%d of them dropping post-checkpoint discoveries), %d with a changed contract kept every loaded tool and %d dropped some, %d without a checkpoint; %d resumed per tool after the registry change",
		st.kills, st.killKinds, st.restarts, st.ops, st.acked, nSessions, st.landed, st.lost, st.restored, st.dropped, st.perToolAll, st.perToolSome, st.empty, nSessions)
}

// crashChangedRegistry returns the embedded default registry with tool's
// description changed and the version bumped, and the new version.
func crashChangedRegistry(t *testing.T, tool string) ([]byte, string) {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	var version string
	if err := json.Unmarshal(doc["version"], &version); err != nil {
		t.Fatal(err)
	}
	newVersion := version + "-crash2"
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(doc["tools"], &tools); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tools {
		var name, desc string
		_ = json.Unmarshal(tl["name"], &name)
		if name != tool {
			continue
		}
		_ = json.Unmarshal(tl["description"], &desc)
		tl["description"], _ = json.Marshal(desc + " Messages are delivered at most once.")
		found = true
	}
	if !found {
		t.Fatalf("default registry has no %s", tool)
	}
	doc["tools"], _ = json.Marshal(tools)
	doc["version"], _ = json.Marshal(newVersion)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolver.Load(out); err != nil {
		t.Fatalf("changed registry does not load: %v", err)
	}
	return out, newVersion
}

// crashResumesPerTool resumes s under reg2, a registry where tool changed
// and the version went from oldV to reg2's (reg is the registry its
// checkpoint was recorded under): resume must drop tool if it was loaded,
// restore every other loaded tool the new contract still has deferred, and
// say so per tool.
func crashResumesPerTool(ctx context.Context, t *testing.T, c *engineClient, reg, reg2 *resolver.Registry, s *crashSession, oldV, tool string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, crashTimeout)
	defer cancel()
	newV := reg2.Version()
	r, err := c.Resume(ctx, wire.ResumeRequest{Session: s.id})
	if err != nil {
		t.Fatalf("%s: resume: %v", s.id, err)
	}
	o := r.Outcome
	want := crashPerTool(reg, reg2, s.intent, s.cp.loaded)
	if slices.Contains(want, tool) || o.OK || !slices.Equal(crashNonNil(o.Restored), want) {
		t.Errorf("%s: registry changed (%s -> %s, %s edited); resume gave ok %v restored %v (%s); want %v restored", s.id, oldV, newV, tool, o.OK, o.Restored, o.Reason, want)
	}
	if !strings.Contains(o.Reason, strconv.Quote(tool)) || !strings.Contains(o.Reason, strconv.Quote(newV)) || !strings.Contains(o.Reason, strconv.Quote(oldV)) {
		t.Errorf("%s: reason %q does not name tool %q and versions %q -> %q", s.id, o.Reason, tool, oldV, newV)
	}
	var schema, version bool
	for _, ch := range o.Changes {
		schema = schema || (ch.Kind == "schema-changed" && ch.Tool == tool)
		version = version || (ch.Kind == "registry-version" && ch.From == oldV && ch.To == newV)
	}
	if !schema || !version {
		t.Errorf("%s: changes %+v, want %s schema-changed and registry-version %s -> %s", s.id, o.Changes, tool, oldV, newV)
	}
	if r.Checkpoint == nil || !slices.Equal(crashNonNil(r.Checkpoint.Loaded), s.cp.loaded) || r.Checkpoint.ContractHash != s.cp.hash {
		t.Errorf("%s: resumed checkpoint %+v, want the acknowledged one loaded %v", s.id, r.Checkpoint, s.cp.loaded)
	}
	decided := map[string]string{}
	for _, d := range o.Tools {
		decided[d.Tool] = d.Kind
	}
	for _, n := range s.cp.loaded {
		kind, ok := decided[n]
		switch {
		case !ok:
			t.Errorf("%s: no decision for loaded %s in %+v", s.id, n, o.Tools)
		case slices.Contains(want, n) != (kind == "restored"):
			t.Errorf("%s: %s decided %s, want restored=%v", s.id, n, kind, slices.Contains(want, n))
		case n == tool && kind != "changed":
			t.Errorf("%s: the edited %s decided %s, want changed", s.id, n, kind)
		}
	}
	if r.Seq == 0 {
		t.Fatalf("%s: the resume recorded no checkpoint under the new contract", s.id)
	}
	if err := s.ack(r.Seq, events.TypeCheckpointRecorded); err != nil {
		t.Error(err)
	}
	hash, _, err := crashContract(reg2, s.intent)
	if err != nil {
		t.Fatal(err)
	}
	s.cp = &crashCP{loaded: want, hash: hash, seq: r.Seq}
	s.loaded = want
	// The new checkpoint holds the new contract: resuming again is OK.
	r2, err := c.Resume(ctx, wire.ResumeRequest{Session: s.id})
	if err != nil {
		t.Fatalf("%s: second resume: %v", s.id, err)
	}
	if !r2.Outcome.OK || !slices.Equal(crashNonNil(r2.Outcome.Restored), want) || r2.Seq != 0 {
		t.Errorf("%s: second resume under the new registry: ok %v restored %v seq %d (%s), want ok, %v, nothing written", s.id, r2.Outcome.OK, r2.Outcome.Restored, r2.Seq, r2.Outcome.Reason, want)
	}
}

// TestCrashResumeKillPoints kills the engine at each kill point with a
// fixed script, so that every case is covered whatever the seed of
// TestCrashResume: a contract-neutral and a contract-changing intent change
// right before the kill, a discovery after the last checkpoint, a turn with
// discoveries and no checkpoint, and a kill right after a checkpoint.
func TestCrashResumeKillPoints(t *testing.T) {
	reg := resolver.Default()
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	crashLogStderr(t, &p)
	st := &crashStats{}
	rng := rand.New(rand.NewPCG(1, 2))
	run := func(c *engineClient, s *crashSession, ops ...crashOp) {
		t.Helper()
		for _, o := range ops {
			if err := crashRun(ctx, t, c, reg, s, rng, o); err != nil {
				t.Fatalf("%s %s: %v", s.id, o.op, err)
			}
		}
	}
	discover := func(names ...string) crashOp { return crashOp{op: "discover", names: names} }
	begin, dispatch, checkpoint, end := crashOp{op: "begin"}, crashOp{op: "dispatch"}, crashOp{op: "checkpoint"}, crashOp{op: "end"}
	appendCmd := func(cmd events.Payload) crashOp { return crashOp{op: "append", cmds: []events.Payload{cmd}} }
	// restart kills the engine (already killed: waits), restarts it, and
	// resumes every session, checking the log and the projection around it.
	restart := func(pre func(*engineClient), sessions ...*crashSession) map[string]wire.ResumeReply {
		t.Helper()
		p.Kill()
		p = startEngine(t, dir)
		c := p.Client("check")
		if pre != nil {
			pre(c)
		}
		out := map[string]wire.ResumeReply{}
		for _, s := range sessions {
			v := crashCheckLog(ctx, t, c, reg, s, st)
			crashCheckProjection(t, c, s, v, st)
			out[s.id] = crashResume(ctx, t, c, reg, s, st)
			v = crashCheckLog(ctx, t, c, reg, s, st)
			crashCheckProjection(t, c, s, v, st)
		}
		if t.Failed() {
			t.FailNow()
		}
		return out
	}
	restored := func(r wire.ResumeReply, ok bool, want ...string) {
		t.Helper()
		if r.Outcome.OK != ok || !slices.Equal(crashNonNil(r.Outcome.Restored), crashNonNil(want)) {
			t.Errorf("%s: resume ok %v restored %v (%s), want ok %v restored %v", r.Session, r.Outcome.OK, r.Outcome.Restored, r.Outcome.Reason, ok, want)
		}
	}

	// Kill right after an append returns, before the projection has
	// folded it. both appends are in the log. the contract-neutral
	// change (memory_read is not a default tool) restores the checkpoint;
	// The one that removes notebook_edit changes the contract, names
	// it, and still restores both loaded tools, each unchanged.
	c := p.Client("script")
	neutral, changing := newCrashSession("kp-neutral"), newCrashSession("kp-changing")
	run(c, neutral, begin, discover("send_message"), end)
	run(c, changing, begin, discover("enter_plan_mode", "exit_plan_mode"), end)
	run(c, changing, appendCmd(events.ToolDisabled{Name: "notebook_edit"}))
	run(c, neutral, appendCmd(events.ToolDisabled{Name: "memory_read"}))
	p.Kill()
	rs := restart(nil, neutral, changing)
	restored(rs[neutral.id], true, "send_message")
	restored(rs[changing.id], true, "enter_plan_mode", "exit_plan_mode")
	if r := rs[changing.id].Outcome.Reason; !strings.Contains(r, `"notebook_edit" removed`) {
		t.Errorf("resume reason %q does not name the removed notebook_edit", r)
	}

	// Kill mid-turn: one session discovered after its checkpoint and
	// dispatched, another discovered without any checkpoint. the first
	// gets exactly its checkpoint back, the second nothing.
	c = p.Client("script")
	mid, nocp := newCrashSession("kp-mid"), newCrashSession("kp-nocp")
	run(c, nocp, begin, discover("exit_plan_mode"), dispatch)
	run(c, mid, begin, discover("send_message"), checkpoint, discover("playwright_browser"), dispatch)
	p.Kill()
	rs = restart(nil, neutral, changing, mid, nocp)
	restored(rs[mid.id], true, "send_message")
	restored(rs[nocp.id], true)
	restored(rs[neutral.id], true, "send_message")                       // resuming again after a restart restores the same
	restored(rs[changing.id], true, "enter_plan_mode", "exit_plan_mode") // its checkpoint of the new contract

	// Kill right after a checkpoint (and after an end turn).
	c = p.Client("script")
	cp := newCrashSession("kp-cp")
	run(c, mid, begin, discover("enter_plan_mode"), end)
	run(c, cp, begin, discover("send_message", "enter_plan_mode"), dispatch, checkpoint)
	p.Kill()
	rs = restart(nil, neutral, changing, mid, nocp, cp)
	restored(rs[cp.id], true, "enter_plan_mode", "send_message")
	restored(rs[mid.id], true, "enter_plan_mode", "send_message")

	// Kill when the projection's consumer is handed the end-turn batch
	// (whether the kill beats the projection's fold and acknowledgement is
	// a race); after the restart another session writes first, so that the
	// projection's first acknowledgement (AckAll) would cover any event the
	// killed process never folded. the view still reaches the fold;
	// Resume restores the end turn's checkpoint if it was stored, the
	// one before it otherwise.
	c = p.Client("script")
	pj, other := newCrashSession("kp-proj"), newCrashSession("kp-other")
	run(c, pj, begin, discover("send_message"), checkpoint, discover("exit_plan_mode"))
	var once sync.Once
	proc := p
	kill := func() { once.Do(proc.Kill) }
	if err := crashArmKill(t, proc, killBeforeProjection, pj.id, kill); err != nil {
		t.Fatal(err)
	}
	endErr := crashRun(ctx, t, c, reg, pj, rng, end)
	if endErr != nil && crashIsAnswer(endErr) {
		t.Fatalf("end turn: %v", endErr)
	}
	kill() // waits for the kill the subscription made (or makes it)
	t.Logf("end turn at the kill: %v", endErr)
	endStored := false
	rs = restart(func(c *engineClient) {
		h, err := c.History(ctx, wire.HistoryRequest{Session: pj.id})
		if err != nil {
			t.Fatal(err)
		}
		last := h.Entries[len(h.Entries)-1] // The end is one TurnEnded carrying the checkpoint
		if last.Payload != nil {
			te, ok := last.Payload.Payload.(events.TurnEnded)
			endStored = ok && te.Checkpoint != nil
		}
		run(c, other, appendCmd(events.ToolDisabled{Name: "diagnostics"}))
	}, other, neutral, changing, mid, nocp, cp, pj)
	t.Logf("end turn in flight at the kill: stored %v", endStored)
	if endStored {
		restored(rs[pj.id], true, "exit_plan_mode", "send_message")
	} else {
		restored(rs[pj.id], true, "send_message")
	}
}

// TestCrashStopRestartReady stops the engine gracefully (SIGTERM) right
// after a burst of turns on eight sessions and restarts it, three times.
// Every acknowledged event is in the log. the projection is at
// the fold once the engine reports ready, and it reports ready promptly: it
// catches up from where it stopped rather than waiting for JetStream to
// redeliver what the stopped process was handed but did not acknowledge.
func TestCrashStopRestartReady(t *testing.T) {
	reg := resolver.Default()
	ctx := context.Background()
	dir := t.TempDir()
	p := startEngine(t, dir)
	crashLogStderr(t, &p)
	st := &crashStats{}
	sessions := make([]*crashSession, 8)
	for i := range sessions {
		sessions[i] = newCrashSession(fmt.Sprintf("stop-s%d", i))
	}
	for round := range 3 {
		c := p.Client("stop")
		var wg sync.WaitGroup
		for i, s := range sessions {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(i)))
			wg.Go(func() {
				for _, op := range []string{"begin", "discover", "dispatch", "end"} {
					if err := crashRun(ctx, t, c, reg, s, rng, crashOp{op: op, fresh: true}); err != nil {
						t.Errorf("round %d, %s %s: %v", round, s.id, op, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		p.Stop(t)
		start := time.Now()
		p = crashServe(t, dir, round)
		t.Logf("round %d: restarted and ready in %v", round, time.Since(start).Round(time.Millisecond))
		c = p.Client("check")
		for _, s := range sessions {
			crashCheckProjection(t, c, s, crashCheckLog(ctx, t, c, reg, s, st), st)
		}
	}
}

// crashServe is startEngine with a deadline on readiness: it starts
// `engine serve` on dir and fails the test, saying where the projection's
// durable consumer stands, when /readyz has not answered 200 within
// crashReadyWithin.
func crashServe(t *testing.T, dir string, round int) *engineProc {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(engineBin, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--ready-file", ready)
	p := &engineProc{cmd: cmd, DataDir: dir, Stderr: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start engine: %v", err)
	}
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.Kill)
	var info struct {
		NATSURL  string `json:"nats_url"`
		HTTPAddr string `json:"http_addr"`
	}
	var nc *nats.Conn // to describe the consumer while not ready
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	natstest.CheckFor(t, crashReadyWithin, 20*time.Millisecond, func() error {
		select {
		case <-p.exited:
			t.Fatalf("engine exited before ready: %v\n%s", p.exitErr, p.Stderr)
		default:
		}
		if info.HTTPAddr == "" {
			data, err := os.ReadFile(ready)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &info); err != nil {
				return err
			}
		}
		resp, err := http.Get("http://" + info.HTTPAddr + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		if nc == nil {
			if nc, err = nats.Connect(info.NATSURL, nats.NoReconnect(), p.natsAuth(t)); err != nil {
				return err
			}
		}
		return fmt.Errorf("round %d: after SIGTERM right after acknowledged writes, the restarted engine is not ready: /readyz says %d %s; the projection's consumer: %s. "+
			"/readyz waits for the projection to catch up, and events the stopped process was handed but whose acknowledgement never reached the server are delivered again only after the feed's AckWait (30 s)",
			round, resp.StatusCode, strings.TrimSpace(string(body)), crashConsumerState(nc))
	})
	p.NATSURL, p.HTTPURL = info.NATSURL, "http://"+info.HTTPAddr
	return p
}

// crashConsumerState describes the projection's durable consumer.
func crashConsumerState(nc *nats.Conn) string {
	js, err := jetstream.New(nc)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, "TOOLS_EVENTS", "views")
	if err != nil {
		return err.Error()
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("ack floor %d, delivered %d, ack pending %d, not yet delivered %d", ci.AckFloor.Stream, ci.Delivered.Stream, ci.NumAckPending, ci.NumPending)
}
