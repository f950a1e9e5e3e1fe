package aggregate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/resolver"
)

func bp(b bool) *bool { return &b }

const testSession = "sess_01"

// env wraps p in a valid envelope of testSession.
func env(p events.Payload) events.Envelope {
	return events.Envelope{ID: events.NewID(), Session: testSession, Channel: "web", Actor: "alice", TimeMs: 1, Version: events.SchemaVersion, Type: p.EventType(), Payload: p}
}

// stored numbers payloads from seq 1, each stored with its id as
// Nats-Msg-Id.
func stored(ps ...events.Payload) []Stored {
	out := make([]Stored, len(ps))
	for i, p := range ps {
		e := env(p)
		out[i] = Stored{Seq: uint64(i + 1), MsgID: e.ID, Envelope: e}
	}
	return out
}

// hash is a well-formed SHA-256 hex string made of one repeated byte.
func hash(b byte) string { return strings.Repeat(fmt.Sprintf("%02x", b), 32) }

// smallRegistryJSON is a registry small enough that its defaults fit in a
// picked list, to exercise the "picked == defaults" refusal.
const smallRegistryJSON = `{
  "version": "test-1",
  "tools": [
    {"name":"read_file","description":"r","parameters":{"type":"object"},"available":true,"permission":"read"},
    {"name":"grep","description":"g","parameters":{"type":"object"},"available":true,"permission":"read"},
    {"name":"bash","description":"b","parameters":{"type":"object"},"available":true,"permission":"exec"},
    {"name":"tool_search","description":"t","parameters":{"type":"object"},"available":true,"permission":"read"},
    {"name":"web_search","description":"w","parameters":{"type":"object"},"available":true,"permission":"network"},
    {"name":"big_browser","description":"p","parameters":{"type":"object"},"available":true,"permission":"network"},
    {"name":"gpu_run","description":"x","parameters":{"type":"object"},"available":false,"permission":"exec"}
  ],
  "default_tools": ["read_file","grep","tool_search","big_browser"],
  "resident_tools": ["read_file","grep","bash","tool_search","web_search"],
  "deferred_default_tools": ["big_browser"],
  "presets": {"tiny": ["read_file","tool_search"], "ops": ["bash","grep","tool_search","gpu_run"]}
}`

func smallRegistry(t testing.TB) *resolver.Registry {
	t.Helper()
	r, err := resolver.Load([]byte(smallRegistryJSON))
	if err != nil {
		t.Fatalf("load test registry: %v", err)
	}
	return r
}

func describeState(s State) string {
	return fmt.Sprintf("%+v intent=%s", s, describeIntent(s.Intent))
}

func describeIntent(i intent.Intent) string {
	tri := func(b *bool) string {
		if b == nil {
			return "unset"
		}
		return fmt.Sprint(*b)
	}
	return fmt.Sprintf("{enabled:%s web_search:%s preset:%q disabled:%q picked:%q(nil=%v)}", tri(i.Enabled), tri(i.WebSearch), i.Preset, i.Disabled, i.Picked, i.Picked == nil)
}
