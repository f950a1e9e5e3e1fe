package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// A prune keeps the newest versions and the ones the caller
// keeps, removes every other version's content from the stream (a raw
// read finds only a tombstone on its subject), keeps every version's
// place in the timeline (pruned marks flagged), answers
// ErrRegistryVersionPruned (which matches ErrRegistryVersionUnknown) for
// a pruned version, and a pruned version recorded again is stored again.
func TestRegistryPruneKeepsNewestAndReferenced(t *testing.T) {
	ctx := context.Background()
	log, _ := openLog(t)
	h, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		if err := h.Record(ctx, fmt.Sprintf("v.%d", i), fmt.Appendf(nil, `{"v":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := h.NewPruner(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.Prune(ctx, 4, func(v string) bool { return v == "v.2" || v == "v.5" }, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Pruned, []string{"v.1", "v.3", "v.4"}) || rep.Remaining != 3 || rep.Kept != 9 {
		t.Fatalf("first pass %+v: want v.1, v.3, v.4 pruned (bound 3), 3 remaining, 9 kept", rep)
	}
	rep, err = p.Prune(ctx, 4, func(v string) bool { return v == "v.2" || v == "v.5" }, 3)
	if err != nil || !slices.Equal(rep.Pruned, []string{"v.6", "v.7", "v.8"}) || rep.Remaining != 0 || rep.Kept != 6 {
		t.Fatalf("second pass %+v, %v: want v.6, v.7, v.8 pruned, 6 kept", rep, err)
	}
	kept := []string{"v.2", "v.5", "v.9", "v.10", "v.11", "v.12"}
	for i := 1; i <= 12; i++ {
		v := fmt.Sprintf("v.%d", i)
		data, err := h.Lookup(ctx, v)
		if slices.Contains(kept, v) {
			if err != nil || string(data) != fmt.Sprintf(`{"v":%d}`, i) {
				t.Fatalf("kept %s: %s, %v", v, data, err)
			}
			continue
		}
		if !errors.Is(err, jetstream.ErrRegistryVersionPruned) || !errors.Is(err, jetstream.ErrRegistryVersionUnknown) {
			t.Fatalf("pruned %s: %v, want ErrRegistryVersionPruned and ErrRegistryVersionUnknown", v, err)
		}
		if _, err := h.LookupAll(ctx, v); !errors.Is(err, jetstream.ErrRegistryVersionPruned) {
			t.Fatalf("pruned %s, all contents: %v", v, err)
		}
	}
	// Raw read: each subject holds one message; a pruned one holds a
	// tombstone with no content.
	st, err := log.JetStream().Stream(ctx, h.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, natsjs.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 12 || len(info.State.Subjects) != 12 {
		t.Fatalf("raw stream: %d messages on %d subjects, want 12 on 12 (6 contents, 6 tombstones)", info.State.Msgs, len(info.State.Subjects))
	}
	var contents int
	for subj := range info.State.Subjects {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > 0 {
			contents++
		} else if m.Header.Get("Engine-Registry-Pruned") == "" {
			t.Fatalf("subject %s: an empty message that is no tombstone", subj)
		}
	}
	if contents != len(kept) {
		t.Fatalf("raw stream: %d contents, want %d", contents, len(kept))
	}
	marks, err := h.Timeline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 12 {
		t.Fatalf("timeline: %d marks, want 12 (pruned versions keep their place)", len(marks))
	}
	for i, m := range marks {
		v := fmt.Sprintf("v.%d", i+1)
		if m.Version != v || m.Pruned == slices.Contains(kept, v) || (i > 0 && m.Time.Before(marks[i-1].Time)) {
			t.Fatalf("timeline mark %d: %+v, want %s pruned=%v in time order", i, m, v, !slices.Contains(kept, v))
		}
	}
	// Recorded again: stored again, and still one mark before it.
	if err := h.Record(ctx, "v.3", []byte(`{"v":3}`)); err != nil {
		t.Fatal(err)
	}
	if data, err := h.Lookup(ctx, "v.3"); err != nil || string(data) != `{"v":3}` {
		t.Fatalf("v.3 recorded again: %s, %v", data, err)
	}
	if marks, err = h.Timeline(ctx); err != nil || len(marks) != 13 || marks[12].Version != "v.3" || marks[12].Pruned || !marks[2].Pruned {
		t.Fatalf("timeline after v.3 was recorded again: %+v, %v", marks, err)
	}
	// keep 0 keeps everything.
	if rep, err := p.Prune(ctx, 0, nil, 0); err != nil || len(rep.Pruned) != 0 || rep.Kept != 7 {
		t.Fatalf("keep 0: %+v, %v", rep, err)
	}
}

// A registry history stream created with deny_purge
// still opens and serves; a pruner answers ErrRegistryPruneDenied.
func TestRegistryPruneLegacyDenyPurge(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "TOOLS_REGISTRY_HISTORY", Subjects: []string{"tools.registry.history.*"},
		MaxMsgsPerSubject: 8, DenyDelete: true, DenyPurge: true, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Record(ctx, "v1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.NewPruner(ctx, nil); !errors.Is(err, jetstream.ErrRegistryPruneDenied) {
		t.Fatalf("pruner on a deny_purge stream: %v, want ErrRegistryPruneDenied", err)
	}
}
