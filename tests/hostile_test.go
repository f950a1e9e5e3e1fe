package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/wire"
)

// post sends a raw body to the HTTP API and returns status and body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// body builds a msgpack event body by hand, as a foreign writer would.
func body(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func envelopeMap(session, typ string, v int, data map[string]any) map[string]any {
	return map[string]any{"id": events.NewID(), "session": session, "channel": "x", "actor": "y",
		"time_ms": time.Now().UnixMilli(), "v": v, "type": typ, "data": data}
}

// Hostile input at every entry point gets a clear error or is
// kept, reported and skipped; nothing crashes the engine or changes another
// session.
func TestHostileInput(t *testing.T) {
	p := startEngine(t, t.TempDir())
	ctx := context.Background()
	c := p.Client("web")
	on := true
	victim, err := c.Append(ctx, "victim", nil, events.ToolsToggled{Enabled: &on}, events.ToolDisabled{Name: "grep"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Resolve(ctx, wire.ResolveRequest{Session: "victim", MinSeq: victim.LastSeq})
	if err != nil {
		t.Fatal(err)
	}

	// HTTP API: each bad request is refused with a status and a message
	// that names the bad value.
	long := strings.Repeat("x", 200)
	cases := []struct {
		name, path, body string
		status           int
		mention          string
	}{
		{"session with a dot", "/v1/sessions/a.b/events", `{"commands":[{"type":"ToolsToggled","enabled":true}]}`, 400, "a.b"},
		{"session with a wildcard", "/v1/sessions/a*/events", `{"commands":[{"type":"ToolsToggled","enabled":true}]}`, 400, "a*"},
		{"session too long", "/v1/sessions/" + long + "/events", `{"commands":[{"type":"ToolsToggled","enabled":true}]}`, 400, "128"},
		{"malformed tool name", "/v1/sessions/h1/events", `{"commands":[{"type":"ToolDisabled","name":"BASH!"}]}`, 400, "BASH!"},
		{"very long tool name", "/v1/sessions/h1/events", `{"commands":[{"type":"ToolDisabled","name":"` + strings.Repeat("a", 5000) + `"}]}`, 400, "tool name"},
		{"unknown tool", "/v1/sessions/h1/events", `{"commands":[{"type":"ToolDisabled","name":"no_such_tool"}]}`, 400, "no_such_tool"},
		{"wrong type", "/v1/sessions/h1/events", `{"commands":[{"type":"ToolsToggled","enabled":"yes"}]}`, 400, "enabled"},
		{"unknown event type", "/v1/sessions/h1/events", `{"commands":[{"type":"Teleport"}]}`, 400, "Teleport"},
		{"not JSON", "/v1/sessions/h1/events", `{"commands":[`, 400, "JSON"},
		{"arrays nested 9,000 deep", "/v1/sessions/h1/events", strings.Repeat("[", 9000) + strings.Repeat("]", 9000), 400, "array"},
		{"a duplicate key under 9,000 arrays", "/v1/sessions/h1/events", strings.Repeat("[", 9000) + `{"a":1,"a":2}` + strings.Repeat("]", 9000), 400, "8992 more arrays"},
		{"arrays left open 200,000 deep", "/v1/sessions/h1/events", strings.Repeat("[", 200000), 400, "JSON"},
		{"oversized body", "/v1/sessions/h1/events", `{"commands":[],"actor":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "MiB"},
		{"checkpoint outside its contract", "/v1/sessions/h1/events", `{"commands":[{"type":"CheckpointRecorded","loaded_deferred_tools":["no_such_tool"],"contract_hash":"ab","registry_version":"v","turn":0}]}`, 400, "no_such_tool"},
	}
	for _, tc := range cases {
		status, msg := post(t, p.HTTPURL+tc.path, tc.body)
		if status != tc.status || !strings.Contains(msg, tc.mention) {
			t.Errorf("%s: %d %s; want %d naming %q", tc.name, status, clip(msg), tc.status, tc.mention)
		}
	}

	// Direct JetStream publishes of bad events: kept in the log, skipped
	// by the fold and reported; later good events still apply.
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"undecodable msgpack": []byte{0xc1, 0xff, 0x00},
		"wrong field type":    body(t, envelopeMap("h2", "ToolsToggled", 2, map[string]any{"enabled": "yes"})),
		"unknown type":        body(t, envelopeMap("h2", "Teleport", 2, map[string]any{})),
		"future version":      body(t, envelopeMap("h2", "ToolsToggled", 3, map[string]any{"enabled": true})),
		"other session":       body(t, envelopeMap("victim", "ToolsToggled", 2, map[string]any{"enabled": false})),
		"bad tool name":       body(t, envelopeMap("h2", "ToolDisabled", 2, map[string]any{"name": "../etc"})),
	}
	for name, b := range bad {
		if _, err := js.Publish(ctx, "tools.events.h2", b); err != nil {
			t.Fatalf("publish %s: %v", name, err)
		}
	}
	// Oversized: refused by the stream's size limit, with an error.
	big := body(t, envelopeMap("h2", "ToolsToggled", 2, map[string]any{"enabled": true, "pad": strings.Repeat("x", 80<<10)}))
	if _, err := js.Publish(ctx, "tools.events.h2", big); err == nil {
		t.Error("an 80 KiB event was stored, want the stream's size limit to refuse it")
	} else if !strings.Contains(strings.ToLower(err.Error()), "maximum") && !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("oversized publish error %q does not say what limit it hit", err)
	}
	good, err := c.Append(ctx, "h2", nil, events.PresetChosen{Preset: "research"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Intent(ctx, "h2", good.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if v.Skipped != uint64(len(bad)) || v.Intent.Preset != "research" {
		t.Fatalf("h2 after bad events: skipped %d (want %d), preset %q (want research)", v.Skipped, len(bad), v.Intent.Preset)
	}
	hist, err := c.History(ctx, wire.HistoryRequest{Session: "h2"})
	if err != nil {
		t.Fatal(err)
	}
	reported := 0
	for _, e := range hist.Entries {
		if e.Error != "" {
			reported++
		}
	}
	if reported != len(bad) {
		t.Errorf("history reports %d skipped events, want %d", reported, len(bad))
	}

	// The bystander session is unchanged, and the engine still serves.
	after, err := c.Resolve(ctx, wire.ResolveRequest{Session: "victim"})
	if err != nil {
		t.Fatal(err)
	}
	if after.Seq != before.Seq || !bytes.Equal(after.Rendering, before.Rendering) || !reflect.DeepEqual(after.Intent, before.Intent) {
		t.Fatalf("victim changed: seq %d -> %d", before.Seq, after.Seq)
	}
	select {
	case <-p.exited:
		t.Fatalf("engine exited: %v\n%s", p.exitErr, p.Stderr)
	default:
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// A registry file with duplicate names or a schema that is
// not valid JSON stops `engine serve` with an error naming the problem.
func TestBadRegistryFileRefused(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct{ file, mention string }{
		"duplicate":  {`{"version":"v1","tools":[` + tool("a") + `,` + tool("a") + `,` + tool("tool_search") + `],"default_tools":["a","tool_search"]}`, `"a"`},
		"bad schema": {`{"version":"v1","tools":[{"name":"a","description":"d","parameters":{"type":"object",}},` + tool("tool_search") + `],"default_tools":["a","tool_search"]}`, "parameters"},
		"not JSON":   {`{"version":`, "JSON"},
	}
	for name, tc := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, engineBin, "serve", "--registry", path, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0").CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), tc.mention) {
			t.Errorf("%s: exit %v, output %q; want a non-zero exit naming %s", name, err, clip(string(out)), tc.mention)
		}
	}
}

func tool(name string) string {
	b, _ := json.Marshal(map[string]any{"name": name, "description": "d", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}})
	return string(b)
}
