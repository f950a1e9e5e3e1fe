package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
)

// usageError is a command line the command cannot run (a missing or
// malformed argument): exit 2, like kong's parse errors.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage marks err as an argument error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err: err}
}

// exitCode is the process's exit status for a failed command: 2 for
// argument errors, 1 for every other failure.
func exitCode(err error) int {
	var ue *usageError
	var pe *kong.ParseError
	if errors.As(err, &ue) || errors.As(err, &pe) {
		return 2
	}
	return 1
}

// errorCode is the "code" of a failure printed as JSON: the engine's
// error code for its replies, "usage" for argument errors, "unreachable"
// when the engine could not be reached, else "failed".
func errorCode(err error) string {
	var ce *client.Error
	var un *unreachableError
	var wp *wrongPortError
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case exitCode(err) == 2:
		return "usage"
	case errors.As(err, &un), errors.As(err, &wp):
		return "unreachable"
	}
	return "failed"
}

// printError reports a failure on stderr: one line, or with --json the
// API's error envelope {"error":{"code":...,"message":...}},
// so that a script reading JSON reads its failures too.
func printError(w io.Writer, err error, asJSON bool, hint string) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]any{"error": map[string]any{"code": errorCode(err), "message": err.Error()}})
		return
	}
	if hint != "" {
		fmt.Fprintf(w, "engine: %v\n%s\n", err, hint)
		return
	}
	fmt.Fprintf(w, "engine: %v\n", err)
}

// jsonWanted reports --json on the command line (kctx nil: parsing
// failed, the raw arguments are read).
func jsonWanted(kctx *kong.Context, args []string) bool {
	if kctx != nil {
		for _, f := range kctx.Flags() {
			if f.Name == "json" {
				if v, ok := kctx.FlagValue(f).(bool); ok && v {
					return true
				}
			}
		}
		return false
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// wrongPortError is a connection to a port that speaks the other
// protocol: NATS where HTTP was asked for, or the reverse.
type wrongPortError struct {
	flag, addr, is, want string
}

func (e *wrongPortError) Error() string {
	return fmt.Sprintf("%s %s is %s, not %s: %s", e.flag, e.addr, e.is, e.want, map[string]string{
		"--server": "--server takes the engine's HTTP address (engine serve --http, default 127.0.0.1:7420); to talk NATS give --nats nats://" + e.addr,
		"--nats":   "--nats takes the NATS address (engine serve --listen, default nats://127.0.0.1:4222); to talk HTTP give --server " + e.addr,
	}[e.flag])
}

// hostPort is the host:port of a URL or of a bare address.
func hostPort(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// speaksNATS reports whether addr greets like a NATS server (INFO {...}
// right after connecting). It sends an HTTP request first, so that an
// HTTP server answers at once instead of leaving the read to time out:
// the check costs one local round trip.
func speaksNATS(addr string) bool {
	c, err := net.DialTimeout("tcp", hostPort(addr), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("HEAD /healthz HTTP/1.0\r\n\r\n"))
	head := make([]byte, 5)
	n, _ := io.ReadFull(c, head)
	return string(head[:n]) == "INFO "
}

// speaksHTTP reports whether addr answers an HTTP request.
func speaksHTTP(addr string) bool {
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + hostPort(addr) + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// checkHTTPServer refuses a --server that is a NATS port at once.
func checkHTTPServer(server string) error {
	if speaksNATS(server) {
		return &wrongPortError{flag: "--server", addr: hostPort(server), is: "a NATS server", want: "the engine's HTTP API"}
	}
	return nil
}

// natsFailure explains a failed NATS connection: an HTTP port given as
// --nats, or a server that wants credentials none were given for.
func natsFailure(addr string, err error, haveCreds bool, data string) error {
	if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		if !haveCreds {
			return fmt.Errorf("NATS at %s wants credentials and none were given: pass --nats-user/--nats-password, --nats-creds or --context, or --data with the data directory of the local `engine serve` (its nats-users.json; %q has none): %w", addr, data, err)
		}
		return fmt.Errorf("NATS at %s refused the credentials given: %w", addr, err)
	}
	for _, a := range strings.Split(addr, ",") {
		if speaksHTTP(a) {
			return &wrongPortError{flag: "--nats", addr: hostPort(a), is: "an HTTP server", want: "a NATS server"}
		}
	}
	return nil
}
