package tests

// A partitioned deployment: `engine serve --partitions 3` on a cluster of
// three nats-server processes, each partition's event stream replicated
// three times. The built binary runs the scale matrix's operations, and
// keeps every acknowledged append through kill -9 of each partition's
// leader node and of the engine itself; the commands that read the log
// find a session's events in its partition.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/wire"
)

// deployPartitions is the partitioned deployment's number of streams.
const deployPartitions = 3

// partitionedLayout is the layout of a store of k event streams.
func partitionedLayout(k int) scaleStream {
	return func(session string) (string, string) {
		p := events.Partition(session, k)
		return fmt.Sprintf("TOOLS_EVENTS_%d", p), fmt.Sprintf("tools.events.%d.%s", p, session)
	}
}

// startPartitioned starts `engine serve --partitions 3 --replicas 3` on
// the cluster with dir as its data directory, plus args.
func startPartitioned(t *testing.T, c *natstest.ProcessCluster, dir string, args ...string) *engineProc {
	t.Helper()
	p := startEngine(t, dir, append([]string{"--nats", c.URLs(), "--replicas", "3", "--partitions", fmt.Sprint(deployPartitions)}, args...)...)
	p.anonymous = true
	return p
}

// The scale matrix's operations (every operation over HTTP and NATS on the
// MCP registry of 1,095 tools, resume after kill -9 of the engine, the
// inspector, a registry push, compaction, delete and erase) pass on a
// partitioned deployment, within the same bounds, and each session's
// events are in its partition's stream.
func TestPartitionedDeploymentScaleMatrix(t *testing.T) {
	layout := partitionedLayout(deployPartitions)
	spread := map[string]bool{}
	for _, s := range []string{"scale-http", "scale-nats"} {
		name, _ := layout(s)
		spread[name] = true
	}
	if len(spread) < 2 {
		t.Fatalf("the matrix's sessions all live in %v: the test would not cross partitions", spread)
	}
	c := natstest.StartProcessCluster(t, natstest.ProcessOptions{})
	reg, tools := scaleRegistry(t, scale1k)
	dir := t.TempDir()
	start := func() *engineProc { return startPartitioned(t, c, dir, "--registry-kv", "--registry", reg) }
	runScaleMatrixOn(t, scale1k, reg, tools, start, layout)
}

// pdLoad appends from one writer per session over HTTP to whichever
// engine url holds, and records each acknowledged sequence.
type pdLoad struct {
	url  atomic.Pointer[string]
	stop atomic.Bool
	wg   sync.WaitGroup

	mu    sync.Mutex
	acked map[string][]uint64 // session → acknowledged last sequences
	at    map[int][]time.Time // partition → acknowledgement times
	fails atomic.Int64
	noops atomic.Int64
}

func pdStartLoad(url string, sessions []string) *pdLoad {
	l := &pdLoad{acked: map[string][]uint64{}, at: map[int][]time.Time{}}
	l.url.Store(&url)
	for w, session := range sessions {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tools := []string{"bash", "grep"}
			for i := 0; !l.stop.Load(); i++ {
				cl := client.NewHTTP(*l.url.Load(), client.WithChannel("web"), client.WithActor(fmt.Sprintf("pd-w%d", w)))
				cmd := client.DisableTool(tools[i%2])
				if i%4 >= 2 {
					cmd = client.EnableTool(tools[i%2])
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				r, err := cl.Append(ctx, client.AppendRequest{Session: session, Commands: []client.Command{cmd}})
				cancel()
				if err != nil {
					l.fails.Add(1)
					time.Sleep(50 * time.Millisecond) // an engine restarting, or a stream electing
					continue
				}
				if r.LastSeq == 0 {
					l.noops.Add(1) // the command changed nothing: no event
					continue
				}
				l.mu.Lock()
				l.acked[session] = append(l.acked[session], r.LastSeq)
				p := events.Partition(session, deployPartitions)
				l.at[p] = append(l.at[p], time.Now())
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *pdLoad) halt() { l.stop.Store(true); l.wg.Wait() }

// since counts each partition's acknowledgements after from.
func (l *pdLoad) since(from time.Time) [deployPartitions]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n [deployPartitions]int
	for p, ts := range l.at {
		for _, at := range ts {
			if !at.Before(from) {
				n[p]++
			}
		}
	}
	return n
}

// waitEvery waits until every partition has acknowledged n appends since
// from.
func (l *pdLoad) waitEvery(t *testing.T, what string, from time.Time, n int) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		got := l.since(from)
		for _, k := range got {
			if k < n {
				return fmt.Errorf("%s: acknowledged appends per partition %v, want %d each", what, got, n)
			}
		}
		return nil
	})
}

