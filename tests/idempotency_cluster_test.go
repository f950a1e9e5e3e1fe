package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// clusterEngine is an `engine serve` process on a process cluster.
type clusterEngine struct {
	cmd    *exec.Cmd
	url    string
	logs   *lineLog
	exited chan error
}

// startClusterEngine runs `engine serve --nats` on c and waits until it
// has written its ready file.
func startClusterEngine(t *testing.T, c *natstest.ProcessCluster) *clusterEngine {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(engineBin, "serve", "--nats", c.URLs(), "--replicas", "3", "--data", t.TempDir(),
		"--http", "127.0.0.1:0", "--ready-file", ready)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &clusterEngine{cmd: cmd, logs: &lineLog{}, exited: make(chan error, 1)}
	go func() {
		e.logs.follow(bufio.NewScanner(stderr))
		e.exited <- cmd.Wait()
	}()
	t.Cleanup(e.kill)
	var info struct {
		HTTPAddr string `json:"http_addr"`
	}
	natstest.CheckFor(t, 90*time.Second, 50*time.Millisecond, func() error {
		select {
		case err := <-e.exited:
			t.Fatalf("engine exited before ready: %v\n%s", err, e.logs)
		default:
		}
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &info)
	})
	e.url = "http://" + info.HTTPAddr
	return e
}

// kill sends SIGKILL and waits for the process to end.
func (e *clusterEngine) kill() {
	if e.cmd.ProcessState != nil {
		return
	}
	_ = e.cmd.Process.Kill()
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
	}
}

// On separate nats-server processes: a client whose engine is
// SIGKILLed while its append is in flight retries with the same
// idempotency key on another engine and learns the original sequence; a
// retry of an acknowledged append returns it too; each key is stored once.
func TestIdempotentRetryAcrossEngineKill(t *testing.T) {
	c := natstest.StartProcessCluster(t, natstest.ProcessOptions{})
	a := startClusterEngine(t, c)
	ca := client.NewHTTP(a.url, client.WithChannel("web"), client.WithActor("client"))
	ctx := context.Background()
	const session = "idem-kill"
	var first client.AppendReply
	k1 := events.NewID()
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		first, err = ca.Append(ctx, client.AppendRequest{Session: session, EventID: k1, Commands: []client.Command{client.DisableTool("bash")}})
		return err
	})
	// An append in flight when the engine dies.
	k2 := events.NewID()
	inflight := make(chan error, 1)
	go func() {
		_, err := ca.Append(ctx, client.AppendRequest{Session: session, EventID: k2, Commands: []client.Command{client.DisableTool("grep")}})
		inflight <- err
	}()
	a.kill()
	errA := <-inflight

	b := startClusterEngine(t, c)
	cb := client.NewHTTP(b.url, client.WithChannel("web"), client.WithActor("client"))
	var r1, r2, r2again client.AppendReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		r1, err = cb.Append(ctx, client.AppendRequest{Session: session, EventID: k1, Commands: []client.Command{client.DisableTool("bash")}})
		return err
	})
	if !r1.Duplicate || r1.LastSeq != first.LastSeq || len(r1.EventIDs) != 1 || r1.EventIDs[0] != wire.IdempotencyEventIDs(session, k1, 1)[0] {
		t.Fatalf("retry of the acknowledged append: %+v, want seq %d duplicate", r1, first.LastSeq)
	}
	var err error
	if r2, err = cb.Append(ctx, client.AppendRequest{Session: session, EventID: k2, Commands: []client.Command{client.DisableTool("grep")}}); err != nil {
		t.Fatalf("retry of the append in flight: %v", err)
	}
	if r2again, err = cb.Append(ctx, client.AppendRequest{Session: session, EventID: k2, Commands: []client.Command{client.DisableTool("grep")}}); err != nil {
		t.Fatal(err)
	}
	if r2.LastSeq == 0 || !r2again.Duplicate || r2again.LastSeq != r2.LastSeq {
		t.Fatalf("in-flight append: retry %+v then %+v, want one sequence", r2, r2again)
	}
	v := clOpenEngine(t, c.URLs(), "verifier", jetstream.LogConfig{Replicas: 3}, service.Config{})
	recs, err := v.log.ReadSession(ctx, session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		count[r.Envelope.ID]++
	}
	id1, id2 := wire.IdempotencyEventIDs(session, k1, 1)[0], wire.IdempotencyEventIDs(session, k2, 1)[0]
	if count[id1] != 1 || count[id2] != 1 || len(recs) != 2 {
		t.Fatalf("log has %d events, key 1 %d times, key 2 %d times; want 2, once each", len(recs), count[k1], count[k2])
	}
	t.Logf("idempotent-retry: in-flight append on the killed engine returned %v; its retry stored at %d (duplicate %v)", errA, r2.LastSeq, r2.Duplicate)
}
