package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// Views is a KV bucket holding one value per session (the projection's
// view of it). Values are opaque bytes to this package.
type Views struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
	subj   string // "$KV.<bucket>."
}

// OpenViews creates or opens the views bucket <PREFIX>_<name>
// (<PREFIX>_<name>_<p> for partition p of a partitioned layout).
func (l *Log) OpenViews(ctx context.Context, name string) (*Views, error) {
	if !events.ValidToken(name) {
		return nil, fmt.Errorf("views: bucket name %q must be one token of [A-Za-z0-9_-]", name)
	}
	bucket := strings.ToUpper(l.cfg.Prefix) + "_" + name + l.cfg.partitionSuffix()
	kv, err := l.openBucket(ctx, bucket, "engine projection: current view per session")
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
	val, _, err := v.GetRev(ctx, key)
	return val, err
}

// Put is one value of PutAll.
type Put struct {
	Key   string
	Value []byte
	// Cond makes the write conditional: it is stored only if the key's
	// revision is still Rev (0: the key has no value), so that two
	// projection runners cannot overwrite each other's views.
	// A failed condition fails PutAll with ErrViewChanged.
	Cond bool
	Rev  uint64
}

// ErrViewChanged is matched by a conditional view write whose key had
// another revision: someone else (another projection runner) wrote it.
var ErrViewChanged = errors.New("view changed under the projection")

// GetRev returns a key's value and revision (nil, 0 when there is none).
func (v *Views) GetRev(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := v.log.getEntry(ctx, v.kv, key)
	if err != nil {
		return nil, 0, fmt.Errorf("get view %s: %w", key, err)
	}
	return entryValue(e)
}

// entryValue is e's value and revision; nil, 0 for no entry.
func entryValue(e jetstream.KeyValueEntry) ([]byte, uint64, error) {
	if e == nil {
		return nil, 0, nil
	}
	return e.Value(), e.Revision(), nil
}

// PutAll writes the values pipelined and waits until the server has stored
// every one of them; on error some may have been written (each value is
// whole: a view is replaced, never half-written).
func (v *Views) PutAll(ctx context.Context, puts []Put) error {
	_, err := v.PutAllSeq(ctx, puts)
	return err
}

// PutAllSeq is PutAll that also returns the bucket stream's sequence
// (the new revision) of each put, in order.
func (v *Views) PutAllSeq(ctx context.Context, puts []Put) ([]uint64, error) {
	if len(puts) == 0 {
		return nil, nil
	}
	ctx, cancel := v.log.withTimeout(ctx)
	defer cancel()
	// A sliding window of async puts: at most putWindow unacknowledged,
	// so that a large flush neither stalls the client's async publisher
	// (4,000 pending by default) nor waits window by window.
	futures := make([]jetstream.PubAckFuture, min(len(puts), putWindow))
	revs := make([]uint64, len(puts))
	wait := func(i int) error {
		f := futures[i%putWindow]
		select {
		case ack := <-f.Ok():
			revs[i] = ack.Sequence
			return nil
		case err := <-f.Err():
			if IsCASConflict(err) { // 10164 on a replicated bucket
				return fmt.Errorf("put view %s at revision %d: %w: %w", puts[i].Key, puts[i].Rev, ErrViewChanged, err)
			}
			return fmt.Errorf("put view %s: %w", puts[i].Key, err)
		case <-ctx.Done():
			return fmt.Errorf("put views: %w", ctx.Err())
		}
	}
	for i, p := range puts {
		if i >= putWindow {
			if err := wait(i - putWindow); err != nil {
				return nil, err
			}
		}
		m := nats.NewMsg(v.subj + p.Key)
		m.Data = p.Value
		var opts []jetstream.PublishOpt
		if p.Cond {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(p.Rev))
		}
		f, err := v.log.js.PublishMsgAsync(m, opts...)
		if err != nil {
			return nil, fmt.Errorf("put view %s: %w", p.Key, err)
		}
		futures[i%putWindow] = f
	}
	for i := max(0, len(puts)-putWindow); i < len(puts); i++ {
		if err := wait(i); err != nil {
			return nil, err
		}
	}
	return revs, nil
}

// LastSeq is the last sequence of the bucket's stream: below what the
// projection recorded writing, the views file lost values.
func (v *Views) LastSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := v.log.withTimeout(ctx)
	defer cancel()
	s, err := v.log.js.Stream(ctx, "KV_"+v.bucket)
	if err != nil {
		return 0, fmt.Errorf("views bucket %s: %w", v.bucket, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("views bucket %s: %w", v.bucket, err)
	}
	return info.State.LastSeq, nil
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
