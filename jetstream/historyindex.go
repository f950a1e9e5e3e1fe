package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// HistoryIndex is the bucket of history anchors (<PREFIX>_HISTORY): for a
// long session, its state at a point every so many events, so that a page
// of its history deep in the log starts from the nearest anchor instead of
// folding the session from its first event. Anchors are derived from the
// log (the projection writes them as it folds) and any can be lost or
// dropped: a reader then folds from an earlier one, or from the start.
// It is safe for concurrent use.
type HistoryIndex struct {
	log    *Log
	kv     jetstream.KeyValue
	bucket string
}

// OpenHistoryIndex creates or opens the history anchors' bucket, one per
// partition of a partitioned layout.
func (l *Log) OpenHistoryIndex(ctx context.Context) (*HistoryIndex, error) {
	bucket := strings.ToUpper(l.cfg.Prefix) + "_HISTORY" + l.cfg.partitionSuffix()
	kv, err := l.openBucket(ctx, bucket, "engine history anchors: a long session's state every so many events, derived from the log")
	if err != nil {
		return nil, fmt.Errorf("open history bucket %s: %w", bucket, err)
	}
	return &HistoryIndex{log: l, kv: kv, bucket: bucket}, nil
}

func anchorKey(session string, i uint64) string { return session + "." + strconv.FormatUint(i, 10) }

// baseKey is the key of a session's base: the lowest index of its anchors
// since they were last forgotten.
func baseKey(session string) string { return session + ".base" }

// Put stores anchor i of session.
func (h *HistoryIndex) Put(ctx context.Context, session string, i uint64, value []byte) error {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	if _, err := h.kv.Put(ctx, anchorKey(session, i), value); err != nil {
		return fmt.Errorf("put history anchor %d of %q: %w", i, session, err)
	}
	return nil
}

// Get reads anchor i of session (ok false: none).
func (h *HistoryIndex) Get(ctx context.Context, session string, i uint64) (value []byte, ok bool, err error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	e, err := h.kv.Get(ctx, anchorKey(session, i))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get history anchor %d of %q: %w", i, session, err)
	}
	return e.Value(), true, nil
}

// Base reads the lowest index of session's anchors and that anchor's
// stream sequence as SetBase recorded them (ok false: none recorded).
// Anchors below it may be missing: a reader looks from it up.
func (h *HistoryIndex) Base(ctx context.Context, session string) (i, seq uint64, ok bool, err error) {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	e, err := h.kv.Get(ctx, baseKey(session))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("get history base of %q: %w", session, err)
	}
	is, ss, _ := strings.Cut(string(e.Value()), ":")
	i, err = strconv.ParseUint(is, 10, 64)
	if err != nil || i == 0 {
		return 0, 0, false, nil // a damaged base is none
	}
	seq, _ = strconv.ParseUint(ss, 10, 64) // 0: not known
	return i, seq, true, nil
}

// SetBase records i as the lowest index of session's anchors, and seq
// as that anchor's stream sequence ("i:seq").
func (h *HistoryIndex) SetBase(ctx context.Context, session string, i, seq uint64) error {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	if _, err := h.kv.Put(ctx, baseKey(session), fmt.Appendf(nil, "%d:%d", i, seq)); err != nil {
		return fmt.Errorf("put history base of %q: %w", session, err)
	}
	return nil
}

// Forget removes session's base and its anchors 1 to upTo (a compaction
// made them useless, an erase must leave nothing of the session).
func (h *HistoryIndex) Forget(ctx context.Context, session string, upTo uint64) error {
	ctx, cancel := h.log.withTimeout(ctx)
	defer cancel()
	if err := h.log.purgeKey(ctx, h.kv, baseKey(session)); err != nil {
		return fmt.Errorf("forget history base of %q: %w", session, err)
	}
	for i := uint64(1); i <= upTo; i++ {
		if err := h.log.purgeKey(ctx, h.kv, anchorKey(session, i)); err != nil {
			return fmt.Errorf("forget history anchor %d of %q: %w", i, session, err)
		}
	}
	return nil
}
