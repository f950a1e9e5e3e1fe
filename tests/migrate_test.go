package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// migrateCLI runs engine migrate against url with args, within 60 s.
func migrateCLI(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, engineBin, append([]string{"migrate", "--nats", url}, args...)...).CombinedOutput()
	return string(out), err
}

// lastOn returns the sequence of the last message on subject in stream,
// 0 when it has none.
func lastOn(t *testing.T, js natsjs.JetStream, stream, subject string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), subject)
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("last message on %s in %s: %v", subject, stream, err)
	}
	return m.Sequence
}

// A store of one event stream migrates to three partitions without moving
// an event: migrate refuses while an engine projects the store; an engine
// serving without a projection stops when the migration starts; after it,
// the sessions the one stream held keep their events and sequences and
// take appends there, new sessions go to their partition, a one-stream
// engine is refused, an event a publisher stores on the one stream for a
// session it did not hold is not folded, and the engine serves the same
// after a restart.
func TestMigrateOneStreamStoreToPartitions(t *testing.T) {
	srv := natstest.Server(t)
	url := srv.ClientURL()
	ctx := context.Background()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	one := startEngine(t, t.TempDir(), "--nats", url)
	old := []string{"old-a", "old-b", "old-c"}
	oldSeq := map[string]uint64{}
	for _, s := range old {
		for _, tool := range []string{"bash", "web_fetch"} {
			r, err := one.GoClient("web").Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool(tool)}})
			if err != nil {
				t.Fatal(err)
			}
			oldSeq[s] = r.LastSeq
		}
	}
	out, err := migrateCLI(t, url, "--partitions", "3", "--settle", "100ms")
	if err == nil || !strings.Contains(out, "stop every engine") {
		t.Fatalf("migrate beside a projecting engine: %v, want a refusal telling to stop the engines\n%s", err, out)
	}
	one.Stop(t)

	// An engine that serves without projecting holds no lease: the
	// migration's record stops it.
	reader := startEngine(t, t.TempDir(), "--nats", url, "--no-projection")
	out, err = migrateCLI(t, url, "--partitions", "3", "--settle", "2s")
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	var rep struct {
		Kept    int    `json:"kept_sessions"`
		LastSeq uint64 `json:"one_stream_last_seq"`
		Streams string `json:"streams"`
	}
	line := out[max(strings.Index(out, `{"kept_sessions"`), 0):]
	line, _, _ = strings.Cut(line, "\n")
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("migrate's report: %v\n%s", err, out)
	}
	if rep.Kept != len(old) || rep.LastSeq != oldSeq["old-c"] || rep.Streams != "TOOLS_EVENTS_0,TOOLS_EVENTS_1,TOOLS_EVENTS_2" {
		t.Fatalf("migrate reported %+v, want %d sessions kept, last sequence %d, three partition streams\n%s", rep, len(old), oldSeq["old-c"], out)
	}
	select {
	case <-reader.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the engine serving the one stream did not stop when the migration started")
	}
	if !strings.Contains(reader.Stderr.String(), "layout changed") {
		t.Fatalf("the stopped engine's log does not say why:\n%s", reader.Stderr.String())
	}

	// A one-stream engine is refused, naming the partitions.
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out2, err := exec.CommandContext(sctx, engineBin, "serve", "--nats", url, "--http", "", "--data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "--partitions 3") {
		t.Fatalf("a one-stream serve of the migrated store: %v, want a refusal naming --partitions 3\n%s", err, out2)
	}

	// A publisher stores a new session's event on the one stream.
	rogue := events.New("rogue", "backend", "u", events.ToolDisabled{Name: "bash"})
	data, err := events.Encode(rogue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "tools.events.rogue", data); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		p := startEngine(t, t.TempDir(), "--nats", url, "--partitions", "3")
		c := p.GoClient("web")
		for _, s := range old {
			st, err := c.Intent(ctx, client.IntentRequest{Session: s})
			if err != nil {
				t.Fatal(err)
			}
			if st.Seq < oldSeq[s] || len(st.Intent.Disabled) < 2 {
				t.Fatalf("round %d: %s after the migration: seq %d, disabled %v; want seq %d or later, bash and web_fetch disabled", round, s, st.Seq, st.Intent.Disabled, oldSeq[s])
			}
			r, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool([]string{"read_file", "grep"}[round])}})
			if err != nil {
				t.Fatal(err)
			}
			if got := lastOn(t, js, "TOOLS_EVENTS", "tools.events."+s); got != r.LastSeq {
				t.Fatalf("round %d: %s's append acknowledged at %d, the one stream's last for it is %d", round, s, r.LastSeq, got)
			}
			part := events.Partition(s, 3)
			if got := lastOn(t, js, fmt.Sprintf("TOOLS_EVENTS_%d", part), fmt.Sprintf("tools.events.%d.%s", part, s)); got != 0 {
				t.Fatalf("round %d: kept session %s has an event in partition %d", round, s, part)
			}
		}
		for _, s := range []string{fmt.Sprintf("new-%d", round), "rogue"} {
			if round == 1 && s == "rogue" {
				continue
			}
			st, err := c.Intent(ctx, client.IntentRequest{Session: s})
			if err != nil {
				t.Fatal(err)
			}
			if st.Events != 0 {
				t.Fatalf("round %d: %s reads %d events before the engine wrote one, want none (an event on the one stream after the migration is not its)", round, s, st.Events)
			}
			r, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}})
			if err != nil {
				t.Fatal(err)
			}
			part := events.Partition(s, 3)
			if got := lastOn(t, js, fmt.Sprintf("TOOLS_EVENTS_%d", part), fmt.Sprintf("tools.events.%d.%s", part, s)); got != r.LastSeq {
				t.Fatalf("round %d: new session %s acknowledged at %d, its partition %d's last for it is %d", round, s, r.LastSeq, part, got)
			}
		}
		for _, s := range []string{"old-a", "new-0"} {
			out, err := exec.Command(engineBin, "events", s, "--nats", url).CombinedOutput()
			stream := "tools.events.old-a"
			if s == "new-0" {
				stream = fmt.Sprintf("tools.events.%d.new-0", events.Partition("new-0", 3))
			}
			if err != nil || !strings.Contains(string(out), `"subject":"`+stream+`"`) {
				t.Fatalf("engine events %s: %v, want its events on %s\n%s", s, err, stream, out)
			}
		}
		p.Stop(t)
	}
	// engine tail follows the partitions and the one stream.
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	tail, tailOut, tailErr := startFollowing(tctx, t, "tail", "--last", "10", "--nats", url)
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for _, subject := range []string{"tools.events.old-a", fmt.Sprintf("tools.events.%d.new-0", events.Partition("new-0", 3))} {
			if at, _ := tailOut.find(0, `"subject":"`+subject+`"`); at < 0 {
				return fmt.Errorf("engine tail printed no event on %s:\n%s\n%s", subject, tailOut, tailErr)
			}
		}
		return nil
	})
	tcancel()
	_ = tail.Wait()

	// A backend that read kept session old-b from its hash's partition
	// (nothing there) publishes expecting sequence 0: stored, and refused
	// by every fold, the rebuild's included.
	bp := events.Partition("old-b", 3)
	bev := events.New("old-b", "backend", "u", events.ToolDisabled{Name: "glob"})
	bdata, err := events.Encode(bev)
	if err != nil {
		t.Fatal(err)
	}
	bmsg := nats.NewMsg(fmt.Sprintf("tools.events.%d.old-b", bp))
	bmsg.Data = bdata
	bmsg.Header.Set("Nats-Msg-Id", bev.ID)
	bmsg.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	if _, err := js.PublishMsg(ctx, bmsg); err != nil {
		t.Fatal(err)
	}
	// With the engines stopped, rebuild folds the partitions and the one
	// stream: a view deleted from the one stream's views is written again.
	views, err := js.KeyValue(ctx, "TOOLS_VIEWS")
	if err != nil {
		t.Fatal(err)
	}
	if err := views.Purge(ctx, "old-a"); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 120*time.Second)
	defer rcancel()
	out3, err := exec.CommandContext(rctx, engineBin, "rebuild", "--nats", url).CombinedOutput()
	if err != nil {
		t.Fatalf("engine rebuild of the migrated store: %v\n%s", err, out3)
	}
	if _, err := views.Get(ctx, "old-a"); err != nil {
		t.Fatalf("old-a's view in TOOLS_VIEWS after the rebuild: %v\n%s", err, out3)
	}
	pviews, err := js.KeyValue(ctx, fmt.Sprintf("TOOLS_VIEWS_%d", bp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pviews.Get(ctx, "old-b"); !errors.Is(err, natsjs.ErrKeyNotFound) {
		t.Fatalf("kept session old-b has a view in its hash's partition after the rebuild (%v): the rebuild folded an event the serving engines refuse", err)
	}
}

// The migration a deployment runs: engines on deploy/nats-server.conf's
// users serve one stream; they stop, the servers restart on
// deploy/partitioned/'s configuration, the admin user migrates, and
// engines serve --partitions 3 as the same users. The channel user
// appends to the kept sessions (on the one stream) and to new ones (in
// their partitions), the engine erases a kept session through the
// eraser user, and the auditor reads the kept stream by direct get,
// without a permission error.
func TestMigrateUnderTheDeployConfigurations(t *testing.T) {
	store := t.TempDir()
	conf1, opts1 := configOptions(t, "../deploy/nats-server.conf")
	opts1.StoreDir = store
	srv1 := natstest.ServerWith(t, *opts1)
	pw := permUsers(t, conf1)
	engineArgs := func(url string, extra ...string) []string {
		return append([]string{"--nats", url,
			"--nats-user", "engine", "--nats-password", pw["engine"].password,
			"--nats-api-user", "engine-api", "--nats-api-password", pw["engine-api"].password,
			"--nats-erase-user", "eraser", "--nats-erase-password", pw["eraser"].password}, extra...)
	}
	ctx := e2eCtx(t)
	one := startEngine(t, t.TempDir(), engineArgs(srv1.ClientURL())...)
	web := permConnect(t, srv1.ClientURL(), "web", pw["web"])
	kept := []string{"kept-0", "kept-1", "kept-2"}
	keptSeq := map[string]uint64{}
	for _, s := range kept {
		r, err := newNATSEngineClient(web.nc, client.WithChannel("web")).Append(ctx, s, nil, events.ToolsToggled{Enabled: e2eBool(true)})
		if err != nil {
			t.Fatalf("user web: append to %s: %v", s, err)
		}
		keptSeq[s] = r.LastSeq
	}
	one.Stop(t)
	srv1.Shutdown()
	srv1.WaitForShutdown()

	conf2, opts2 := configOptions(t, "../deploy/partitioned/nats-server.conf")
	opts2.StoreDir = store
	srv2 := natstest.ServerWith(t, *opts2)
	url := srv2.ClientURL()
	pw2 := permUsers(t, conf2)
	for _, u := range []string{"engine", "engine-api", "eraser", "web", "auditor", "admin"} {
		if pw2[u].password != pw[u].password {
			t.Fatalf("user %s has another password in the partitioned configuration", u)
		}
	}
	if out, err := migrateCLI(t, url, "--nats-user", "admin", "--nats-password", pw["admin"].password, "--partitions", "3", "--settle", "100ms"); err != nil {
		t.Fatalf("migrate as admin: %v\n%s", err, out)
	}
	p := startEngine(t, t.TempDir(), engineArgs(url, "--partitions", "3")...)
	web2 := permConnect(t, url, "web", pw["web"])
	wc := newNATSEngineClient(web2.nc, client.WithChannel("web"))
	for _, s := range append(slices.Clone(kept), "fresh-0", "fresh-1") {
		r, err := wc.Append(ctx, s, nil, events.ToolDisabled{Name: "bash"})
		if err != nil {
			t.Fatalf("user web: append to %s after the migration: %v", s, err)
		}
		if seq, ok := keptSeq[s]; ok && r.FirstSeq <= seq {
			t.Fatalf("kept session %s appended at %d, not after its sequence %d on the one stream", s, r.FirstSeq, seq)
		}
	}
	auditor := permConnect(t, url, "auditor", pw["auditor"])
	if got := permDirectReadFrom(t, auditor.nc, "TOOLS_EVENTS", "tools.events.kept-0"); len(got) != 2 {
		t.Fatalf("auditor direct get of tools.events.kept-0 in TOOLS_EVENTS: %d messages, want 2", len(got))
	}
	if _, err := p.GoClient("ops").SessionDelete(ctx, client.DeleteRequest{Session: "kept-1", Erase: true}); err != nil {
		t.Fatalf("erase of kept-1 through the eraser user: %v", err)
	}
	if got := permDirectReadFrom(t, auditor.nc, "TOOLS_EVENTS", "tools.events.kept-1"); len(got) != 1 || permEnvelope(t, got[0])["type"] != "SessionDeleted" {
		t.Fatalf("kept-1 after the erase: %d messages, want its SessionDeleted tombstone only", len(got))
	}
	for _, c := range []*permConn{web2, auditor} {
		c.mu.Lock()
		errs := slices.Clone(c.errs)
		c.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("user %s met permission errors: %q", c.user, errs)
		}
	}
}

