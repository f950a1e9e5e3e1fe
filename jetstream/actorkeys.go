package jetstream

// The key store of encrypt-mode actors: a KV bucket
// <PREFIX>_ACTORKEYS holding one wrapped data key per person, named by a
// keyed hash (no person's id). History 1; a destroy deletes and purges the
// key, so no revision of it stays readable.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/actor"
)

// ActorKeys is the actor key store on JetStream KV. It implements
// actor.KeyStore and is safe for concurrent use.
type ActorKeys struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
}

var _ actor.KeyStore = (*ActorKeys)(nil)

// ActorKeysBucket is the actor key bucket of a prefix: <PREFIX>_ACTORKEYS.
func ActorKeysBucket(prefix string) string { return strings.ToUpper(prefix) + "_ACTORKEYS" }

// OpenActorKeys opens the actor key bucket on l's connection, creating it
// on first use.
func (l *Log) OpenActorKeys(ctx context.Context) (*ActorKeys, error) {
	bucket := ActorKeysBucket(l.cfg.Prefix)
	kv, err := l.openSharedBucket(ctx, bucket, "engine actor data keys, wrapped, by keyed-hash id; destroy = forget")
	if err != nil {
		return nil, fmt.Errorf("open actor key bucket %s: %w", bucket, err)
	}
	return &ActorKeys{log: l, kv: kv, bucket: bucket}, nil
}

// Bucket is the bucket's name.
func (k *ActorKeys) Bucket() string { return k.bucket }

// Get returns the wrapped key under id; actor.ErrNoKey when there is none
// (never created, or destroyed). A replica behind the bucket's leader may
// not hold a key another engine has just created (the one whose Create
// won a race with this engine's), so a key no replica answered is looked
// for at the leader before it is reported missing.
func (k *ActorKeys) Get(ctx context.Context, id string) ([]byte, error) {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	e, err := k.log.getEntry(ctx, k.kv, id)
	if err != nil {
		return nil, fmt.Errorf("get actor key %s: %w", id, err)
	}
	if e != nil {
		return e.Value(), nil
	}
	v, _, err := k.log.leaderKV(ctx, k.bucket, id)
	if err != nil {
		return nil, fmt.Errorf("get actor key %s: %w", id, err)
	}
	if v == nil {
		return nil, fmt.Errorf("actor key %s: %w", id, actor.ErrNoKey)
	}
	return v, nil
}

// Create stores wrapped under id unless a key is there (actor.ErrKeyExists):
// KV create, so of two engines racing on a person's first write one
// creates the key and the other reads it.
func (k *ActorKeys) Create(ctx context.Context, id string, wrapped []byte) error {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	_, err := k.kv.Create(ctx, id, wrapped)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("create actor key %s: %w", id, actor.ErrKeyExists)
	}
	if err != nil {
		return fmt.Errorf("create actor key %s: %w", id, err)
	}
	return nil
}

// Destroy purges the key under id: a purge marker with rollup replaces
// its revisions, so no copy stays readable in the bucket; the bytes leave
// the disk when JetStream compacts the block. A missing key is not an
// error.
func (k *ActorKeys) Destroy(ctx context.Context, id string) error {
	ctx, cancel := k.log.withTimeout(ctx)
	defer cancel()
	if err := k.log.purgeKey(ctx, k.kv, id); err != nil {
		return fmt.Errorf("destroy actor key %s: %w", id, err)
	}
	return nil
}
