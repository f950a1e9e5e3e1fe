// The rules the API checks against the registry (a
// picked list that materialises a preset or the defaults; a loaded tool
// that is not a deferred tool of the registry) hold for events a trusted
// backend publishes straight to the log too, judged against the registry
// in force when each event was stored.

package tests

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// ToolsPicked whose names are the research preset, published
// by the backend, is kept, not applied, and reported with the reason by
// the serving projection, the backend's view, history, a replay of the
// log and a second engine's projection; the API refuses the same list.
func TestAttackDirectPublishPickedPreset(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, false)
	research, _ := resolver.Default().Preset("research")
	if len(research) > events.MaxPicked {
		t.Fatalf("research has %d tools: the wire bound alone would refuse it", len(research))
	}
	_, err := a.hc.Append(e2eCtx(t), attackVictim, nil, events.ToolsPicked{Names: research})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Code != api.CodeInvalid || !strings.Contains(ae.Message, `whole preset "research"`) {
		t.Fatalf("the API's verdict on the research list as a picked list: %v; want invalid, naming the preset", err)
	}
	a.attackOne(t, before, "ToolsPicked", map[string]any{"names": research},
		`ToolsPicked equals the whole preset "research" of registry `+resolver.Default().Version())
}

// DeferredLoaded of a tool the registry does not have, in the
// open turn, published by the backend: rejected everywhere alike; the API
// refuses it too.
func TestAttackDirectPublishLoadUnknownTool(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, true)
	_, err := a.hc.Append(e2eCtx(t), attackVictim, nil, events.DeferredLoaded{Names: []string{"exfiltrate_secrets"}, Turn: 1})
	var ae *api.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, `"exfiltrate_secrets" is not in registry`) {
		t.Fatalf("the API's verdict on loading an unknown tool: %v; want refused, naming it", err)
	}
	a.attackOne(t, before, "DeferredLoaded", map[string]any{"names": []string{"exfiltrate_secrets"}, "turn": 1},
		`tool "exfiltrate_secrets" is not in registry `+resolver.Default().Version())
}

// DeferredLoaded of a resident tool (bash is always sent, never
// loaded): rejected everywhere alike.
func TestAttackDirectPublishLoadResidentTool(t *testing.T) {
	a := attackStart(t)
	before := a.prepare(t, true)
	a.attackOne(t, before, "DeferredLoaded", map[string]any{"names": []string{"bash"}, "turn": 1},
		`tool "bash" is resident in registry`)
}

// researchPlusFile writes the embedded registry with a new tool added to
// the research preset, under version, and returns its path and the tool.
func researchPlusFile(t *testing.T, version string) (string, string) {
	t.Helper()
	var file map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &file); err != nil {
		t.Fatal(err)
	}
	file["version"] = version
	const tool = "paper_search"
	tools := file["tools"].([]any)
	var tmpl map[string]any
	for _, x := range tools {
		if m := x.(map[string]any); m["name"] == "web_fetch" {
			tmpl = m
		}
	}
	if tmpl == nil {
		t.Fatal("no web_fetch tool in the embedded registry to copy")
	}
	nt := map[string]any{}
	for k, v := range tmpl {
		nt[k] = v
	}
	nt["name"], nt["description"] = tool, "Search papers by keyword."
	file["tools"] = append(tools, nt)
	presets := file["presets"].(map[string]any)
	presets["research"] = append(presets["research"].([]any), tool)
	data, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, tool
}

