package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// editedRegistry is the default registry with version and tool's
// description replaced: one tool whose contract bytes change.
func editedRegistry(t *testing.T, version, tool, description string) json.RawMessage {
	t.Helper()
	var reg map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &reg); err != nil {
		t.Fatal(err)
	}
	reg["version"] = version
	found := false
	for _, x := range reg["tools"].([]any) {
		if m := x.(map[string]any); m["name"] == tool {
			m["description"] = description
			found = true
		}
	}
	if !found {
		t.Fatalf("the default registry has no tool %q", tool)
	}
	b, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The call-check operation over both transports. A tool
// the user disabled mid-turn is still in the turn's frozen tools but is
// refused (200, callable false, reason disabled); a known tool of the
// turn is allowed with its permission, decision and channel; outside a
// turn it is no_turn (409), without a tool invalid (400); it writes no
// event.
func TestCallCheckBothTransports(t *testing.T) {
	e := newEnv(t, Config{})
	transports(t, e, func(t *testing.T, c *Client) {
		ctx := ctxT(t)
		s := "cc-" + t.Name()[len("TestCallCheckBothTransports/"):]
		if _, err := c.Append(ctx, s, nil, events.PresetChosen{Preset: "minimal"}); err != nil {
			t.Fatal(err)
		}
		_, err := c.CallCheck(ctx, s, "bash")
		asAPIError(t, err, http.StatusConflict, wire.CodeNoTurn)
		if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: s}); err != nil {
			t.Fatal(err)
		}
		r, err := c.CallCheck(ctx, s, "bash")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Callable || r.Reason != wire.CallCallable || r.Tool == nil || r.Tool.Name != "bash" || r.Permission == "" ||
			r.Decision != "allow" || r.Rule == "" || r.Channel == "" || r.Turn != 1 {
			t.Fatalf("bash in the turn: %+v", r)
		}
		app, err := c.Append(ctx, s, nil, events.ToolDisabled{Name: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		r, err = c.CallCheck(ctx, s, "bash")
		if err != nil {
			t.Fatal(err)
		}
		if r.Callable || r.Reason != wire.CallDisabled || r.Note == "" || r.Tool == nil {
			t.Fatalf("bash disabled mid-turn: %+v", r)
		}
		_, err = c.CallCheck(ctx, s, "")
		asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
		// Read-only: the log ends where the disable left it.
		st, err := c.Intent(ctx, s, app.LastSeq)
		if err != nil {
			t.Fatal(err)
		}
		if st.Seq != app.LastSeq {
			t.Fatalf("call-check wrote events: seq %d after the disable at %d", st.Seq, app.LastSeq)
		}
	})
}

// Over HTTP the body is {"tool"} and the session is in the
// path; the reply carries the policy fields by their JSON names; a read-only
// token may call it (it writes nothing), not turn-begin.
func TestCallCheckHTTPBodyAndReadOnlyToken(t *testing.T) {
	toks, err := tokens.Parse([]byte(`[{"token":"web-token-0123456789","channel":"web"},{"token":"audit-token-0123456789","channel":"audit","read_only":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{Tokens: toks})
	web := []string{"Authorization", "Bearer web-token-0123456789"}
	audit := []string{"Authorization", "Bearer audit-token-0123456789"}
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/h1/turn/begin", "{}", audit...); st != http.StatusForbidden {
		t.Fatalf("read-only turn-begin: %d %s", st, b)
	}
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/h1/turn/begin", "{}", web...); st != http.StatusOK {
		t.Fatalf("turn-begin: %d %s", st, b)
	}
	st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/h1/turn/call-check", `{"tool":"read_file"}`, audit...)
	if st != http.StatusOK {
		t.Fatalf("read-only call-check: %d %s", st, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"session", "turn", "name", "callable", "reason", "note", "tool", "permission", "channel", "decision", "rule"} {
		if _, ok := m[k]; !ok {
			t.Errorf("call-check reply lacks %q: %s", k, b)
		}
	}
	if m["session"] != "h1" || m["callable"] != true || m["decision"] != "allow" {
		t.Errorf("call-check reply: %s", b)
	}
	st, _, b = rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/h1/turn/call-check", `{}`, audit...)
	if st != http.StatusBadRequest || !strings.Contains(apiError(t, b).Message, `"tool"`) {
		t.Fatalf("call-check without tool: %d %s", st, b)
	}
}

// Registry-diff over both transports reports what the engine's
// Impact reports for the same candidate (the transports add and drop
// nothing), names the session that loaded the edited tool among those
// whose prefix changes and leaves a session without it out; a bad
// candidate is invalid (400) and nothing is written.
func TestRegistryDiffBothTransports(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := ctxT(t)
	c0 := e.httpClient()
	// with: the default session, send_message loaded and checkpointed.
	if _, err := c0.Append(ctx, "rd-with", nil, events.ToolsToggled{Enabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.BeginTurn(ctx, wire.BeginTurnRequest{Session: "rd-with"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.Discover(ctx, "rd-with", "", "send_message"); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.EndTurn(ctx, "rd-with"); err != nil {
		t.Fatal(err)
	}
	// without: exactly the minimal preset, no send_message anywhere.
	last, err := c0.Append(ctx, "rd-without", nil, events.PresetChosen{Preset: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		list, err := c0.Sessions(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(list, "rd-with") || !slices.Contains(list, "rd-without") {
			return fmt.Errorf("sessions %v lack rd-with or rd-without", list)
		}
		return nil
	})
	cand := editedRegistry(t, "rd-2", "send_message", "Sends a message to a user or channel (edited).")
	reg, err := resolver.Load(cand)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.eng.Impact(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(want.PrefixChanged, "rd-with") || slices.Contains(want.PrefixChanged, "rd-without") {
		t.Fatalf("engine impact: prefix changed for %v (%+v)", want.PrefixChanged, want)
	}
	transports(t, e, func(t *testing.T, c *Client) {
		got, err := c.RegistryDiff(ctx, cand)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || want.Sessions != 2 || want.Checkpoints != 1 {
			t.Fatalf("registry-diff = %+v, want the engine's %+v", got, want)
		}
		_, err = c.RegistryDiff(ctx, json.RawMessage(`{"version":"x","tools":[{"name":"bad name!"}]}`))
		asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
		_, err = c.RegistryDiff(ctx, nil)
		asAPIError(t, err, http.StatusBadRequest, CodeInvalid)
	})
	st, err := c0.Intent(ctx, "rd-without", 0)
	if err != nil || st.Seq != last.LastSeq {
		t.Fatalf("registry-diff wrote events: seq %d, want %d (%v)", st.Seq, last.LastSeq, err)
	}
	if e.eng.Registry().Version() == "rd-2" {
		t.Fatal("registry-diff switched the live registry")
	}
}
