package service_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// A client-supplied event id makes a retry safe: the retry
// returns the original sequences and ids and writes nothing, within the
// log's dedupe window and after it (the session is searched for the key),
// even when the retried command would now be a no-op or decide other
// events; a command deciding several events names them key, key+1, ...
func TestApplyKeyedRetry(t *testing.T) {
	t.Parallel()
	const window = 200 * time.Millisecond
	ctx := context.Background()
	e, log := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{Duplicates: window}, resolver.Default(), service.Config{}, true)

	key := events.NewID()
	first, err := e.ApplyKeyed(ctx, "idem", web, nil, key, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	keyID := jetstream.KeyEventIDs("idem", key, 1)[0]
	if first.Last == 0 || len(first.EventIDs) != 1 || first.EventIDs[0] != keyID || first.Duplicate {
		t.Fatalf("first append: %+v, want one new event with id %s", first, keyID)
	}
	// Another writer moves the session on.
	if _, err := e.Apply(ctx, "idem", web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	retry := func(when string) {
		t.Helper()
		got, err := e.ApplyKeyed(ctx, "idem", web, nil, key, events.ToolDisabled{Name: "bash"})
		if err != nil {
			t.Fatalf("retry %s: %v", when, err)
		}
		if !got.Duplicate || got.First != first.First || got.Last != first.Last || len(got.EventIDs) != 1 || got.EventIDs[0] != keyID {
			t.Fatalf("retry %s = first %d last %d dup %v ids %v, want the original %d (duplicate)", when, got.First, got.Last, got.Duplicate, got.EventIDs, first.Last)
		}
	}
	retry("within the dedupe window")
	time.Sleep(2 * window) // the dedupe window is time: let it pass
	retry("after the dedupe window")
	recs, err := log.ReadSession(ctx, "idem", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Envelope.ID == keyID {
			n++
		}
	}
	if n != 1 || len(recs) != 2 {
		t.Fatalf("session has %d events, %d with the key; want 2 and 1", len(recs), n)
	}

	// Several events under one key: id, id+1.
	key2 := events.NewID()
	multi, err := e.ApplyKeyed(ctx, "idem", web, nil, key2, events.ToolEnabled{Name: "bash"}, events.ToolEnabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := service.KeyedIDs("idem", key2, 2)
	if len(multi.EventIDs) != 2 || multi.EventIDs[0] != want[0] || multi.EventIDs[1] != want[1] {
		t.Fatalf("ids %v, want %v", multi.EventIDs, want)
	}
	again, err := e.ApplyKeyed(ctx, "idem", web, nil, key2, events.ToolEnabled{Name: "bash"}, events.ToolEnabled{Name: "grep"})
	if err != nil || !again.Duplicate || again.First != multi.First || again.Last != multi.Last {
		t.Fatalf("retry of the two-event append: %+v %v, want %d..%d", again, err, multi.First, multi.Last)
	}

	// A key longer than 255 bytes is refused (any shorter
	// string is a key; TestApplyKeyedOpaqueKeys).
	if _, err := e.ApplyKeyed(ctx, "idem", web, nil, strings.Repeat("k", 256), events.ToolDisabled{Name: "bash"}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("bad key: %v, want ErrInvalid", err)
	}
}

// keyedEngine is an engine on its own server whose log has the given
// dedupe window, with the server's URL for independent readers.
func keyedEngine(t *testing.T, window time.Duration) (*service.Engine, string) {
	t.Helper()
	url := natstest.Server(t).ClientURL()
	e, _ := stackOn(t, url, jetstream.LogConfig{Duplicates: window}, resolver.Default(), service.Config{}, true)
	return e, url
}

// A key whose event the index does not know (stored by a
// direct publisher, or by an engine without the index) but the log's
// dedupe window does, sent on another session: the log answers
// "duplicate" with the other session's sequence; the engine refuses it
// (ErrKeyInUse) and folds nothing, so the session is not wedged: it reads
// at once and appends (before: the append returned the other session's
// sequence as this one's and every later read waited for it, 503).
func TestApplyKeyedForeignDuplicateDoesNotWedge(t *testing.T) {
	t.Parallel()
	e, _ := keyedEngine(t, time.Minute)
	ctx := context.Background()
	if _, err := e.Apply(ctx, "victim", web, nil, events.ToolDisabled{Name: "grep"}); err != nil {
		t.Fatal(err)
	}
	// Another session's event, stored past the engine, after the victim's.
	other := events.New("other", "slack", "bob", events.ToolDisabled{Name: "bash"})
	if _, err := e.Log().Append(ctx, "other", 0, other); err != nil {
		t.Fatal(err)
	}
	// A key's event ids derive from the session and the key,
	// so another session's event id sent as a key names other ids: the
	// victim's own event is stored (when the key was the id, the
	// append was refused ErrKeyInUse); nothing of the other session is
	// returned.
	keyed, err := e.ApplyKeyed(ctx, "victim", web, nil, other.ID, events.ToolDisabled{Name: "bash"})
	if err != nil || keyed.Duplicate || keyed.First != 3 || len(keyed.EventIDs) != 1 || keyed.EventIDs[0] == other.ID ||
		keyed.EventIDs[0] != jetstream.KeyEventIDs("victim", other.ID, 1)[0] {
		t.Fatalf("key of another session's event: %+v %v, want the victim's own event at 3", keyed, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := e.Session(rctx, "victim", keyed.Last)
	if err != nil || st.LastSeq != 3 {
		t.Fatalf("victim after the keyed append: seq %d %v, want its own view at 3", st.LastSeq, err)
	}
	res, err := e.Apply(rctx, "victim", web, nil, events.ToolEnabled{Name: "bash"})
	if err != nil || res.First != 4 {
		t.Fatalf("victim appends after it: %+v %v, want seq 4", res, err)
	}
	if st, err := e.Session(rctx, "victim", res.Last); err != nil || st.LastSeq != 4 {
		t.Fatalf("victim reads its write: seq %d %v", st.LastSeq, err)
	}
}

// bulk appends n events to session s, 1,000 at a time, past the engine.
func bulk(t *testing.T, e *service.Engine, s string, n int) uint64 {
	t.Helper()
	ctx := context.Background()
	last, err := e.Log().LastSeq(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for n > 0 {
		evs := make([]events.Envelope, min(n, logport.MaxBatch))
		for i := range evs {
			evs[i] = events.New(s, "web", "alice", events.ToolsToggled{Enabled: on(i%2 == 0)})
		}
		res, err := e.Log().Append(ctx, s, last, evs...)
		if err != nil {
			t.Fatal(err)
		}
		last, n = res.Last, n-len(evs)
	}
	return last
}

// A keyed append, and a keyed retry, read the same number of
// messages from the log whatever the session's length (the index is one
// get; before, the session was read from its first event: 3.7-5.2 s at
// 100k events). The cost is asserted in messages read; times are logged.
func TestApplyKeyedCostFlat(t *testing.T) {
	t.Parallel()
	e, _ := keyedEngine(t, time.Minute)
	ctx := context.Background()
	if _, err := e.Log().Keys(ctx); err != nil { // the index begins before the sessions
		t.Fatal(err)
	}
	reads := map[int][2]uint64{}
	for _, n := range []int{1000, 20000} {
		s := "cost-" + strconv.Itoa(n)
		last := bulk(t, e, s, n)
		natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			// The projection's feed folded them: a read at last costs no
			// log read (a read ahead of a paced feed folds the tail from
			// the log, and that cost is the feed's lag, not the
			// session's length).
			before := e.Log().MessagesRead()
			if _, err := e.Session(ctx, s, last); err != nil {
				return err
			}
			if n := e.Log().MessagesRead() - before; n > 0 {
				return fmt.Errorf("the read at %d folded %d events from the log: the feed is behind", last, n)
			}
			return nil
		})
		key := events.NewID()
		before, t0 := e.Log().MessagesRead(), time.Now()
		first, err := e.ApplyKeyed(ctx, s, web, nil, key, events.ToolDisabled{Name: "bash"})
		if err != nil || first.Duplicate {
			t.Fatal(first, err)
		}
		mid, t1 := e.Log().MessagesRead(), time.Now()
		again, err := e.ApplyKeyed(ctx, s, web, nil, key, events.ToolDisabled{Name: "bash"})
		if err != nil || !again.Duplicate || again.First != first.First {
			t.Fatalf("retry: %+v %v, want duplicate at %d", again, err, first.First)
		}
		reads[n] = [2]uint64{mid - before, e.Log().MessagesRead() - mid}
		t.Logf("%d events: keyed append %v (%d messages read), keyed retry %v (%d messages read)", n, t1.Sub(t0), reads[n][0], time.Since(t1), reads[n][1])
	}
	// A few messages may be read when the projection has not folded the
	// last append yet; never a number that grows with the session.
	for n, r := range reads {
		if r[0] > 4 || r[1] > 4 {
			t.Errorf("at %d events a keyed append read %d messages and its retry %d: want at most 4 each", n, r[0], r[1])
		}
	}
}

// A keyed writer and an unkeyed writer on one hot session: the
// keyed writer, sending no expected sequence, never gets a conflict; each
// key is stored exactly once (counted by an independent reader), and each
// keyed append retried at once returns its original sequences.
func TestApplyKeyedHotSession(t *testing.T) {
	t.Parallel()
	e, url := keyedEngine(t, time.Minute)
	ctx := context.Background()
	const n = 40
	const s = "hot"
	var wg sync.WaitGroup
	stop := make(chan struct{})
	unkeyed := 0
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var c events.Payload = events.ToolDisabled{Name: "grep"}
			if i%2 == 1 {
				c = events.ToolEnabled{Name: "grep"}
			}
			if _, err := e.Apply(ctx, s, web, nil, c); err != nil {
				t.Errorf("unkeyed append %d: %v", i, err)
				return
			}
			unkeyed++
		}
	})
	keys := make([]string, n)
	for i := range n {
		keys[i] = events.NewID()
		var c events.Payload = events.ToolDisabled{Name: "bash"}
		if i%2 == 1 {
			c = events.ToolEnabled{Name: "bash"}
		}
		first, err := e.ApplyKeyed(ctx, s, web, nil, keys[i], c)
		if err != nil || len(first.EventIDs) != 1 {
			t.Fatalf("keyed append %d: %+v %v, want one event stored", i, first, err)
		}
		again, err := e.ApplyKeyed(ctx, s, web, nil, keys[i], c)
		if err != nil || !again.Duplicate || again.First != first.First {
			t.Fatalf("keyed retry %d: %+v %v, want duplicate at %d", i, again, err, first.First)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d keyed appends (each retried once) beside %d unkeyed ones", n, unkeyed)
	other, err := jetstream.OpenLog(ctx, natstest.Connect(t, url), jetstream.LogConfig{Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := other.ReadSession(ctx, s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		count[r.MsgID]++
	}
	for i, k := range keys {
		if count[jetstream.KeyEventIDs(s, k, 1)[0]] != 1 {
			t.Errorf("key %d (%s) stored %d times, want once", i, k, count[k])
		}
	}
	if len(recs) != n+unkeyed {
		t.Errorf("session holds %d events, %d acknowledged", len(recs), n+unkeyed)
	}
}

// A keyed retry long after the dedupe window returns the
// original sequences through the index, and so does one whose first call
// stored its events but died before settling the index entry (a pending
// claim): the retry reads only the events after the claim, finds them,
// settles the entry, and writes nothing.
func TestApplyKeyedAfterWindowAndCrash(t *testing.T) {
	t.Parallel()
	const window = 200 * time.Millisecond
	e, _ := keyedEngine(t, window)
	ctx := context.Background()
	const s = "late"
	settled := events.NewID()
	first, err := e.ApplyKeyed(ctx, s, web, nil, settled, events.ToolDisabled{Name: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	// A call that claimed its key and stored its events, then died.
	keys, err := e.Log().Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	crashed := events.NewID()
	after, _ := e.Log().LastSeq(ctx, s)
	if _, claimed, err := keys.Claim(ctx, crashed, logport.KeyClaim{Session: s, Channel: web.Channel, After: after}); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	env := events.New(s, web.Channel, web.Actor, events.ToolDisabled{Name: "grep"})
	env.ID = crashed
	stored, err := e.Log().Append(ctx, s, after, env)
	if err != nil {
		t.Fatal(err)
	}
	// The session moves on; the dedupe window passes.
	bulk(t, e, s, 50)
	time.Sleep(3 * window) // the window is time: let it pass
	// The crashed claim is as engines wrote it (no digest, the
	// key is the event id): read as written, whatever the retry sends.
	retryOf := map[string]events.Payload{settled: events.ToolDisabled{Name: "bash"}, crashed: events.ToolDisabled{Name: "read_file"}}
	idOf := map[string]string{settled: jetstream.KeyEventIDs(s, settled, 1)[0], crashed: crashed}
	for key, want := range map[string]uint64{settled: first.First, crashed: stored.First} {
		for try := range 2 {
			before := e.Log().MessagesRead()
			got, err := e.ApplyKeyed(ctx, s, web, nil, key, retryOf[key])
			if err != nil || !got.Duplicate || got.First != want || got.Last != want || len(got.EventIDs) != 1 || got.EventIDs[0] != idOf[key] {
				t.Fatalf("retry %d of %s after the window: %+v %v, want duplicate at %d", try, key, got, err, want)
			}
			t.Logf("retry %d of %s: %d messages read", try, key, e.Log().MessagesRead()-before)
		}
		c, found, err := keys.Get(ctx, key)
		if err != nil || !found || c.Pending() || c.First != want || c.Count != 1 || c.Session != s {
			t.Fatalf("index entry of %s: %+v %v %v, want settled at %d", key, c, found, err, want)
		}
	}
	recs, err := e.Log().ReadSession(ctx, s, 0, 0)
	if err != nil || len(recs) != 52 {
		t.Fatalf("session holds %d events (%v), want 52: nothing written by the retries", len(recs), err)
	}

	// A call that claimed its key and died before appending: a retry whose
	// command is refused stores nothing and moves the claim's search start
	// past what it read; the next retry stores the events, once.
	lost := events.NewID()
	if _, claimed, err := keys.Claim(ctx, lost, logport.KeyClaim{Session: s, Channel: web.Channel, After: 1}); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	if _, err := e.ApplyKeyed(ctx, s, web, nil, lost, events.ToolDisabled{Name: "no-such-tool"}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("refused retry: %v, want ErrInvalid", err)
	}
	if c, _, err := keys.Get(ctx, lost); err != nil || !c.Pending() || c.After != recs[len(recs)-1].Seq {
		t.Fatalf("claim after a refused retry: %+v %v, want pending after %d", c, err, recs[len(recs)-1].Seq)
	}
	res, err := e.ApplyKeyed(ctx, s, web, nil, lost, events.ToolEnabled{Name: "grep"})
	if err != nil || res.Duplicate || len(res.EventIDs) != 1 || res.EventIDs[0] != lost {
		t.Fatalf("retry of a key whose call died before appending: %+v %v, want its event stored", res, err)
	}
	again, err := e.ApplyKeyed(ctx, s, web, nil, lost, events.ToolEnabled{Name: "grep"})
	if err != nil || !again.Duplicate || again.First != res.First {
		t.Fatalf("and again: %+v %v, want duplicate at %d", again, err, res.First)
	}
}

// An idempotency key is any opaque string of 1 to 255 bytes (a
// UUID here), case-sensitive, mapped to event ids by a hash of the session
// and the key; the same key with other commands is refused (ErrKeyMismatch,
// also ErrKeyInUse) naming both commands and writing nothing; with the same
// commands it is a duplicate.
func TestApplyKeyedOpaqueKeys(t *testing.T) {
	t.Parallel()
	e, _ := keyedEngine(t, time.Minute)
	ctx := context.Background()
	const s = "opaque"
	uuid := "3f1c2a9e-7b4d-4c11-9a60-0e5b8f2d6c71"
	first, err := e.ApplyKeyed(ctx, s, web, nil, uuid, events.ToolDisabled{Name: "bash"})
	if err != nil || first.Duplicate || len(first.EventIDs) != 1 || first.EventIDs[0] != jetstream.KeyEventIDs(s, uuid, 1)[0] {
		t.Fatalf("UUID key: %+v %v, want one event with id KeyEventIDs(session, key)", first, err)
	}
	again, err := e.ApplyKeyed(ctx, s, web, nil, uuid, events.ToolDisabled{Name: "bash"})
	if err != nil || !again.Duplicate || again.First != first.First || again.EventIDs[0] != first.EventIDs[0] {
		t.Fatalf("retry: %+v %v, want duplicate at %d", again, err, first.First)
	}
	_, err = e.ApplyKeyed(ctx, s, web, nil, uuid, events.ToolEnabled{Name: "bash"}, events.ToolDisabled{Name: "grep"})
	var me *jetstream.KeyMismatchError
	if !errors.Is(err, logport.ErrKeyMismatch) || !errors.Is(err, logport.ErrKeyInUse) || !errors.As(err, &me) ||
		!strings.Contains(err.Error(), "ToolDisabled") || !strings.Contains(err.Error(), "ToolEnabled,ToolDisabled") || !strings.Contains(err.Error(), uuid) {
		t.Fatalf("same key, other commands: %v, want ErrKeyMismatch naming the key and both commands", err)
	}
	// Case-sensitive: the upper-case UUID is another key, with other ids.
	upper := strings.ToUpper(uuid)
	other, err := e.ApplyKeyed(ctx, s, web, nil, upper, events.ToolDisabled{Name: "grep"})
	if err != nil || other.Duplicate || len(other.EventIDs) != 1 || other.EventIDs[0] == first.EventIDs[0] {
		t.Fatalf("upper-case key: %+v %v, want a new event with its own id", other, err)
	}
	// 255 bytes is a key; 256 bytes and control characters are not.
	if res, err := e.ApplyKeyed(ctx, s, web, nil, strings.Repeat("é", 127)+"x", events.ToolEnabled{Name: "bash"}); err != nil || res.Duplicate {
		t.Fatalf("255-byte key: %+v %v", res, err)
	}
	for _, bad := range []string{strings.Repeat("x", 256), "a\nb", "tab\there"} {
		if _, err := e.ApplyKeyed(ctx, s, web, nil, bad, events.ToolEnabled{Name: "read_file"}); !errors.Is(err, service.ErrInvalid) {
			t.Fatalf("key %q: %v, want ErrInvalid", bad, err)
		}
	}
	recs, err := e.Log().ReadSession(ctx, s, 0, 0)
	if err != nil || len(recs) != 3 {
		t.Fatalf("session holds %d events (%v), want 3: nothing written by the retry and the refusals", len(recs), err)
	}
}

// A keyed retry whose first call stored its events
// and died before settling the index entry (a pending claim), sent after
// the dedupe window through an engine reading a replica behind the
// stream's leader (natstest.LaggingReplica: a mirror answering half the
// direct gets), finds the stored events and answers them as a duplicate;
// before, the replica's short answer ended the search, and the retry was
// decided again (a second event, or a no-op answered as new).
func TestApplyKeyedPendingPastLaggingReplica(t *testing.T) {
	t.Parallel()
	const window = 200 * time.Millisecond
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	a, logA := stackOn(t, url, jetstream.LogConfig{Duplicates: window}, resolver.Default(), service.Config{}, false)
	_, logB := stackOn(t, url, jetstream.LogConfig{Duplicates: window}, resolver.Default(), service.Config{}, true)
	natstest.LaggingReplica(t, logA)
	keys, err := logB.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]uint64{}
	keyOf := map[string]string{}
	for i := 0; i < 8; i++ {
		s := fmt.Sprintf("keyed-%d", i)
		key := events.NewID()
		if _, claimed, err := keys.Claim(ctx, key, logport.KeyClaim{Session: s, Channel: web.Channel, IDs: logport.KeyIDsV1}); err != nil || !claimed {
			t.Fatal(claimed, err)
		}
		env := events.New(s, web.Channel, web.Actor, events.ToolDisabled{Name: "grep"})
		env.ID = jetstream.KeyEventIDs(s, key, 1)[0]
		res, err := logB.Append(ctx, s, 0, env)
		if err != nil {
			t.Fatal(err)
		}
		stored[s], keyOf[s] = res.First, key
	}
	time.Sleep(3 * window) // the dedupe window is time: let it pass
	for s, want := range stored {
		got, err := a.ApplyKeyed(ctx, s, web, nil, keyOf[s], events.ToolDisabled{Name: "grep"})
		if err != nil || !got.Duplicate || got.First != want || got.Last != want {
			t.Fatalf("%s: retry of the pending key: %+v %v; want a duplicate at %d", s, got, err, want)
		}
		if n, err := logA.LeaderLastSeq(ctx, s); err != nil || n != want {
			t.Fatalf("%s: the leader's last event is at %d (%v), want %d: the retry wrote", s, n, err, want)
		}
	}
}
