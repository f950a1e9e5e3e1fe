package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// engineBin is the engine binary built once by TestMain from ./cmd/engine.
var engineBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "engine-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	engineBin = filepath.Join(dir, "engine")
	build := exec.Command("go", "build", "-o", engineBin, "./cmd/engine")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build engine:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// engineProc is a running `engine serve` process.
type engineProc struct {
	cmd     *exec.Cmd
	NATSURL string
	HTTPURL string
	DataDir string
	Stderr  *logBuffer
	exited  chan struct{}
	exitErr error
	killed  bool
	// anonymous: the engine serves an external server that lets anyone
	// in (a test cluster), not its embedded one with generated users.
	anonymous bool
}

// logBuffer holds an engine's stderr. The exec package's goroutine copies
// the engine's writes into it while the test reads it, so both sides
// lock.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits (10 s at most) until the engine's stderr holds every one
// of want. A line the engine wrote before an answer the test saw may
// still be in the pipe to the test: a running engine's log is waited
// for, never read once.
func (p *engineProc) waitLog(t *testing.T, want ...string) {
	t.Helper()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		s := p.Stderr.String()
		for _, w := range want {
			if !strings.Contains(s, w) {
				return fmt.Errorf("the engine's log does not say %q:\n%s", w, tail(s))
			}
		}
		return nil
	})
}

// startEngine runs `engine serve` on dataDir with random ports and waits
// until it is ready (ready file written and /readyz answering). Extra
// args are appended. The process is killed at test cleanup if still up.
func startEngine(t *testing.T, dataDir string, args ...string) *engineProc {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	argv := append([]string{"serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--ready-file", ready}, args...)
	cmd := exec.Command(engineBin, argv...)
	p := &engineProc{cmd: cmd, DataDir: dataDir, Stderr: &logBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start engine: %v", err)
	}
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.Kill() })
	var info struct {
		NATSURL  string `json:"nats_url"`
		HTTPAddr string `json:"http_addr"`
	}
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-p.exited:
			t.Fatalf("engine exited before ready: %v\n%s", p.exitErr, p.Stderr)
		default:
		}
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &info); err != nil {
			return err
		}
		resp, err := http.Get("http://" + info.HTTPAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	p.NATSURL, p.HTTPURL = info.NATSURL, "http://"+info.HTTPAddr
	return p
}

// natsAuth logs in as the engine user of the process's embedded server,
// whose generated users are in its data directory (nobody
// connects anonymously).
func (p *engineProc) natsAuth(t testing.TB) nats.Option {
	t.Helper()
	if p.anonymous {
		return func(*nats.Options) error { return nil }
	}
	cr, err := jetstream.ReadCredentials(p.DataDir)
	if err != nil {
		t.Fatalf("engine's NATS users: %v", err)
	}
	return nats.UserInfo(cr.Engine.User, cr.Engine.Password)
}

// adminAuth logs in as the admin of the process's embedded server.
func (p *engineProc) adminAuth(t testing.TB) nats.Option {
	t.Helper()
	cr, err := jetstream.ReadCredentials(p.DataDir)
	if err != nil {
		t.Fatalf("engine's NATS users: %v", err)
	}
	return nats.UserInfo(cr.Admin.User, cr.Admin.Password)
}

// Client is an HTTP API client of the process.
func (p *engineProc) Client(channel string) *engineClient {
	return newEngineClient(p.HTTPURL, client.WithChannel(channel), client.WithActor("test"))
}

// GoClient is the Go client (package client) of the engine's HTTP gateway
// as channel, actor "test": what Client gives, with wire's types.
func (p *engineProc) GoClient(channel string) *client.Client {
	return client.NewHTTP(p.HTTPURL, client.WithChannel(channel), client.WithActor("test"))
}

// Kill sends SIGKILL (a crash: no shutdown code runs) and waits.
func (p *engineProc) Kill() {
	if p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.killed = true
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends SIGTERM (graceful) and waits for the exit status.
func (p *engineProc) Stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("engine did not stop within 30s after SIGTERM\n%s", p.Stderr)
	}
	if p.exitErr != nil {
		t.Fatalf("engine exited with %v after SIGTERM\n%s", p.exitErr, p.Stderr)
	}
}

// runCLI runs an engine subcommand against the process and returns stdout.
func (p *engineProc) runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, engineBin, append(args, "--server", p.HTTPURL)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%v: %s", err, errb.String())
	}
	return out.String(), nil
}
