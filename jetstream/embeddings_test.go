package jetstream_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// The vector bucket (<PREFIX>_EMBEDDINGS) on a real server: values put
// under "<model>.<hash>" keys load back by one get per key (a few keys)
// and by one watcher over the prefix (many keys) alike, a key never put
// is absent, another model's keys are not returned, and a second
// connection (another engine) opening the bucket reads the same values.
func TestEmbeddingsBucket(t *testing.T) {
	l, nc := openLog(t)
	ctx := context.Background()
	e, err := l.OpenEmbeddings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.Bucket() != "TOOLS_EMBEDDINGS" {
		t.Errorf("bucket %s, want TOOLS_EMBEDDINGS", e.Bucket())
	}
	const model, other = "0123456789abcdef", "fedcba9876543210"
	var keys []string
	for i := range 100 {
		k := fmt.Sprintf("%s.%064x", model, i)
		keys = append(keys, k)
		if i%10 == 9 {
			continue // never put
		}
		if err := e.Put(ctx, k, []byte(fmt.Sprintf("vector %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Put(ctx, other+"."+fmt.Sprintf("%064x", 1), []byte("another model")); err != nil {
		t.Fatal(err)
	}
	check := func(name string, got map[string][]byte, keys []string) {
		t.Helper()
		for i, k := range keys {
			v, ok := got[k]
			if i%10 == 9 {
				if ok {
					t.Errorf("%s: key %s was never put, got %q", name, k, v)
				}
				continue
			}
			if !bytes.Equal(v, []byte(fmt.Sprintf("vector %d", i))) {
				t.Errorf("%s: key %s = %q", name, k, v)
			}
		}
		for k := range got {
			if k[:16] != model {
				t.Errorf("%s: returned another model's key %s", name, k)
			}
		}
	}
	few, err := e.Load(ctx, model, keys[:20])
	if err != nil || len(few) != 18 {
		t.Fatalf("Load of 20 keys: %d values, %v; want 18", len(few), err)
	}
	check("gets", few, keys[:20])
	many, err := e.Load(ctx, model, keys)
	if err != nil || len(many) != 90 {
		t.Fatalf("Load of 100 keys: %d values, %v; want 90", len(many), err)
	}
	check("watcher", many, keys)

	nc2 := natstest.Connect(t, nc.ConnectedUrl())
	l2, err := jetstream.OpenLog(ctx, nc2, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	e2, err := l2.OpenEmbeddings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e2.Load(ctx, model, keys)
	if err != nil || len(again) != 90 {
		t.Fatalf("another connection: %d values, %v", len(again), err)
	}
	check("another engine", again, keys)
}
