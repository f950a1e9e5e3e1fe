package jetstream

// The vector cache of tool_search's engine-side embeddings: a KV bucket
// <PREFIX>_EMBEDDINGS holding one vector per (model, tool contract hash),
// so that a restart or another engine on the stream reuses vectors
// instead of asking the embedding endpoint again.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// EmbeddingsBucket is the vector bucket of a prefix: <PREFIX>_EMBEDDINGS.
func EmbeddingsBucket(prefix string) string { return strings.ToUpper(prefix) + "_EMBEDDINGS" }

// loadByWatch is the number of keys above which Load reads the prefix's
// whole range with one watcher instead of one get per key.
const loadByWatch = 64

// Embeddings is the vector cache on JetStream KV: values by key, one
// revision each. It implements the embedding package's Cache and is safe
// for concurrent use.
type Embeddings struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
}

// OpenEmbeddings opens the vector bucket on l's connection, creating it on
// first use.
func (l *Log) OpenEmbeddings(ctx context.Context) (*Embeddings, error) {
	bucket := EmbeddingsBucket(l.cfg.Prefix)
	kv, err := l.openSharedBucket(ctx, bucket, "tool_search vectors by embedding model and tool contract hash")
	if err != nil {
		return nil, fmt.Errorf("open embeddings bucket %s: %w", bucket, err)
	}
	return &Embeddings{log: l, kv: kv, bucket: bucket}, nil
}

// Bucket is the bucket's name.
func (e *Embeddings) Bucket() string { return e.bucket }

// Load returns the values stored under keys (each beginning with prefix
// + "."); a key with none is absent from the map. Up to 64 keys are read
// one by one; more, with one watcher over the prefix's keys, which reads
// the bucket's values of that prefix in one pass.
func (e *Embeddings) Load(ctx context.Context, prefix string, keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	if len(keys) <= loadByWatch {
		for _, k := range keys {
			v, err := e.get(ctx, k)
			if err != nil {
				return out, err
			}
			if v != nil {
				out[k] = v
			}
		}
		return out, nil
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	w, err := e.kv.Watch(ctx, prefix+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return out, fmt.Errorf("read %s/%s.*: %w", e.bucket, prefix, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("read %s/%s.*: %w", e.bucket, prefix, ctx.Err())
		case entry, ok := <-w.Updates():
			if !ok {
				return out, fmt.Errorf("read %s/%s.*: the watcher stopped", e.bucket, prefix)
			}
			if entry == nil {
				return out, nil // every stored value has been delivered
			}
			if want[entry.Key()] {
				out[entry.Key()] = entry.Value()
			}
		}
	}
}

// get returns the value under key, nil when there is none.
func (e *Embeddings) get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := e.log.withTimeout(ctx)
	defer cancel()
	entry, err := e.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", e.bucket, key, err)
	}
	return entry.Value(), nil
}

// Put stores value under key.
func (e *Embeddings) Put(ctx context.Context, key string, value []byte) error {
	ctx, cancel := e.log.withTimeout(ctx)
	defer cancel()
	if _, err := e.kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("put %s/%s: %w", e.bucket, key, err)
	}
	return nil
}
