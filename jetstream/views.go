package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Views is a KV bucket holding one value per session (the projection's
// view of it). Values are opaque bytes to this package.
type Views struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
	subj   string // "$KV.<bucket>."
}

// OpenViews creates or opens the views bucket <PREFIX>_<name>.
func (l *Log) OpenViews(ctx context.Context, name string) (*Views, error) {
	if !validToken(name) {
		return nil, fmt.Errorf("views: bucket name %q must be one token of [A-Za-z0-9_-]", name)
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	bucket := strings.ToUpper(l.cfg.Prefix) + "_" + name
	cfg := jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "engine projection: current view per session",
		History:     1,
		Replicas:    l.cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}
	if l.cfg.MemoryStorage {
		cfg.Storage = jetstream.MemoryStorage
	}
	kv, err := l.js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = l.js.CreateKeyValue(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("open views bucket %s: %w", bucket, err)
	}
	return &Views{log: l, kv: kv, bucket: bucket, subj: "$KV." + bucket + "."}, nil
}

// Bucket is the KV bucket name.
func (v *Views) Bucket() string { return v.bucket }

// KV exposes the bucket (for benchmarks against raw KV gets).
func (v *Views) KV() jetstream.KeyValue { return v.kv }

// Get returns a session's value, or nil when there is none.
func (v *Views) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := v.log.withTimeout(ctx)
	defer cancel()
	e, err := v.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get view %s: %w", key, err)
	}
	return e.Value(), nil
}

// Put is one value of PutAll.
type Put struct {
	Key   string
	Value []byte
}

// PutAll writes the values pipelined and waits until the server has stored
// every one of them; on error some may have been written (each value is
// whole: a view is replaced, never half-written).
func (v *Views) PutAll(ctx context.Context, puts []Put) error {
	if len(puts) == 0 {
		return nil
	}
	ctx, cancel := v.log.withTimeout(ctx)
	defer cancel()
	if len(puts) == 1 {
		if _, err := v.kv.Put(ctx, puts[0].Key, puts[0].Value); err != nil {
			return fmt.Errorf("put view %s: %w", puts[0].Key, err)
		}
		return nil
	}
	// A sliding window of async puts: at most putWindow unacknowledged,
	// so that a large flush neither stalls the client's async publisher
	// (4,000 pending by default) nor waits window by window.
	futures := make([]jetstream.PubAckFuture, putWindow)
	wait := func(i int) error {
		f := futures[i%putWindow]
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("put view %s: %w", puts[i].Key, err)
		case <-ctx.Done():
			return fmt.Errorf("put views: %w", ctx.Err())
		}
	}
	for i, p := range puts {
		if i >= putWindow {
			if err := wait(i - putWindow); err != nil {
				return err
			}
		}
		f, err := v.log.js.PublishAsync(v.subj+p.Key, p.Value)
		if err != nil {
			return fmt.Errorf("put view %s: %w", p.Key, err)
		}
		futures[i%putWindow] = f
	}
	for i := max(0, len(puts)-putWindow); i < len(puts); i++ {
		if err := wait(i); err != nil {
			return err
		}
	}
	return nil
}

// putWindow bounds the unacknowledged puts of PutAll.
const putWindow = 2048

// Keys lists the sessions that have a view, sorted.
func (v *Views) Keys(ctx context.Context) ([]string, error) {
	ctx, cancel := v.log.withTimeout(ctx)
	defer cancel()
	lister, err := v.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list views: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop()
	slices.Sort(keys)
	return keys, nil
}