// pdSessions returns per sessions of every partition.
func pdSessions(per int) []string {
	var out []string
	count := map[int]int{}
	for i := 0; len(out) < per*deployPartitions; i++ {
		s := fmt.Sprintf("pd-%03d", i)
		if p := events.Partition(s, deployPartitions); count[p] < per {
			count[p]++
			out = append(out, s)
		}
	}
	return out
}

// The engine spreads the partitions' leaders, all moved to one node, over
// the three nodes. Under
// load on every partition, kill -9 of the node leading each partition's
// stream in turn (restarted on its store before the next),
// then kill -9 of the engine (restarted on its data directory), loses no
// acknowledged append: each acknowledged sequence is in the session's
// partition stream, on the session's subject, and the restarted engine
// reads every session at or past its last acknowledged sequence. Each
// partition takes appends after each fault, and the engine is ready at
// the end.
func TestPartitionedDeploymentLeaderKills(t *testing.T) {
	c := natstest.StartProcessCluster(t, natstest.ProcessOptions{})
	dir := t.TempDir()
	p := startPartitioned(t, c, dir)
	stream := func(i int) string { return fmt.Sprintf("TOOLS_EVENTS_%d", i) }
	leaders := func() []int {
		var out []int
		for i := range deployPartitions {
			out = append(out, c.LeaderOf(stream(i), time.Second))
		}
		return out
	}
	// Every partition's leader moved to node 0; the engine places each
	// on its own node.
	nc0 := natstest.Connect(t, c.URLs())
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": c.NodeName(0)}})
	for i := range deployPartitions {
		natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
			if c.LeaderOf(stream(i), time.Second) == 0 {
				return nil
			}
			_, _ = nc0.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream(i), body, 5*time.Second)
			return fmt.Errorf("%s not led by n0 yet", stream(i))
		})
	}
	natstest.CheckFor(t, 90*time.Second, 250*time.Millisecond, func() error {
		ls := leaders()
		if slices.Contains(ls, -1) || len(slices.Compact(slices.Sorted(slices.Values(ls)))) != deployPartitions {
			return fmt.Errorf("partition leaders on nodes %v, want one each on distinct nodes", ls)
		}
		return nil
	})
	sessions := pdSessions(2)
	load := pdStartLoad(p.HTTPURL, sessions)
	defer load.halt()
	load.waitEvery(t, "warm-up", time.Time{}, 20)

	for i := range deployPartitions {
		leader := c.WaitLeaderOf(stream(i), 45*time.Second)
		at := time.Now()
		t.Logf("kill -9 n%d, leader of %s (leaders %v; acknowledged per partition so far: %v)", leader, stream(i), leaders(), load.since(time.Time{}))
		c.Kill(leader)
		load.waitEvery(t, fmt.Sprintf("after killing the leader of %s", stream(i)), at, 10)
		c.Start(leader)
		c.WaitFormed(45 * time.Second)
		natstest.CheckFor(t, 45*time.Second, 100*time.Millisecond, func() error {
			for j := range deployPartitions {
				if !c.StreamCurrent(stream(j)) {
					return fmt.Errorf("replicas of %s not current", stream(j))
				}
			}
			return nil
		})
	}

	at := time.Now()
	p.Kill()
	p = startPartitioned(t, c, dir)
	load.url.Store(&p.HTTPURL)
	load.waitEvery(t, "after kill -9 of the engine", at, 10)
	load.halt()

	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	layout := partitionedLayout(deployPartitions)
	cl := p.GoClient("web")
	total := 0
	for _, s := range sessions {
		name, subject := layout(s)
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		seqs := load.acked[s]
		if len(seqs) == 0 {
			t.Fatalf("session %s had no append acknowledged", s)
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
		got, err := cl.Intent(ctx, client.IntentRequest{Session: s, MinSeq: seqs[len(seqs)-1]})
		if err != nil {
			t.Fatalf("read %s after the restart: %v", s, err)
		}
		if last := seqs[len(seqs)-1]; got.Seq < last {
			t.Fatalf("%s reads at sequence %d after the restart, before its last acknowledged append %d", s, got.Seq, last)
		}
	}
	t.Logf("partitioned-leader-kills: %d acknowledged appends on %d sessions (per partition %v), every one in its partition's stream; %d failed or unknown during the faults, %d changed nothing",
		total, len(sessions), load.since(time.Time{}), load.fails.Load(), load.noops.Load())
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get(p.HTTPURL + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d after the faults: %s", resp.StatusCode, body)
		}
		return nil
	})
}

