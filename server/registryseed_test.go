package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
)

// An engine starting on a cluster whose registry bucket holds a
// pushed registry, and whose Get a replica behind the bucket's leader
// answers "none", does not seed its fallback over the pushed one: the seed
// is a KV create the leader refuses, and the start reads again. Before,
// it put the fallback, replacing the registry every engine serves. The
// lagging replica is a mirror of the bucket's stream holding only another
// key, answering half its direct gets (as natstest.LaggingReplica does
// for the event stream).
func TestRegistrySeedKeepsPushedPastLaggingReplica(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	jlog, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jlog.OpenRegistryStore(ctx); err != nil {
		t.Fatal(err)
	}
	bucket := "TOOLS_REGISTRY"
	kv, err := jlog.JetStream().KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "other", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingMirror(t, jlog.JetStream(), "KV_"+bucket, "$KV."+bucket+".other")
	var doc map[string]any
	if err := json.Unmarshal(resolver.DefaultRegistryJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = "pushed.1"
	pushed, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, "current", pushed)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		_, reg, err := registryFromKV(ctx, jlog, resolver.Default(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if reg.Version() != "pushed.1" {
			t.Fatalf("start %d serves registry %s, want pushed.1", i, reg.Version())
		}
	}
	// Nothing was stored after the push (stream info: the leader's count).
	st, err := jlog.JetStream().Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	if last := st.CachedInfo().State.LastSeq; last != rev {
		t.Fatalf("the registry bucket's last sequence is %d, the push was %d: a start stored its fallback over it", last, rev)
	}
}
