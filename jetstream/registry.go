package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// registryKey is the key of the live registry in its bucket.
const registryKey = "current"

// RegistryStore keeps the registry file in a KV bucket (<PREFIX>_REGISTRY),
// with the last versions as history, so every engine on the stream serves
// the same registry and picks up a change without a restart.
type RegistryStore struct {
	log *Log
	kv  jetstream.KeyValue
}

// OpenRegistryStore creates or opens the registry bucket.
func (l *Log) OpenRegistryStore(ctx context.Context) (*RegistryStore, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	bucket := strings.ToUpper(l.cfg.Prefix) + "_REGISTRY"
	kv, err := l.js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cfg := jetstream.KeyValueConfig{
			Bucket:       bucket,
			Description:  "engine tool registry (key current), with its last versions",
			History:      16,
			Replicas:     l.cfg.Replicas,
			MaxValueSize: MaxRegistryBytes,
		}
		kv, err = l.js.CreateKeyValue(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("open registry bucket %s: %w", bucket, err)
	}
	return &RegistryStore{log: l, kv: kv}, nil
}

// Get returns the stored registry file and its revision; nil when none has
// been stored.
func (r *RegistryStore) Get(ctx context.Context) ([]byte, uint64, error) {
	e, err := r.log.getEntry(ctx, r.kv, registryKey)
	if err != nil {
		return nil, 0, fmt.Errorf("get registry: %w", err)
	}
	return entryValue(e)
}

// Put stores a registry file (the caller validates it first).
func (r *RegistryStore) Put(ctx context.Context, data []byte) (uint64, error) {
	ctx, cancel := r.log.withTimeout(ctx)
	defer cancel()
	rev, err := r.kv.Put(ctx, registryKey, data)
	if err != nil {
		return 0, fmt.Errorf("put registry: %w", err)
	}
	return rev, nil
}

// Seed stores data as the registry only if the bucket holds none (a KV
// create, which the bucket's stream leader checks): seeded false means a
// registry is there already, though a replica behind the leader may have
// answered Get that none was. A plain Put would have replaced the
// cluster's pushed registry with this engine's fallback.
func (r *RegistryStore) Seed(ctx context.Context, data []byte) (seeded bool, err error) {
	ctx, cancel := r.log.withTimeout(ctx)
	defer cancel()
	_, err = r.kv.Create(ctx, registryKey, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("seed registry: %w", err)
	}
	return true, nil
}

// Watch calls fn with every registry stored after the call (not the
// current one), until ctx ends. fn runs on one goroutine, in order.
func (r *RegistryStore) Watch(ctx context.Context, fn func(data []byte, rev uint64)) error {
	w, err := r.kv.Watch(ctx, registryKey, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch registry: %w", err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					fn(e.Value(), e.Revision())
				}
			}
		}
	}()
	return nil
}

// RegistryRevision is one stored version of the registry file.
type RegistryRevision struct {
	Data     []byte
	Revision uint64
}

// History returns the stored versions of the registry, oldest first (the
// bucket keeps the last 16).
func (r *RegistryStore) History(ctx context.Context) ([]RegistryRevision, error) {
	ctx, cancel := r.log.withTimeout(ctx)
	defer cancel()
	entries, err := r.kv.History(ctx, registryKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry history: %w", err)
	}
	out := make([]RegistryRevision, 0, len(entries))
	for _, e := range entries {
		if e.Operation() == jetstream.KeyValuePut {
			out = append(out, RegistryRevision{Data: e.Value(), Revision: e.Revision()})
		}
	}
	return out, nil
}