// A partitioned layout is refused where it cannot work or does not
// match, each time naming the bad value and the fix, creating nothing:
// --partitions without --nats; --partitions on a server whose engine user
// has the one-stream permissions (deploy/nats-server.conf), at once rather
// than waiting for ever; --partitions beside a one-stream engine serving
// a still empty store (the one-stream engine records its layout); a
// one-stream serve, and a serve with another number of partitions, on a
// store of 3.
func TestPartitionedServeRefusals(t *testing.T) {
	out, err := exec.Command(engineBin, "serve", "--data", t.TempDir(), "--http", "", "--partitions", "3").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "--partitions 3 needs --nats") {
		t.Fatalf("serve --partitions 3 on the embedded server: %v\n%s", err, out)
	}

	conf, opts := configOptions(t, permConfig)
	oneStream := natstest.ServerWith(t, *opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	out, err = exec.CommandContext(ctx, engineBin, "serve", "--nats", oneStream.ClientURL(), "--nats-user", "engine", "--nats-password", permUsers(t, conf)["engine"].password,
		"--partitions", "3", "--data", t.TempDir(), "--http", "").CombinedOutput()
	cancel()
	if !errors.As(err, &exit) || !strings.Contains(string(out), "refuses the engine's publish to tools.events.0.permission-probe") ||
		!strings.Contains(string(out), "deploy/partitioned/nats-server.conf") {
		t.Fatalf("serve --partitions 3 as an engine user with one-stream permissions: %v, want an exit naming the refused subject and the partitioned configuration\n%s", err, out)
	}
	// The refused serve created nothing: a one-stream engine starts there.
	admin := natstest.Connect(t, oneStream.ClientURL(), nats.UserInfo("admin", permUsers(t, conf)["admin"].password))
	ajs, err := natsjs.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	for name := range ajs.StreamNames(context.Background()).Name() {
		t.Fatalf("the refused serve created stream %s", name)
	}
	startEngine(t, t.TempDir(), "--nats", oneStream.ClientURL(), "--nats-user", "engine", "--nats-password", permUsers(t, conf)["engine"].password)

	empty := natstest.Server(t)
	startEngine(t, t.TempDir(), "--nats", empty.ClientURL())
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	out, err = exec.CommandContext(ctx, engineBin, "serve", "--nats", empty.ClientURL(), "--partitions", "3", "--data", t.TempDir(), "--http", "").CombinedOutput()
	cancel()
	if !errors.As(err, &exit) || !strings.Contains(string(out), "over one event stream") {
		t.Fatalf("serve --partitions 3 beside a one-stream engine serving an empty store: %v, want a refusal naming the one stream\n%s", err, out)
	}

	srv := natstest.Server(t)
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--partitions", "3")
	if _, err := p.GoClient("web").Append(context.Background(), client.AppendRequest{Session: "s1", Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "not one event stream: open it as 3 event streams"},
		{[]string{"--partitions", "2"}, "not 2 event streams: open it as 3 event streams"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, engineBin, append([]string{"serve", "--nats", srv.ClientURL(), "--data", t.TempDir(), "--http", ""}, tc.args...)...).CombinedOutput()
		cancel()
		if !errors.As(err, &exit) || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "--partitions K") {
			t.Fatalf("serve %v on a store of 3 partitions: %v, want a refusal saying %q and naming --partitions\n%s", tc.args, err, tc.want, out)
		}
	}
	nc := natstest.Connect(t, srv.ClientURL())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for name := range js.StreamNames(context.Background()).Name() {
		if name == "TOOLS_EVENTS" || name == "TOOLS_EVENTS_3" {
			t.Fatalf("a refused serve created stream %s", name)
		}
	}
}