// The migration on three nats-server processes, as a deployment runs
// it: a one-stream engine with 3 replicas takes appends to three
// sessions, stops, and the store migrates to 3 partitions; an engine
// serving them takes appends to those kept sessions and to three new
// ones (one per partition) while the node leading the kept stream, and
// then the one leading a partition, are killed with -9 and restarted.
// Every acknowledged append, before and after the migration, is at its
// sequence on its session's subject, the kept sessions on TOOLS_EVENTS
// and the new ones in their partition, and the engine reads each session
// at or past its last acknowledged sequence.
func TestMigrateOnAThreeNodeClusterUnderLeaderKills(t *testing.T) {
	c := natstest.StartProcessCluster(t, natstest.ProcessOptions{})
	one := startEngine(t, t.TempDir(), "--nats", c.URLs(), "--replicas", "3")
	one.anonymous = true
	all := pdSessions(2)
	kept, fresh := all[:deployPartitions], all[deployPartitions:]
	before := pdStartLoad(one.HTTPURL, kept)
	before.waitEvery(t, "before the migration", time.Time{}, 10)
	before.halt()
	one.Stop(t)

	if out, err := migrateCLI(t, c.URLs(), "--partitions", "3", "--settle", "500ms"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	p := startPartitioned(t, c, t.TempDir())
	load := pdStartLoad(p.HTTPURL, all)
	defer load.halt()
	load.waitEvery(t, "after the migration", time.Time{}, 10)
	for _, stream := range []string{"TOOLS_EVENTS", "TOOLS_EVENTS_1"} {
		leader := c.WaitLeaderOf(stream, 45*time.Second)
		at := time.Now()
		t.Logf("kill -9 n%d, leader of %s", leader, stream)
		c.Kill(leader)
		load.waitEvery(t, "after killing the leader of "+stream, at, 10)
		c.Start(leader)
		c.WaitFormed(45 * time.Second)
		natstest.CheckFor(t, 45*time.Second, 100*time.Millisecond, func() error {
			for _, s := range []string{"TOOLS_EVENTS", "TOOLS_EVENTS_0", "TOOLS_EVENTS_1", "TOOLS_EVENTS_2"} {
				if !c.StreamCurrent(s) {
					return fmt.Errorf("replicas of %s not current", s)
				}
			}
			return nil
		})
	}
	load.halt()

	nc := natstest.Connect(t, c.URLs())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	layout := partitionedLayout(deployPartitions)
	where := func(s string) (string, string) {
		if slices.Contains(kept, s) {
			return "TOOLS_EVENTS", "tools.events." + s
		}
		return layout(s)
	}
	total := 0
	for _, s := range all {
		name, subject := where(s)
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		seqs := append(slices.Clone(before.acked[s]), load.acked[s]...)
		if len(load.acked[s]) == 0 {
			t.Fatalf("session %s had no append acknowledged after the migration", s)
		}
		for _, seq := range seqs {
			// A direct get: the replica that answers may not have
			// applied the last appends yet; a stored one turns up.
			var m *natsjs.RawStreamMsg
			natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
				if m, err = st.GetMsg(ctx, seq); err != nil {
					return fmt.Errorf("acknowledged append of %s at %s sequence %d: %w", s, name, seq, err)
				}
				return nil
			})
			if m.Subject != subject {
				t.Fatalf("%s sequence %d holds %s, want the acknowledged append on %s", name, seq, m.Subject, subject)
			}
		}
		total += len(seqs)
		last := seqs[len(seqs)-1]
		got, err := p.GoClient("web").Intent(ctx, client.IntentRequest{Session: s, MinSeq: last})
		if err != nil || got.Seq < last {
			t.Fatalf("%s reads at sequence %d (%v), before its last acknowledged append %d", s, got.Seq, err, last)
		}
	}
	t.Logf("migration on 3 nodes: %d acknowledged appends on %d sessions (kept %v, new %v), every one at its sequence on its side; %d failed or unknown during the faults",
		total, len(all), kept, fresh, load.fails.Load())
}
