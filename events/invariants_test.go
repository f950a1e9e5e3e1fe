package events

import (
	"errors"
	"strings"
	"testing"
)

// The fold rules that need only the stored event: each breaking event
// gets an error matching ErrBrokenRule that names the rule; what the engine
// writes passes.
func TestCheckStored(t *testing.T) {
	h := func(b string) string { return strings.Repeat(b, 32) }
	cp := func(mod func(*CheckpointRecorded)) Payload {
		c := CheckpointRecorded{Loaded: []string{"send_message"}, ContractHash: h("ab"), RegistryVersion: "builtin-2026.12.1", Turn: 3,
			Contract: []ContractEntry{{Name: "read_file", Hash: h("01")}, {Name: "send_message", Hash: h("02")}}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	var seventeen []string
	for i := range MaxPicked + 1 {
		seventeen = append(seventeen, "t"+string(rune('a'+i)))
	}
	ok := []Payload{
		ToolsToggled{}, ToolsPicked{}, ToolsPicked{Names: []string{}}, ToolsPicked{Names: seventeen[:MaxPicked]},
		cp(nil),
		cp(func(c *CheckpointRecorded) { c.Loaded, c.Contract = nil, nil }),        // an older writer's empty checkpoint
		cp(func(c *CheckpointRecorded) { c.Loaded, c.Contract = []string{}, nil }), // empty set, no contract
		TurnStarted{Turn: 1<<64 - 1}, // the turn order is the session's rule (package aggregate)
		// A recorded request.
		TurnStarted{Turn: 2, Intent: &TurnIntent{Picked: seventeen[:MaxPicked]}, Profile: "coder", RegistryVersion: "v1", ContractHash: h("ab"),
			Override: &TurnOverride{Kind: OverrideNames, Names: []string{"read_file"}}},
		TurnStarted{Turn: 2, Override: &TurnOverride{Kind: OverrideEmpty}, RegistryVersion: "v1", ContractHash: h("ab")},
		TurnStarted{Turn: 2, Override: &TurnOverride{Kind: OverrideIntent, Intent: &TurnIntent{Preset: "research"}, Allowed: []string{"bash"}}, RegistryVersion: "v1", ContractHash: h("ab")},
	}
	for _, p := range ok {
		e := validEnv(p)
		if err := CheckStored(e, e.ID); err != nil {
			t.Errorf("%#v: %v", p, err)
		}
	}
	bad := []struct {
		name  string
		p     Payload
		msgID string
		want  string
	}{
		{"no Nats-Msg-Id", ToolsToggled{}, "", "without a Nats-Msg-Id header"},
		{"another Nats-Msg-Id", ToolsToggled{}, vecID(2), `with Nats-Msg-Id "` + vecID(2) + `"`},
		{"long picked list", ToolsPicked{Names: seventeen}, vecID(1), "ToolsPicked has 17 names, at most 16"},
		{"picked twice", ToolsPicked{Names: []string{"a", "b", "a"}}, vecID(1), `names "a" twice`},
		{"hash x", cp(func(c *CheckpointRecorded) { c.ContractHash = "x" }), vecID(1), `contract_hash "x"`},
		{"hash upper case", cp(func(c *CheckpointRecorded) { c.ContractHash = h("AB") }), vecID(1), "lower-case hex"},
		{"hash too short", cp(func(c *CheckpointRecorded) { c.ContractHash = h("ab")[:63] }), vecID(1), "64 lower-case hex"},
		{"no registry version", cp(func(c *CheckpointRecorded) { c.RegistryVersion = "" }), vecID(1), "no registry_version"},
		{"tool hash", cp(func(c *CheckpointRecorded) { c.Contract[0].Hash = "1" }), vecID(1), "contract[0] (read_file) hash"},
		{"loaded without contract", cp(func(c *CheckpointRecorded) { c.Contract = nil }), vecID(1), "records no contract"},
		// A TurnStarted's recorded request.
		{"turn hash without version", TurnStarted{Turn: 1, ContractHash: h("ab")}, vecID(1), "record both"},
		{"turn version without hash", TurnStarted{Turn: 1, RegistryVersion: "v1"}, vecID(1), "record both"},
		{"turn hash x", TurnStarted{Turn: 1, RegistryVersion: "v1", ContractHash: "x"}, vecID(1), `TurnStarted contract_hash "x"`},
		{"turn picked expanded", TurnStarted{Turn: 1, Intent: &TurnIntent{Picked: seventeen}}, vecID(1), "intent.picked has 17 names"},
		{"turn override names expanded", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: OverrideNames, Names: seventeen}}, vecID(1), "override.names has 17 names"},
		{"turn override names twice", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: OverrideNames, Names: []string{"a", "a"}}}, vecID(1), `names "a" twice`},
		{"turn override kind", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: "all"}}, vecID(1), `override kind "all"`},
		{"turn override empty with names", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: OverrideEmpty, Names: []string{"a"}}}, vecID(1), "an empty override has none"},
		{"turn override names none", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: OverrideNames}}, vecID(1), "needs names"},
		{"turn override intent with names", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: OverrideIntent, Names: []string{"a"}}}, vecID(1), "carries names"},
		{"turn override picked expanded", TurnStarted{Turn: 1, Override: &TurnOverride{Kind: OverrideIntent, Intent: &TurnIntent{Picked: seventeen}}}, vecID(1), "override.intent.picked has 17"},
		{"loaded outside contract", cp(func(c *CheckpointRecorded) { c.Loaded = []string{"bash"} }), vecID(1), `loads "bash", which is not in its contract`},
	}
	for _, c := range bad {
		err := CheckStored(validEnv(c.p), c.msgID)
		if !errors.Is(err, ErrBrokenRule) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBrokenRule naming %q", c.name, err, c.want)
		}
	}
}

func TestValidHash(t *testing.T) {
	for s, want := range map[string]bool{
		strings.Repeat("0", 64): true, strings.Repeat("af", 32): true, strings.Repeat("a", 63): false,
		strings.Repeat("a", 65): false, strings.Repeat("g", 64): false, strings.Repeat("F", 64): false, "": false,
	} {
		if ValidHash(s) != want {
			t.Errorf("ValidHash(%q) = %v", s, !want)
		}
	}
}
