package jetstream_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// The registry history keeps every recorded version
// addressable by version (a version with a dot too), records the same
// file once, keeps a version re-pushed with other content, and lists the
// versions in the order they were recorded.
func TestRegistryHistory(t *testing.T) {
	ctx := context.Background()
	log, _ := openLog(t)
	h, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Lookup(ctx, "v.1"); !errors.Is(err, jetstream.ErrRegistryVersionUnknown) {
		t.Fatalf("lookup before any record: %v, want ErrRegistryVersionUnknown", err)
	}
	for _, r := range []struct{ v, data string }{{"v.1", `{"a":1}`}, {"v.1", `{"a":1}`}, {"v-2", `{"b":2}`}, {"v.1", `{"a":3}`}} {
		if err := h.Record(ctx, r.v, []byte(r.data)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := h.Lookup(ctx, "v-2")
	if err != nil || string(got) != `{"b":2}` {
		t.Fatalf("lookup v-2: %s, %v", got, err)
	}
	all, err := h.LookupAll(ctx, "v.1")
	if err != nil || len(all) != 2 || string(all[0]) != `{"a":3}` || string(all[1]) != `{"a":1}` {
		t.Fatalf("lookup all v.1: %q, %v; want the re-pushed content first, then the first, each once", all, err)
	}
	marks, err := h.Timeline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for i, m := range marks {
		versions = append(versions, m.Version)
		if i > 0 && m.Time.Before(marks[i-1].Time) {
			t.Fatalf("timeline out of order: %+v", marks)
		}
	}
	if len(versions) != 3 || versions[0] != "v.1" || versions[1] != "v-2" || versions[2] != "v.1" {
		t.Fatalf("timeline %v, want v.1, v-2, v.1", versions)
	}
	// Another engine opens the same history.
	h2, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h2.Lookup(ctx, "v.1"); err != nil || string(got) != `{"a":3}` {
		t.Fatalf("second opener: %s, %v", got, err)
	}
}

// A version recorded since a replica behind the history's
// leader last applied is not "unknown" (a projection caches that answer
// and folds without the version's rules): Lookup asks the leader when the
// direct get finds nothing.
func TestRegistryLookupPastLaggingReplica(t *testing.T) {
	ctx := context.Background()
	log, _ := openLog(t)
	h, err := log.OpenRegistryHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Record(ctx, "lagging", []byte(`{"lagging":1}`)); err != nil {
		t.Fatal(err)
	}
	st, err := log.JetStream().Stream(ctx, h.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	natstest.LaggingMirror(t, log.JetStream(), h.StreamName(), first.Subject)
	if err := h.Record(ctx, "v.2", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		got, err := h.Lookup(ctx, "v.2")
		if err != nil || string(got) != `{"v":2}` {
			t.Fatalf("lookup %d of v.2: %s, %v", i, got, err)
		}
	}
	if _, err := h.Lookup(ctx, "never"); !errors.Is(err, jetstream.ErrRegistryVersionUnknown) {
		t.Errorf("lookup of a version never recorded: %v, want ErrRegistryVersionUnknown", err)
	}
}