// On a store of 3 partitions whose one-stream event stream also exists
// (empty: a registry push before the first serve creates it), engine
// events reads a session's events from its partition's stream, engine
// tail prints each partition's last events and then follows every
// partition (tail --from, a sequence of one stream, is refused), and
// engine registry push (which needs only the shared registry bucket)
// stores a registry the serving engine then serves.
func TestPartitionedStoreCLI(t *testing.T) {
	srv := natstest.Server(t)
	reg := filepath.Join(t.TempDir(), "reg.json")
	data, err := os.ReadFile("../examples/registry.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := pushRegistry(reg, srv.ClientURL(), t.TempDir()); err != nil {
		t.Fatalf("registry push before the first serve: %v\n%s", err, out)
	}
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--partitions", "3", "--registry-kv")
	ctx := context.Background()
	sessions := pdSessions(1)
	append1 := func(s string) {
		t.Helper()
		if _, err := p.GoClient("web").Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sessions {
		append1(s)
	}
	layout := partitionedLayout(deployPartitions)
	for _, s := range sessions {
		out, err := exec.Command(engineBin, "events", s, "--nats", srv.ClientURL()).CombinedOutput()
		_, subject := layout(s)
		if err != nil || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), `"subject":"`+subject+`"`) {
			t.Fatalf("engine events %s: %v, want its one event on %s\n%s", s, err, subject, out)
		}
	}

	out, err := exec.Command(engineBin, "tail", "--from", "2", "--nats", srv.ClientURL()).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "3 event streams") {
		t.Fatalf("engine tail --from 2 on 3 partitions: %v, want a refusal naming the streams\n%s", err, out)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, stdout, stderr := startFollowing(tctx, t, "tail", "--last", "10", "--nats", srv.ClientURL())
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		for i := range deployPartitions {
			if at, _ := stderr.find(0, "following", fmt.Sprintf("TOOLS_EVENTS_%d", i)); at < 0 {
				return fmt.Errorf("tail does not follow TOOLS_EVENTS_%d yet:\n%s", i, stderr)
			}
		}
		return nil
	})
	for _, s := range sessions {
		append1("new-" + s) // a session that did not exist when tail started
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		got := stdout.String()
		for _, s := range sessions {
			for _, session := range []string{s, "new-" + s} {
				if _, subject := layout(session); !strings.Contains(got, `"subject":"`+subject+`"`) {
					return fmt.Errorf("engine tail printed no event on %s:\n%s\n%s", subject, got, stderr)
				}
			}
		}
		return nil
	})

	var file map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	file["version"] = "partitioned-push"
	data, _ = json.Marshal(file)
	if err := os.WriteFile(reg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := pushRegistry(reg, srv.ClientURL(), t.TempDir()); err != nil {
		t.Fatalf("registry push on a partitioned store: %v\n%s", err, out)
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		var info wire.RegistryInfo
		if err := p.GoClient("web").Do(ctx, wire.OpRegistry, &wire.RegistryRequest{ToolLimit: 1}, &info); err != nil || info.Version != "partitioned-push" {
			return fmt.Errorf("serving %q (%v), want the pushed partitioned-push", info.Version, err)
		}
		return nil
	})
}

