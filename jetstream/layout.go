package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// ErrLayout is matched by OpenPartitions when the store spreads sessions
// over another number of event streams than asked: opening it so would
// look for sessions in streams that do not hold them.
var ErrLayout = errors.New("the store's event streams are laid out otherwise")

// ErrMigrating is matched by an open of a store whose migration from one
// stream to partitions has started and not finished (it also matches
// ErrLayout): engine migrate finishes or aborts it.
var ErrMigrating = fmt.Errorf("%w: a migration is under way", ErrLayout)

// layoutKey is the key of the layout record in the <PREFIX>_LAYOUT bucket.
const layoutKey = "layout"

// layoutRecord is what the layout bucket holds: the number of partitions
// every engine on the store uses, and when the first one recorded it. It
// has one of three forms: Partitions (a store laid out so from its
// start), Migrating (a migration from one stream under way: no engine
// serves the store) or Migrated (a store of one stream migrated to
// partitions). An engine that knows only the first form reads the other
// two as no layout record at all and refuses the store.
type layoutRecord struct {
	Partitions int       `json:"partitions,omitempty"`
	Migrating  int       `json:"migrating,omitempty"`
	Migrated   *migrated `json:"migrated,omitempty"`
	Time       time.Time `json:"time"`
}

// migrated is the layout of a store migrated from one stream: new
// sessions go to Partitions streams, and the sessions the one stream held
// at the migration (the set stored as the object SessionsObject of the
// <PREFIX>_LAYOUT_SESSIONS object store) stay on it.
type migrated struct {
	Partitions     int    `json:"partitions"`
	OneStream      string `json:"one_stream"`
	LastSeq        uint64 `json:"one_stream_last_seq"`
	Sessions       int    `json:"sessions"`
	SessionsObject string `json:"sessions_object"`
	// Hashes and SHA256 are the stored set's number of distinct hashes
	// and digest, checked when an engine loads it.
	Hashes int    `json:"session_hashes"`
	SHA256 string `json:"sessions_sha256"`
}

// k is the number of partitions the record lays out (0 while migrating).
func (r *layoutRecord) k() int {
	if r.Migrated != nil {
		return r.Migrated.Partitions
	}
	return r.Partitions
}

// valid reports whether the record has exactly one of its three forms.
func (r *layoutRecord) valid() bool {
	in := func(k int) bool { return k >= 1 && k <= events.MaxPartitions }
	switch {
	case r.Migrated != nil:
		return r.Partitions == 0 && r.Migrating == 0 && r.Migrated.Partitions > 1 && r.Migrated.Partitions < events.MaxPartitions && r.Migrated.SessionsObject != "" && r.Migrated.SHA256 != ""
	case r.Migrating != 0:
		return r.Partitions == 0 && in(r.Migrating)
	default:
		return in(r.Partitions)
	}
}

// LayoutBucket is the bucket of a prefix's layout record:
// <PREFIX>_LAYOUT, written by the first OpenPartitions on the store.
func LayoutBucket(prefix string) string {
	if prefix == "" {
		prefix = defaultPrefix
	}
	return strings.ToUpper(prefix) + "_LAYOUT"
}

// OpenPartitions opens the logs of every partition of cfg's layout
// (cfg.Partitions; cfg.Partition is ignored), in partition order, once
// the store agrees with it:
//   - the layout is recorded in the <PREFIX>_LAYOUT bucket by the first
//     OpenPartitions on the store, and every later one must ask for the
//     same number of partitions (one stream is a layout of 1);
//   - a store whose one stream (<PREFIX>_EVENTS) holds events is not opened
//     partitioned, and a partitioned store is not opened as one stream:
//     moving sessions between layouts is a migration, not an open.
//
// A refusal matches ErrLayout, names both layouts, and creates nothing.
func OpenPartitions(ctx context.Context, nc *nats.Conn, cfg LogConfig) ([]*Log, error) {
	cfg.Partition = 0
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return nil, err
	}
	rec, err := claimLayout(ctx, &Log{nc: nc, js: js, cfg: cfg})
	if err != nil {
		return nil, err
	}
	// A store recorded a while ago had its streams made then: one missing
	// now is lost, and is not created empty (its sessions would read as
	// never written). A younger record may be another engine's start,
	// still creating them. A migrated store's streams were all made by
	// the migration.
	if time.Since(rec.Time) > layoutSettle || rec.Migrated != nil {
		if err := CheckPartitionStreams(ctx, nc, cfg); err != nil {
			return nil, err
		}
	}
	if rec.Migrated != nil {
		// The one stream holds the sessions the migration kept: lost, it
		// is not created empty either.
		if _, err := js.Stream(ctx, rec.Migrated.OneStream); err != nil {
			return nil, fmt.Errorf("%w: stream %s, which holds the sessions the migration to partitions kept on it: %w. Restore it (from a backup or a replica) before opening the store; nothing was created",
				ErrStreamMissing, rec.Migrated.OneStream, err)
		}
		if cfg.OneStreamSessions, err = loadSessionSet(ctx, js, cfg, rec.Migrated); err != nil {
			return nil, err
		}
	}
	logs := make([]*Log, cfg.Partitions, cfg.Partitions+1)
	for p := range logs {
		pc := cfg
		pc.Partition = p
		if logs[p], err = OpenLog(ctx, nc, pc); err != nil {
			return nil, fmt.Errorf("open partition %d of %d: %w", p, cfg.Partitions, err)
		}
	}
	if rec.Migrated != nil {
		oc := cfg
		oc.Partitions, oc.Partition = 1, 0
		one, err := OpenLog(ctx, nc, oc)
		if err != nil {
			return nil, fmt.Errorf("open the one stream the migration kept: %w", err)
		}
		logs = append(logs, one)
	}
	return logs, nil
}

