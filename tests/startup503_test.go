package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/internal/natstest"
)

// While `engine serve` starts (here: waiting for a NATS
// server that is not there), an API route answers 503 with the API's JSON
// error envelope (code "unavailable"), not a text/plain line.
func TestStartup503IsErrorEnvelope(t *testing.T) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	// The NATS address is held by a listener that never accepts: the
	// engine's connect waits for an INFO that never comes and gives up
	// (a transient failure it waits out), and no other process can take
	// the port meanwhile. A port only found free once was taken by a
	// concurrent test's nats-server in a CI run here, and the engine
	// connected to it.
	nats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nats.Close() })
	natsAddr, addr := nats.Addr().String(), free()
	cmd := exec.Command(engineBin, "serve", "--nats", "nats://"+natsAddr, "--data", t.TempDir(), "--http", addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var ct, body string
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-exited:
			t.Fatalf("engine exited while waiting: %s", stderr.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/v1/sessions")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("GET /v1/sessions: %d %s", resp.StatusCode, b)
		}
		ct, body = resp.Header.Get("Content-Type"), string(b)
		if !strings.Contains(body, "waiting for NATS") {
			return fmt.Errorf("GET /v1/sessions: 503 %s, not yet naming the wait for NATS", b)
		}
		return nil
	})
	if mt, _, _ := mime.ParseMediaType(ct); mt != api.MIMEJSON {
		t.Errorf("start-up 503 Content-Type = %q, want %s; body %s", ct, api.MIMEJSON, body)
	}
	var env struct {
		Error *api.APIError `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error == nil {
		t.Fatalf("start-up 503 body %q is not the error envelope: %v", body, err)
	}
	if env.Error.Code != api.CodeUnavailable || !strings.Contains(env.Error.Message, "waiting for NATS") {
		t.Errorf("start-up 503 error = %+v, want code %s naming the wait", env.Error, api.CodeUnavailable)
	}
	t.Logf("startup-503: %s %s", ct, strings.TrimSpace(body))
}