// The documented configuration of a partitioned deployment
// (deploy/partitioned/nats-server.conf, 3 partitions) gives each user what
// it needs and no more: the engine serves every partition as user engine
// (API on engine-api, purges as eraser); a channel user appends through
// the API to sessions of every partition; the backend publishes to
// tools.events.<session> as on one stream, its account's mapping stores
// the event in the session's partition with the expected-sequence check
// intact, the engine folds it, and the backend reads it back by direct
// get; an erase purges the session from its partition; the auditor reads
// by direct get and may not publish events.
func TestPartitionedDeployConfigPermissions(t *testing.T) {
	conf, opts := configOptions(t, "../deploy/partitioned/nats-server.conf")
	srv := natstest.ServerWith(t, *opts)
	url := srv.ClientURL()
	pw := permUsers(t, conf)
	p := startEngine(t, t.TempDir(), "--nats", url, "--partitions", fmt.Sprint(deployPartitions),
		"--nats-user", "engine", "--nats-password", pw["engine"].password,
		"--nats-api-user", "engine-api", "--nats-api-password", pw["engine-api"].password,
		"--nats-erase-user", "eraser", "--nats-erase-password", pw["eraser"].password)
	ctx := e2eCtx(t)
	layout := partitionedLayout(deployPartitions)

	web := permConnect(t, url, "web", pw["web"])
	sessions := pdSessions(1)
	for _, s := range sessions {
		if _, err := newNATSEngineClient(web.nc, client.WithChannel("web")).Append(ctx, s, nil, events.ToolsToggled{Enabled: e2eBool(true)}); err != nil {
			t.Fatalf("user web: append to %s: %v", s, err)
		}
	}

	backend := permConnect(t, url, "backend", pw["backend"])
	js, err := natsjs.New(backend.nc)
	if err != nil {
		t.Fatal(err)
	}
	bs := sessions[len(sessions)-1]
	stream, subject := layout(bs)
	publish := func(expected uint64, typ string, data map[string]any) (*natsjs.PubAck, error) {
		id := ulid.Make().String()
		msg := nats.NewMsg("tools.events." + bs)
		msg.Data = e2eWireBody(t, id, bs, "backend", "svc:billing", typ, data)
		msg.Header.Set("Nats-Msg-Id", id)
		msg.Header.Set("Nats-Expected-Last-Subject-Sequence", fmt.Sprint(expected))
		return js.PublishMsg(ctx, msg)
	}
	first, err := newNATSEngineClient(web.nc, client.WithChannel("web")).Intent(ctx, bs, 0)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := publish(first.Seq, "PresetChosen", map[string]any{"preset": "research"})
	if err != nil || ack.Stream != stream {
		t.Fatalf("backend publish to tools.events.%s: %+v, %v, want it stored in %s", bs, ack, err, stream)
	}
	if _, err := publish(first.Seq, "ToolDisabled", map[string]any{"name": "web_fetch"}); err == nil || !strings.Contains(err.Error(), "wrong last sequence") {
		t.Fatalf("backend publish expecting the stale sequence %d: %v, want the stream's wrong-last-sequence refusal", first.Seq, err)
	}
	v, err := p.Client("").Intent(ctx, bs, ack.Sequence)
	if err != nil || v.Intent.Preset != "research" || v.Skipped != 0 {
		t.Fatalf("backend's event not folded: %+v, %v", v, err)
	}
	msgs := permDirectReadFrom(t, backend.nc, stream, subject)
	if len(msgs) != 2 || permEnvelope(t, msgs[1])["type"] != "PresetChosen" {
		t.Fatalf("backend direct get of %s in %s: %d messages, want the append and its PresetChosen", subject, stream, len(msgs))
	}

	auditor := permConnect(t, url, "auditor", pw["auditor"])
	if got := permDirectReadFrom(t, auditor.nc, stream, subject); len(got) != 2 {
		t.Fatalf("auditor direct get of %s: %d messages, want 2", subject, len(got))
	}
	auditor.deniedPublish(t, subject, []byte("x"))

	if _, err := p.GoClient("ops").SessionDelete(ctx, client.DeleteRequest{Session: bs, Erase: true}); err != nil {
		t.Fatalf("erase of %s through the eraser user: %v", bs, err)
	}
	if got := permDirectReadFrom(t, backend.nc, stream, subject); len(got) != 1 || permEnvelope(t, got[0])["type"] != "SessionDeleted" {
		t.Fatalf("%s after the erase: %d messages, want its SessionDeleted tombstone only", subject, len(got))
	}
	for _, c := range []*permConn{web, backend, auditor} {
		c.mu.Lock()
		errs := slices.Clone(c.errs)
		c.mu.Unlock()
		if c != auditor && len(errs) > 0 {
			t.Fatalf("user %s met permission errors: %q", c.user, errs)
		}
	}
}

