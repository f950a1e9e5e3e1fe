package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// pruneRegistryFile writes the default registry under version, with one
// more default tool, and returns its path.
func pruneRegistryFile(t *testing.T, version string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = version
	extra := "extra_" + strings.ReplaceAll(version, ".", "_")
	doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": extra, "description": "A tool added by a registry push.", "parameters": map[string]any{"type": "object"}})
	doc["default_tools"] = append(doc["default_tools"].([]any), extra)
	doc["resident_tools"] = append(doc["resident_tools"].([]any), extra)
	data, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), version+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// registryContents reads the registry history stream raw, as the
// embedded server's admin: the versions whose newest message on their
// subject holds a registry (not a pruned version's tombstone).
func registryContents(t *testing.T, p *engineProc) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc := natstest.Connect(t, p.NATSURL, p.adminAuth(t))
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "TOOLS_REGISTRY_HISTORY")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for subj := range info.State.Subjects {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > 0 {
			out = append(out, m.Header.Get("Engine-Registry-Version"))
		}
	}
	slices.Sort(out)
	return out
}

// Serve
// --registry-keep 5 with 30 registry versions pushed (engine registry
// push, --registry-kv) keeps the newest 5, the version a session's last
// checkpoint references (3) and the one an open turn was frozen against
// (7); the others are purged from the stream (a raw read as the admin
// finds their contents gone) through the privileged connection, since the
// engine user may not purge. Explain and history of a point under a
// pruned version (2) say "registry version ... pruned"; the open turn is
// served, byte for byte, by a restarted engine with nothing in memory;
// /metrics counts the pruned and kept versions.
func TestRegistryPruneBinary(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--registry-kv", "--registry-keep", "5", "--registry-prune-tick", "200ms"}
	p := startEngine(t, dir, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gc := p.GoClient("web")
	version := func(i int) string { return fmt.Sprintf("bin-prune.%d", i) }
	var oldSeq uint64
	var open client.TurnView
	for i := 1; i <= 30; i++ {
		if out, err := pushRegistry(pruneRegistryFile(t, version(i)), p.NATSURL, dir); err != nil {
			t.Fatalf("push %s: %v\n%s", version(i), err, out)
		}
		natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			info, err := gc.Registry(ctx)
			if err != nil {
				return err
			}
			if info.Version != version(i) {
				return fmt.Errorf("serving %s, want %s", info.Version, version(i))
			}
			return nil
		})
		switch i {
		case 2:
			r, err := gc.Append(ctx, client.AppendRequest{Session: "old", Commands: []client.Command{client.Enable()}})
			if err != nil {
				t.Fatal(err)
			}
			oldSeq = r.LastSeq
		case 3:
			if _, err := gc.TurnBegin(ctx, client.BeginTurnRequest{Session: "checkpointed"}); err != nil {
				t.Fatal(err)
			}
			cp, err := gc.TurnEnd(ctx, client.TurnRequest{Session: "checkpointed"})
			if err != nil || cp.Checkpoint.RegistryVersion != version(3) {
				t.Fatalf("checkpoint under version 3: %+v, %v", cp, err)
			}
		case 7:
			var err error
			if open, err = gc.TurnBegin(ctx, client.BeginTurnRequest{Session: "open"}); err != nil || open.RegistryVersion != version(7) {
				t.Fatalf("turn under version 7: %s, %v", open.RegistryVersion, err)
			}
		}
	}
	want := []string{version(26), version(27), version(28), version(29), version(3), version(30), version(7)}
	slices.Sort(want)
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		if got := registryContents(t, p); !slices.Equal(got, want) {
			return fmt.Errorf("registry history holds %v, want %v", got, want)
		}
		return nil
	})

	// The engine user may not purge: the prune went through the admin.
	enc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	ejs, err := jetstream.New(enc)
	if err != nil {
		t.Fatal(err)
	}
	if est, err := ejs.Stream(ctx, "TOOLS_REGISTRY_HISTORY"); err != nil {
		t.Fatal(err)
	} else if err := func() error {
		// A denied request gets no reply: it fails by the permissions
		// violation or this bound, whichever comes first.
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return est.Purge(pctx, jetstream.WithPurgeSubject("tools.registry.history.x"))
	}(); err == nil {
		t.Fatal("the engine user purged the registry history: want it denied (only the privileged connection purges)")
	}

	ex, err := gc.Explain(ctx, client.ExplainRequest{Session: "old", Tool: "bash", Until: wire.UntilSeq(oldSeq)})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Rule != "registry-pruned" || ex.RegistryVersion != version(2) || !strings.Contains(ex.Detail, "registry version "+version(2)+" pruned") {
		t.Fatalf("explain under version 2: %+v", ex)
	}
	h, err := gc.History(ctx, client.HistoryRequest{Session: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Entries) != 1 || !strings.Contains(h.Entries[0].Error, "registry version "+version(2)+" pruned") {
		t.Fatalf("history under version 2: %+v", h.Entries)
	}
	// The pass that purged the last version reports right after.
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		m := scrape(t, p.HTTPURL)
		if m["engine_registry_versions_kept"] != 7 || m["engine_registry_versions_pruned_total"] != 24 {
			return fmt.Errorf("/metrics: kept %v pruned %v, want 7 and 24 (the 23 pushed versions and the default served at start-up)",
				m["engine_registry_versions_kept"], m["engine_registry_versions_pruned_total"])
		}
		return nil
	})

	// A restarted engine (nothing in memory) serves the open turn of
	// version 7 from the registry history.
	p.Stop(t)
	p = startEngine(t, dir, args...)
	got, err := p.GoClient("web").TurnDispatch(ctx, client.DispatchRequest{Session: "open"})
	if err != nil {
		t.Fatal(err)
	}
	if got.PrefixHash != open.PrefixHash || got.RegistryVersion != version(7) || !slices.Equal(got.Provider, open.Provider) || !got.Frozen {
		t.Fatalf("the open turn after the restart: registry %s hash %s provider %v, want %s %s %v", got.RegistryVersion, got.PrefixHash, got.Provider, version(7), open.PrefixHash, open.Provider)
	}
	if got := registryContents(t, p); !slices.Equal(got, want) {
		t.Fatalf("after the restart the registry history holds %v, want %v", got, want)
	}
}

// An engine on a registry history stream created (with
// deny_purge, which JetStream cannot lift) serves as before, keeps every
// registry version and says why in its log.
func TestRegistryPruneLegacyStreamBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TOOLS_REGISTRY_HISTORY", Subjects: []string{"tools.registry.history.*"},
		MaxMsgsPerSubject: 8, DenyDelete: true, DenyPurge: true, AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	p := startEngine(t, t.TempDir(), "--nats", srv.ClientURL(), "--registry-keep", "1", "--registry-prune-tick", "200ms")
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if s := p.Stderr.String(); !strings.Contains(s, "registry history not pruned: its stream denies purge") {
			return fmt.Errorf("no log line about the legacy stream yet")
		}
		return nil
	})
	if _, err := p.GoClient("web").TurnBegin(ctx, client.BeginTurnRequest{Session: "legacy"}); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs == 0 || !info.Config.DenyPurge {
		t.Fatalf("legacy history stream: %+v, %v: want its versions recorded, deny_purge kept", info, err)
	}
}