// ClaimLayout checks the store's layout against cfg's (cfg.Partitions;
// one stream by default) and records it when the store has none, as
// OpenPartitions does, without opening a log: an engine serving one
// stream records it, so that a partitioned open of the store is refused
// even while its stream is empty. A refusal matches ErrLayout; a record
// the server's permissions refuse, ErrPublishRefused.
func ClaimLayout(ctx context.Context, nc *nats.Conn, cfg LogConfig) error {
	cfg.Partition = 0
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return err
	}
	_, err = claimLayout(ctx, &Log{nc: nc, js: js, cfg: cfg})
	return err
}

// layoutSettle is how long after its layout record a store's streams are
// taken to exist: the engine that recorded it creates them at once.
const layoutSettle = time.Minute

// claimLayout checks the store's layout against cfg's, and records cfg's
// when the store has none (the first engine to open it decides); it
// returns the record. l is a log of the layout's configuration (its
// partition unused). A record the server's permissions refuse matches
// ErrPublishRefused.
func claimLayout(ctx context.Context, l *Log) (*layoutRecord, error) {
	subj := "$KV." + LayoutBucket(l.cfg.Prefix) + "." + layoutKey
	var rec *layoutRecord
	err := WatchRefusal(ctx, l.nc, subj, func(ctx context.Context) error {
		var err error
		rec, err = recordLayout(ctx, l)
		return err
	})
	return rec, err
}

// recordLayout is claimLayout's work.
func recordLayout(ctx context.Context, l *Log) (*layoutRecord, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	cfg := l.cfg
	bucket := LayoutBucket(cfg.Prefix)
	k := cfg.Partitions
	kv, err := l.openSharedBucket(ctx, bucket, "engine layout: how many event streams sessions are spread over")
	if err != nil {
		return nil, fmt.Errorf("open layout bucket %s: %w", bucket, err)
	}
	have, err := readLayout(ctx, l, bucket)
	if err != nil {
		return nil, err
	}
	if have == nil {
		if k > 1 {
			if err := oneStreamEmpty(ctx, l.js, cfg); err != nil {
				return nil, err
			}
		}
		rec := layoutRecord{Partitions: k, Time: time.Now().UTC()}
		v, _ := json.Marshal(rec)
		have = &rec
		if _, err = kv.Create(ctx, layoutKey, v); errors.Is(err, jetstream.ErrKeyExists) {
			have, err = readLayout(ctx, l, bucket) // another engine recorded one meanwhile
			if err == nil && have == nil {
				err = fmt.Errorf("%s/%s exists but its stream's leader has no record", bucket, layoutKey)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("record the layout in %s: %w", bucket, err)
		}
	}
	return have, layoutMismatch(bucket, have, k)
}

// CheckLayout reports whether the store's recorded layout, if it has
// one, is cfg's (cfg.Partitions; one stream by default): an error
// matching ErrLayout when not. It records nothing: a store no
// OpenPartitions opened has no record and passes.
func CheckLayout(ctx context.Context, nc *nats.Conn, cfg LogConfig) error {
	cfg.Partition = 0
	cfg, _, err := cfg.prepare(nc)
	if err != nil {
		return err
	}
	bucket := LayoutBucket(cfg.Prefix)
	have, err := readLayout(ctx, &Log{nc: nc, cfg: cfg}, bucket) // none when the bucket is absent
	if err != nil {
		return err
	}
	return layoutMismatch(bucket, have, cfg.Partitions)
}

// Layout returns the number of event streams the store's layout record
// names (read from the bucket's stream leader), 0 when it has none: a
// one-stream store no OpenPartitions opened, or an empty one.
func Layout(ctx context.Context, nc *nats.Conn, cfg LogConfig) (int, error) {
	cfg.Partition = 0
	cfg, _, err := cfg.prepare(nc)
	if err != nil {
		return 0, err
	}
	have, err := readLayout(ctx, &Log{nc: nc, cfg: cfg}, LayoutBucket(cfg.Prefix))
	if err != nil || have == nil {
		return 0, err
	}
	if have.Migrating > 0 {
		return 0, migratingError(LayoutBucket(cfg.Prefix), have)
	}
	return have.k(), nil
}

// ErrStreamMissing is matched by CheckPartitionStreams when an event
// stream the store's layout names does not exist.
var ErrStreamMissing = errors.New("an event stream of the store's layout is missing")

// CheckPartitionStreams reports whether every event stream of cfg's
// layout (cfg.Partitions of them) exists, creating nothing: an error
// matching ErrStreamMissing names the missing ones. A command that would
// otherwise create a missing stream empty (and fold it as if its sessions
// had never been) asks this first.
func CheckPartitionStreams(ctx context.Context, nc *nats.Conn, cfg LogConfig) error {
	cfg.Partition = 0
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return err
	}
	var missing []string
	for p := range cfg.Partitions {
		pc := cfg
		pc.Partition = p
		name := EventStreamName(cfg.Prefix) + pc.partitionSuffix()
		_, err := js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			missing = append(missing, name)
		case err != nil:
			return fmt.Errorf("look up stream %s: %w", name, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the store spreads sessions over %s; missing: %s. Restore them (from a backup or a replica) before opening the store; nothing was created",
			ErrStreamMissing, streams(cfg.Partitions), strings.Join(missing, ", "))
	}
	return nil
}