// An engine user that may not write the layout bucket (a configuration
// written before the bucket existed) does not stop a one-stream engine:
// it serves, and logs that the layout is not recorded and what that
// leaves open, naming the subject to allow.
func TestOneStreamServeWithoutLayoutPermissionServesAndSaysSo(t *testing.T) {
	conf, opts := configOptions(t, permConfig)
	for _, u := range opts.Users {
		if u.Username == "engine" {
			pub := u.Permissions.Publish
			n := len(pub.Allow)
			pub.Allow = slices.DeleteFunc(pub.Allow, func(s string) bool { return s == "$KV.TOOLS_LAYOUT.>" })
			if len(pub.Allow) != n-1 {
				t.Fatalf("%s: the engine user's publish allow-list %v has no $KV.TOOLS_LAYOUT.>", conf, pub.Allow)
			}
		}
	}
	srv := natstest.ServerWith(t, *opts)
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--nats-user", "engine", "--nats-password", permUsers(t, conf)["engine"].password)
	if _, err := p.GoClient("web").Append(context.Background(), client.AppendRequest{Session: "s1", Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "the one-stream layout is not recorded", "$KV.<PREFIX>_LAYOUT.>")
}

// Retention on a store of 3 partitions: the engine running the first
// partition's projection deletes the idle sessions of every partition,
// and keeps the fresh ones.
func TestPartitionedRetentionDeletesIdleSessionsOfEveryPartition(t *testing.T) {
	srv := natstest.Server(t)
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--partitions", fmt.Sprint(deployPartitions),
		"--retain-idle", "90d", "--retain-tick", "200ms")
	nc := natstest.Connect(t, srv.ClientURL())
	layout := partitionedLayout(deployPartitions)
	old := time.Now().Add(-100 * 24 * time.Hour)
	idle := pdSessions(2)
	for _, s := range idle {
		_, subject := layout(s)
		publishAgedTo(t, nc, subject, s, old, events.ToolsToggled{Enabled: e2eBool(true)})
	}
	ctx := context.Background()
	c := p.GoClient("web")
	fresh := []string{"fresh-a", "fresh-b", "fresh-c", "fresh-d"}
	for _, s := range fresh {
		if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
	}
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		for _, s := range idle {
			if _, err := c.Intent(ctx, client.IntentRequest{Session: s}); !errors.Is(err, client.ErrDeleted) {
				name, _ := layout(s)
				return fmt.Errorf("idle session %s of %s: %v, want deleted", s, name, err)
			}
		}
		return nil
	})
	for _, s := range fresh {
		if _, err := c.Intent(ctx, client.IntentRequest{Session: s}); err != nil {
			t.Fatalf("fresh session %s: %v, want kept", s, err)
		}
	}
}

// Erase and compaction on a store of 3 partitions survive a restart of
// both the engine (kill -9) and the NATS server, after the server has
// compacted the purged blocks (its sync interval set to 1 s, instead of
// 2 minutes): the engine starts ready with no damage on any partition,
// the erased sessions read as deleted, and the compacted ones keep their
// state and take appends.
func TestPartitionedEraseAndCompactSurviveRestarts(t *testing.T) {
	dir := t.TempDir()
	start := func() *jetstream.Embedded {
		srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir, SyncEvery: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return srv
	}
	srv := start()
	args := []string{"--partitions", fmt.Sprint(deployPartitions)}
	p := startEngine(t, t.TempDir(), append([]string{"--nats", srv.ClientURL()}, args...)...)
	ctx := context.Background()
	web, ops := p.GoClient("web"), p.GoClient("ops")
	sessions := pdSessions(2) // two of each partition, in partition-spread order
	erased, compacted := map[string]bool{}, map[string]bool{}
	seen := map[int]bool{}
	for _, s := range sessions {
		for _, cmd := range []client.Command{client.DisableTool("bash"), client.EnableTool("bash"), client.DisableTool("grep")} {
			if _, err := web.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{cmd}}); err != nil {
				t.Fatal(err)
			}
		}
		if part := events.Partition(s, deployPartitions); !seen[part] {
			seen[part] = true
			if _, err := ops.SessionDelete(ctx, client.DeleteRequest{Session: s, Erase: true}); err != nil {
				t.Fatalf("erase %s: %v", s, err)
			}
			erased[s] = true
			continue
		}
		if _, err := ops.SessionCompact(ctx, client.CompactRequest{Session: s}); err != nil {
			t.Fatalf("compact %s: %v", s, err)
		}
		compacted[s] = true
	}
	time.Sleep(3 * time.Second) // the server's sync interval passes: purged blocks are compacted

	p.Kill()
	srv.Shutdown()
	srv = start()
	p = startEngine(t, t.TempDir(), append([]string{"--nats", srv.ClientURL()}, args...)...)
	web = p.GoClient("web")
	for s := range erased {
		if _, err := web.Intent(ctx, client.IntentRequest{Session: s}); !errors.Is(err, client.ErrDeleted) {
			t.Fatalf("erased %s after the restarts: %v, want deleted", s, err)
		}
	}
	for s := range compacted {
		v, err := web.Intent(ctx, client.IntentRequest{Session: s})
		if err != nil || !slices.Contains(v.Intent.Disabled, "grep") || slices.Contains(v.Intent.Disabled, "bash") {
			t.Fatalf("compacted %s after the restarts: %+v, %v, want grep disabled and bash not", s, v.Intent, err)
		}
		if _, err := web.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
			t.Fatalf("append to compacted %s after the restarts: %v", s, err)
		}
	}
	resp, err := http.Get(p.HTTPURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for i := range deployPartitions {
		if want := fmt.Sprintf(`"log_damage_%d":{"ok":true}`, i); !strings.Contains(string(body), want) {
			t.Fatalf("/readyz after the restarts: %s, want %s", body, want)
		}
	}
}

