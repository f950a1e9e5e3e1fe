package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/natstest"
)

// lineLog collects a process's stderr lines.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) follow(r *bufio.Scanner) {
	for r.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, r.Text())
		l.mu.Unlock()
	}
}

// find returns the first line after index from that contains every part.
func (l *lineLog) find(from int, parts ...string) (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for i := from; i < len(l.lines); i++ {
		for _, p := range parts {
			if !strings.Contains(l.lines[i], p) {
				continue next
			}
		}
		return i, l.lines[i]
	}
	return -1, ""
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// `engine serve --nats` started before its cluster waits for
// it (saying why, with back-off) and never exits on the transient absence:
// first no node listens, then one node runs without a JetStream meta
// leader (no quorum of three); when the other two start, the engine opens
// the stream, the registry bucket and the erase path, each created as the
// cluster forms: an append succeeds, and so does an erase.
func TestServeWaitsForCluster(t *testing.T) {
	c := natstest.NewProcessCluster(t, natstest.ProcessOptions{})
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(engineBin, "serve", "--nats", c.URLs(), "--replicas", "3", "--data", t.TempDir(),
		"--http", "127.0.0.1:0", "--ready-file", ready, "--registry-kv")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &lineLog{}
	// exited is closed (never sent on) once the engine is gone, so the
	// checks below and the clean-up can all see it: a value sent once
	// and taken by a check left the clean-up waiting for ever (a CI run
	// hung 20 minutes here).
	exited := make(chan struct{})
	var exitErr error
	go func() {
		logs.follow(bufio.NewScanner(stderr))
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitLine := func(what string, from int, parts ...string) int {
		t.Helper()
		var at int
		natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			select {
			case <-exited:
				t.Fatalf("engine exited while %s: %v\n%s", what, exitErr, logs)
			default:
			}
			if at, _ = logs.find(from, parts...); at < 0 {
				return fmt.Errorf("no log line %q while %s", parts, what)
			}
			return nil
		})
		return at
	}

	// Nothing listens: the engine says it waits to connect.
	at := waitLine("no node listens", 0, "waiting for NATS", "connect to")
	// Waits twice more (back-off), still running.
	at = waitLine("no node listens", at+1, "waiting for NATS", "connect to")

	// One node of three: connected, but no meta leader to look the
	// stream up.
	c.Start(0)
	waitLine("one node runs", at+1, "waiting for NATS", "open the event stream")
	if _, err := os.Stat(ready); err == nil {
		t.Fatalf("engine wrote its ready file without a JetStream cluster")
	}

	// The rest of the cluster: the engine serves and appends.
	c.Start(1)
	c.Start(2)
	var info struct {
		HTTPAddr string `json:"http_addr"`
	}
	natstest.CheckFor(t, 90*time.Second, 100*time.Millisecond, func() error {
		select {
		case <-exited:
			t.Fatalf("engine exited while the cluster formed: %v\n%s", exitErr, logs)
		default:
		}
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &info)
	})
	cl := client.NewHTTP("http://"+info.HTTPAddr, client.WithChannel("web"), client.WithActor("test"))
	var res client.AppendReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err = cl.Append(ctx, client.AppendRequest{Session: "wait-1", Commands: []client.Command{client.DisableTool("bash")}})
		return err
	})
	ops := client.NewHTTP("http://"+info.HTTPAddr, client.WithChannel("ops"), client.WithActor("test"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	del, err := ops.SessionDelete(ctx, client.DeleteRequest{Session: "wait-1", Erase: true, Reason: "test"})
	if err != nil || !del.Erased || del.Purged == 0 {
		t.Fatalf("erase on the engine that waited for its cluster: %+v, %v; want the session's events purged", del, err)
	}
	t.Logf("serve-wait: appended at %d after waiting; waits logged: %d", res.LastSeq, strings.Count(logs.String(), "waiting for NATS"))
}

// startFollowing runs engineBin with args until ctx ends, following its
// standard output and error line by line.
func startFollowing(ctx context.Context, t *testing.T, args ...string) (cmd *exec.Cmd, stdout, stderr *lineLog) {
	t.Helper()
	cmd = exec.CommandContext(ctx, engineBin, args...)
	stdout, stderr = &lineLog{}, &lineLog{}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go stdout.follow(bufio.NewScanner(outPipe))
	go stderr.follow(bufio.NewScanner(errPipe))
	return cmd, stdout, stderr
}
