package tests

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolintent/engine/internal/natstest"
)

// Argument errors exit 2, kong's and the commands' own
// (`emit s3 pick` with no names exited 1); under --json the failure is
// the API's error envelope on stderr.
func TestCLIArgumentErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"emit", "s3", "pick"}, {"emit", "s3", "web-search", "maybe"}, {"emit", "s3", "frobnicate"}, {"resolve"}} {
		r := runBin(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("engine %v: exit %d, stderr %q; want 2 and the help hint", args, r.code, r.stderr)
		}
		r = runBin(t, nil, append(args, "--json")...)
		var env struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.stderr), &env); r.code != 2 || err != nil || env.Error.Code != "usage" || env.Error.Message == "" {
			t.Errorf("engine %v --json: exit %d, stderr %q; want 2 and {\"error\":{\"code\":\"usage\",...}}", args, r.code, r.stderr)
		}
	}
}

// A failure other than usage under --json is the envelope
// too, with its code, and exits 1.
func TestCLIJSONErrorUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := runBin(t, nil, "resolve", "s1", "--server", addr, "--json")
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &env); r.code != 1 || err != nil || env.Error.Code != "unreachable" || !strings.Contains(env.Error.Message, addr) {
		t.Errorf("unreachable --json: exit %d, stderr %q", r.code, r.stderr)
	}
}

// The NATS port given as --server, and the HTTP port given
// as --nats, are named at once (before: 6.9 s, then "EOF"); a NATS server
// that wants credentials, given none, says which flags give them (before:
// "is engine serve running?").
func TestCLIWrongPortAndMissingCredentials(t *testing.T) {
	ns := natstest.Server(t)
	natsAddr := strings.TrimPrefix(ns.ClientURL(), "nats://")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer hs.Close()
	httpAddr := strings.TrimPrefix(hs.URL, "http://")

	start := time.Now()
	r := runBin(t, nil, "resolve", "s1", "--server", natsAddr)
	if r.code != 1 || !strings.Contains(r.stderr, "is a NATS server") || !strings.Contains(r.stderr, "--nats nats://"+natsAddr) || time.Since(start) > 5*time.Second {
		t.Errorf("NATS port as --server: exit %d after %v, stderr %q", r.code, time.Since(start), r.stderr)
	}
	r = runBin(t, nil, "intent", "s1", "--nats", "nats://"+httpAddr, "--data", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "is an HTTP server") || !strings.Contains(r.stderr, "--server "+httpAddr) {
		t.Errorf("HTTP port as --nats: exit %d, stderr %q", r.code, r.stderr)
	}

	opts := &server.Options{Host: "127.0.0.1", Port: -1, Username: "engine", Password: "s3cret", NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(s.Addr().(*net.TCPAddr).Port)
	r = runBin(t, nil, "intent", "s1", "--nats", url, "--data", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "wants credentials and none were given") || !strings.Contains(r.stderr, "--nats-user") || strings.Contains(r.stderr, "running") {
		t.Errorf("no credentials: exit %d, stderr %q", r.code, r.stderr)
	}
}

// `engine --version` prints one line; every `engine serve`
// flag is listed with its ENGINE_ environment variable in --help, and the
// variable is honoured.
func TestCLIVersionFlagAndServeEnv(t *testing.T) {
	r := runBin(t, nil, "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "engine ") || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Errorf("--version: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, nil, "serve", "--help")
	for _, env := range []string{"ENGINE_LISTEN", "ENGINE_HTTP", "ENGINE_SYNC", "ENGINE_PREFIX", "ENGINE_REPLICAS", "ENGINE_MIN_FREE", "ENGINE_SHUTDOWN_TIMEOUT", "ENGINE_TLS_CA", "ENGINE_HTTP_ORIGIN"} {
		if !strings.Contains(r.stdout, "$"+env) {
			t.Errorf("serve --help does not list %s", env)
		}
	}
	// An invalid value by environment is refused as the flag would be.
	r = runBin(t, []string{"ENGINE_SYNC=sometimes"}, "serve", "--data", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "sometimes") {
		t.Errorf("ENGINE_SYNC=sometimes: exit %d, stderr %q; want 2 naming the value", r.code, r.stderr)
	}
}

// Shell completion (kongplete): with COMP_LINE set the binary
// completes commands and flags; `engine completion` prints the setup line
// for the login shell.
func TestCLICompletion(t *testing.T) {
	for line, want := range map[string]string{"engine ser": "serve", "engine serve --sy": "--sync", "engine emit --ti": "--timeout"} {
		r := runBin(t, []string{"COMP_LINE=" + line}, "")
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("COMP_LINE=%q: exit %d, %q %q; want %s", line, r.code, r.stdout, r.stderr, want)
		}
	}
	r := runBin(t, []string{"SHELL=/bin/bash"}, "completion")
	if r.code != 0 || !strings.Contains(r.stdout, "complete -C ") || !strings.HasSuffix(strings.TrimSpace(r.stdout), " engine") {
		t.Errorf("engine completion: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}