// engine rebuild and engine stream repair work on every partition of a
// store of 3: a view deleted from one partition's bucket is written again
// (each stream's rebuild named in the output), a partition stream whose
// configuration was changed is repaired while the others are left as they
// are, and a partition stream deleted is named, not created empty.
func TestPartitionedRebuildAndStreamRepair(t *testing.T) {
	srv := natstest.Server(t)
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--partitions", fmt.Sprint(deployPartitions))
	ctx := context.Background()
	sessions := pdSessions(1)
	for _, s := range sessions {
		for _, cmd := range []client.Command{client.DisableTool("bash"), client.DisableTool("grep")} {
			if _, err := p.GoClient("web").Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{cmd}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.Stop(t)

	nc := natstest.Connect(t, srv.ClientURL())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	victim := sessions[len(sessions)-1]
	vp := events.Partition(victim, deployPartitions)
	views, err := js.KeyValue(ctx, fmt.Sprintf("TOOLS_VIEWS_%d", vp))
	if err != nil {
		t.Fatal(err)
	}
	if err := views.Purge(ctx, victim); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(engineBin, "rebuild", "--nats", srv.ClientURL(), "--data", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("engine rebuild of 3 partitions: %v\n%s", err, out)
	}
	for i := range deployPartitions {
		if want := fmt.Sprintf("rebuilt views from 2 events (stream TOOLS_EVENTS_%d,", i); !strings.Contains(string(out), want) {
			t.Fatalf("engine rebuild output lacks %q:\n%s", want, out)
		}
	}
	if _, err := views.Get(ctx, victim); err != nil {
		t.Fatalf("view of %s in TOOLS_VIEWS_%d after the rebuild: %v", victim, vp, err)
	}

	changed := fmt.Sprintf("TOOLS_EVENTS_%d", vp)
	st, err := js.Stream(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	want := cfg.MaxMsgsPerSubject
	cfg.MaxMsgsPerSubject = 1000
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(engineBin, "stream", "repair", "--nats", srv.ClientURL(), "--data", t.TempDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stream "+changed+": repaired") || strings.Count(string(out), "nothing to repair") != deployPartitions-1 {
		t.Fatalf("engine stream repair with %s changed: %v, want it repaired and the other two left\n%s", changed, err, out)
	}
	if info, err := st.Info(ctx); err != nil || info.Config.MaxMsgsPerSubject != want {
		t.Fatalf("%s after the repair: max_msgs_per_subject %v, %v, want %v", changed, info.Config.MaxMsgsPerSubject, err, want)
	}

	// A partition's stream lost: rebuild and stream repair refuse, naming
	// it, and do not create it empty.
	if err := js.DeleteStream(ctx, changed); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"rebuild"}, {"stream", "repair"}} {
		out, err := exec.Command(engineBin, append(args, "--nats", srv.ClientURL(), "--data", t.TempDir())...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(string(out), "missing: "+changed) {
			t.Fatalf("engine %v with %s deleted: %v, want a refusal naming it\n%s", args, changed, err, out)
		}
		if _, err := js.Stream(ctx, changed); !errors.Is(err, natsjs.ErrStreamNotFound) {
			t.Fatalf("engine %v recreated %s: %v", args, changed, err)
		}
	}
}

// configOptions parses the nats-server configuration at path (includes
// resolved) and returns its absolute path and the server options.
func configOptions(t *testing.T, path string) (string, *server.Options) {
	t.Helper()
	conf, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("parse %s: %v", conf, err)
	}
	return conf, opts
}