// layoutMismatch is the refusal of a store laid out as have (nil: no
// record) to an open of k partitions, or nil when they agree.
func layoutMismatch(bucket string, have *layoutRecord, k int) error {
	if have == nil || have.k() == k {
		return nil
	}
	if have.Migrating > 0 {
		return migratingError(bucket, have)
	}
	if have.Migrated != nil {
		return fmt.Errorf("%w: the store was migrated from one event stream to %d (recorded in %s/%s at %s), not %s: open it as %d partitions (engine serve --nats URL --partitions %d)",
			ErrLayout, have.Migrated.Partitions, bucket, layoutKey, have.Time.Format(time.RFC3339), streams(k), have.Migrated.Partitions, have.Migrated.Partitions)
	}
	return fmt.Errorf("%w: the store spreads sessions over %s (recorded in %s/%s at %s), not %s: open it as %s (only a store of one stream migrates, with engine migrate --partitions K)",
		ErrLayout, streams(have.Partitions), bucket, layoutKey, have.Time.Format(time.RFC3339), streams(k), streams(have.Partitions))
}

// migratingError is the refusal of a store whose migration from one
// stream is under way (have.Migrating partitions).
func migratingError(bucket string, have *layoutRecord) error {
	return fmt.Errorf("%w: a migration of the store from one event stream to %d (recorded in %s/%s at %s) has not finished, and nothing opens the store meanwhile: run engine migrate --partitions %d again to finish it, or engine migrate --abort to go back to one stream",
		ErrMigrating, have.Migrating, bucket, layoutKey, have.Time.Format(time.RFC3339), have.Migrating)
}

// streams names a layout of k partitions.
func streams(k int) string {
	if k == 1 {
		return "one event stream"
	}
	return fmt.Sprintf("%d event streams", k)
}

// readLayout returns the layout record, nil when there is none, as the
// bucket's stream leader holds it: a replica behind it could answer "none"
// for a record another engine has just made.
func readLayout(ctx context.Context, l *Log, bucket string) (*layoutRecord, error) {
	m, err := l.leaderMsg(ctx, "KV_"+bucket, leaderGetRequest{LastBy: "$KV." + bucket + "." + layoutKey})
	if errors.Is(err, ErrNotStored) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s from its leader: %w", bucket, layoutKey, err)
	}
	return parseLayout(bucket, m.data)
}

// parseLayout decodes a layout record, refusing anything else.
func parseLayout(bucket string, data []byte) (*layoutRecord, error) {
	var r layoutRecord
	if err := json.Unmarshal(data, &r); err != nil || !r.valid() {
		return nil, fmt.Errorf("%w: %s/%s holds %q, not a layout record (want {\"partitions\":K})", ErrLayout, bucket, layoutKey, data)
	}
	return &r, nil
}

// oneStreamEmpty refuses a partitioned layout on a store whose one event
// stream holds events: those sessions would be looked for in partitions.
func oneStreamEmpty(ctx context.Context, js jetstream.JetStream, cfg LogConfig) error {
	name := EventStreamName(cfg.Prefix)
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", name, err)
	}
	if n := s.CachedInfo().State.Msgs; n > 0 {
		return fmt.Errorf("%w: the store's one event stream, %s, holds sessions (messages: %d), so it is not opened as %d partitions: open it as one stream, or stop its engines and run engine migrate --partitions %d (docs/scaling.md)",
			ErrLayout, name, n, cfg.Partitions, cfg.Partitions)
	}
	return nil
}
