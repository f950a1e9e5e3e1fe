package checkpoint

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

var update = flag.Bool("update", false, "regenerate testdata/full_contract.*")

// fullContractVector is the document testdata/full_contract.json holds:
// what an older writer's checkpoint decodes to and how it resumes.
type fullContractVector struct {
	Description string                    `json:"description"`
	Registry    json.RawMessage           `json:"registry"`
	Checkpoint  events.CheckpointRecorded `json:"checkpoint"`
	Unchanged   vectorOutcome             `json:"resume_unchanged"`
	Changed     vectorOutcome             `json:"resume_web_fetch_description_changed"`
}

type vectorOutcome struct {
	OK       bool     `json:"ok"`
	Restored []string `json:"restored"`
	Changes  []string `json:"changes"`
	Tools    []string `json:"tools"`
}

func outcomeOf(o Outcome) vectorOutcome {
	v := vectorOutcome{OK: o.OK, Restored: o.Restored, Changes: []string{}, Tools: decisionKinds(o.Tools)}
	for _, c := range o.Changes {
		v.Changes = append(v.Changes, c.String())
	}
	return v
}

// Testdata/full_contract.hex is a TurnEnded written by an older
// writer, whose checkpoint lists every tool of its contract (not only the
// loaded ones); docs/wire-format.md#checkpoints shows it. It still
// decodes, passes the fold's rules, and resumes: against the unchanged
// contract it restores its loaded tools, and after a change to one loaded
// tool it restores the other and names every change of the contract from
// its own list (testdata/full_contract.json). go test -update writes both.
func TestFullContractVector(t *testing.T) {
	f := base(t)
	res := resolveAll(t, f)
	hexPath, jsonPath := filepath.Join("testdata", "full_contract.hex"), filepath.Join("testdata", "full_contract.json")
	if *update {
		rec := mustNew(t, 3, res, "send_message", "web_fetch")
		rec.Contract = nil
		for i := range res.Tools {
			rec.Contract = append(rec.Contract, events.ContractEntry{Name: res.Tools[i].Name, Hash: resolver.ToolHash(res.Tools[i])})
		}
		env := events.Envelope{ID: "01KDVDNA000000000000000099", Session: "sess_01", Channel: "web", Actor: "user:alice",
			TimeMs: 1767225600099, Version: events.SchemaVersion, Payload: events.TurnEnded{Turn: 3, Checkpoint: &rec}}
		b, err := events.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hexPath, []byte(wrapHex(hex.EncodeToString(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(hexPath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.Decode(b)
	if err != nil {
		t.Fatalf("decode the older writer's TurnEnded: %v", err)
	}
	if err := events.CheckStored(env, env.ID); err != nil {
		t.Fatalf("the fold refuses it: %v", err)
	}
	te, ok := env.Payload.(events.TurnEnded)
	if !ok || te.Checkpoint == nil {
		t.Fatalf("payload %#v, want a TurnEnded with its checkpoint", env.Payload)
	}
	rec := te.Checkpoint.Clone()
	if !FullContract(&rec) || len(rec.Contract) != len(res.Tools) {
		t.Fatalf("checkpoint %+v is not the whole contract of the test registry", rec)
	}

	changed := base(t)
	changed.Version = "test-2"
	changed.Tools[toolIndex(t, changed, "web_fetch")].Description = "Fetch a URL and return its text."
	reg, _ := json.Marshal(f)
	got := fullContractVector{
		Description: "a TurnEnded whose checkpoint lists its whole contract (an older writer); it folds and resumes",
		Registry:    reg, Checkpoint: rec,
		Unchanged: outcomeOf(Resume(&rec, res)),
		Changed:   outcomeOf(Resume(&rec, resolveAll(t, changed))),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	if *update {
		if err := os.WriteFile(jsonPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("full_contract.json differs from what the vector decodes and resumes to (go test -update rewrites it):\n%s", out)
	}
	if !got.Unchanged.OK || got.Changed.OK || len(got.Changed.Restored) != 1 || got.Changed.Restored[0] != "send_message" {
		t.Errorf("resume outcomes %+v / %+v, want both restored, then send_message alone", got.Unchanged, got.Changed)
	}
}

// wrapHex breaks a hex string into lines of 96 digits.
func wrapHex(s string) string {
	var b strings.Builder
	for len(s) > 96 {
		b.WriteString(s[:96] + "\n")
		s = s[96:]
	}
	return b.String() + s + "\n"
}