// The seed's §1.3 failure: a session that chose the research
// preset gets a tool a registry push adds to it; a direct publisher's copy
// of the preset as a picked list would not, so it is never applied. The
// verdict follows the registry in force when each event was stored: after
// the push the old research list is a curated pick (applied) and the new
// one is the preset (rejected), and a restarted engine's replay gives the
// same verdicts.
func TestFrozenPresetCopyRejectedAcrossRegistryPush(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir, "--registry-kv")
	ctx := e2eCtx(t)
	c := p.Client("web")
	creds, err := jetstream.ReadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, nats.UserInfo(creds.Engine.User, creds.Engine.Password))
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(session string, names []string) (uint64, string) {
		t.Helper()
		id := ulid.Make().String()
		m := nats.NewMsg("tools.events." + session)
		m.Data = e2eWireBody(t, id, session, "backend", "svc:billing", "ToolsPicked", map[string]any{"names": names})
		m.Header.Set("Nats-Msg-Id", id)
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence, id
	}
	oldResearch, _ := resolver.Default().Preset("research")

	if _, err := c.Append(ctx, "chooser", nil, events.PresetChosen{Preset: "research"}); err != nil {
		t.Fatal(err)
	}
	seq, _ := publish("copier", oldResearch)
	v, err := c.Intent(ctx, "copier", seq)
	if err != nil {
		t.Fatal(err)
	}
	if v.Intent.Picked != nil || v.Rejected != 1 || len(v.Rejections) != 1 || !strings.Contains(v.Rejections[0].Reason, `the whole preset "research" of registry `+resolver.Default().Version()) {
		t.Fatalf("the copied preset before the push: %+v; want rejected, not applied", v)
	}

	const version = "builtin-2026.12.1-research2"
	file, tool := researchPlusFile(t, version)
	if out, err := pushRegistry(file, p.NATSURL, p.DataDir); err != nil || !strings.Contains(out, version) {
		t.Fatalf("registry push: %v\n%s", err, out)
	}
	// The engine records what it serves in the registry history; events
	// stored from then on are judged against the new version.
	nlog, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := nlog.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		_, err := hist.Lookup(ctx, version)
		return err
	})
	res, err := c.Resolve(ctx, wire.ResolveRequest{Session: "chooser"})
	if err != nil || res.RegistryVersion != version || !slices.Contains(res.Tools, tool) {
		t.Fatalf("the preset's session after the push: %+v, %v; want %s from %s", res, err, tool, version)
	}
	res, err = c.Resolve(ctx, wire.ResolveRequest{Session: "copier"})
	if err != nil || res.RegistryVersion != version {
		t.Fatalf("copier after the push: %+v, %v", res, err)
	}

	newResearch := append(slices.Clone(oldResearch), tool)
	seqOld, _ := publish("copier2", oldResearch)
	seqNew, idNew := publish("copier3", newResearch)
	reports := func(when string) {
		t.Helper()
		v2, err := c.Intent(ctx, "copier2", seqOld)
		if err != nil || v2.Rejected != 0 || !slices.Equal(v2.Intent.Picked, oldResearch) {
			t.Fatalf("%s: the old research list stored under %s: %+v, %v; want applied (it is no preset of it)", when, version, v2, err)
		}
		v3, err := c.Intent(ctx, "copier3", seqNew)
		if err != nil || v3.Rejected != 1 || v3.Intent.Picked != nil || len(v3.Rejections) != 1 || v3.Rejections[0].ID != idNew ||
			!strings.Contains(v3.Rejections[0].Reason, `the whole preset "research" of registry `+version) {
			t.Fatalf("%s: the new research list stored under %s: %+v, %v; want rejected naming the version", when, version, v3, err)
		}
		h, err := c.History(ctx, wire.HistoryRequest{Session: "copier3"})
		if err != nil || len(h.Entries) != 1 || !h.Entries[0].Rejected || !strings.Contains(h.Entries[0].Error, version) {
			t.Fatalf("%s: history of copier3: %+v, %v", when, h.Entries, err)
		}
		h, err = c.History(ctx, wire.HistoryRequest{Session: "copier"})
		if err != nil || len(h.Entries) != 1 || !h.Entries[0].Rejected || !strings.Contains(h.Entries[0].Error, resolver.Default().Version()) {
			t.Fatalf("%s: history of copier: %+v, %v", when, h.Entries, err)
		}
	}
	reports("serving engine")
	// A replay of the log from the first event gives the same verdicts.
	fold := natstest.FoldLog(t, nlog)
	for s, want := range map[string]uint64{"copier": 1, "copier2": 0, "copier3": 1, "chooser": 0} {
		if got := fold[s].Rejected; got != want {
			t.Errorf("replay of the log: %s rejected %d, want %d (%+v)", s, got, want, fold[s].Rejections)
		}
	}
	_, err = c.Append(ctx, "api-copier", nil, events.ToolsPicked{Names: newResearch})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Code != api.CodeInvalid {
		t.Fatalf("the API's verdict on the new research list: %v; want invalid", err)
	}
	if _, err := c.Append(ctx, "api-copier", nil, events.ToolsPicked{Names: oldResearch}); err != nil {
		t.Fatalf("the API's verdict on the old research list under %s: %v; want accepted, as the fold does", version, err)
	}
}
