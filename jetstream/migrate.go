package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// ErrServing is matched by a migration refused because an engine still
// serves the store's one stream.
var ErrServing = errors.New("an engine serves the store")

// SessionsBucket is the object store holding the session sets of a
// prefix's migrations: <PREFIX>_LAYOUT_SESSIONS.
func SessionsBucket(prefix string) string { return LayoutBucket(prefix) + "_SESSIONS" }

// Migration says how Migrate moves a store of one event stream to
// partitions.
type Migration struct {
	// Partitions is the number of partition streams new sessions are
	// spread over, 2 to events.MaxPartitions. 1 aborts a migration that
	// has started and not finished, back to one stream.
	Partitions int
	// Settle is how long the one stream must take no event, after the
	// migration is recorded as under way (engines still serving it see the
	// record and stop), before Migrate takes the set of its sessions.
	// Default 10s.
	Settle time.Duration
	// Progress, when set, is told each step.
	Progress func(step string)
}

// MigrationReport is what a migration did.
type MigrationReport struct {
	Partitions int
	OneStream  string   // the stream whose sessions stay on it
	LastSeq    uint64   // its last sequence when the set was taken
	Sessions   int      // the sessions kept on it
	Streams    []string // the partition streams
	Aborted    bool     // a migration under way was undone
}

// Migrate moves a store of one event stream to m.Partitions streams
// without moving an event: every session the one stream holds stays on
// it (its events and sequences unchanged, reads and writes go on there),
// and every later session is created in its partition. It runs with
// every engine stopped:
//
//  1. it refuses while an engine's projection holds the one stream's
//     runner lease (ErrServing);
//  2. it records that a migration is under way: an engine starting
//     refuses the store, and an engine serving it stops when it sees the
//     record;
//  3. it takes the set of the one stream's sessions once the stream has
//     taken no event for m.Settle (five tries, then ErrServing);
//  4. it creates the partition streams, stores the set in the
//     <PREFIX>_LAYOUT_SESSIONS object store, and records the migrated
//     layout, which engines then serve with --partitions K.
//
// Migrate resumes a migration left unfinished, and a store already
// migrated to m.Partitions reports it and changes nothing. An event
// stored on the one stream after the set was taken, for a session the
// set does not hold, is not served: Migrate then returns ErrServing
// naming those sessions, the migration recorded. cfg gives the
// prefix and timeouts; what the migration creates gets the one stream's
// replicas. A refusal names the problem and its fix; a refusal of steps 1
// and 2 leaves the layout record as it was.
func Migrate(ctx context.Context, nc *nats.Conn, cfg LogConfig, m Migration) (MigrationReport, error) {
	cfg.Partitions, cfg.Partition = 1, 0
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return MigrationReport{}, err
	}
	if m.Settle <= 0 {
		m.Settle = 10 * time.Second
	}
	say := func(format string, args ...any) {
		if m.Progress != nil {
			m.Progress(fmt.Sprintf(format, args...))
		}
	}
	one := EventStreamName(cfg.Prefix)
	rep := MigrationReport{Partitions: m.Partitions, OneStream: one}
	bucket := LayoutBucket(cfg.Prefix)
	// Whatever the migration creates (the layout bucket too, on a store
	// that has none yet) is as durable as the stream whose sessions it
	// takes over.
	stream, streamErr := js.Stream(ctx, one)
	if streamErr == nil {
		cfg.Replicas = stream.CachedInfo().Config.Replicas
	}
	probe := &Log{nc: nc, js: js, cfg: cfg}
	kv, err := probe.openSharedBucket(ctx, bucket, "engine layout: how many event streams sessions are spread over")
	if err != nil {
		return rep, fmt.Errorf("open layout bucket %s: %w", bucket, err)
	}
	have, rev, err := leaderLayoutEntry(ctx, probe, bucket)
	if err != nil {
		return rep, err
	}
	if m.Partitions == 1 {
		return rep, abortMigration(ctx, kv, bucket, have, rev, &rep)
	}
	// The one stream is served beside the partitions, as one more.
	if m.Partitions < 2 || m.Partitions > events.MaxPartitions-1 {
		return rep, fmt.Errorf("migrate: %d partitions: want 2 to %d", m.Partitions, events.MaxPartitions-1)
	}
	switch {
	case have == nil, have.Partitions == 1:
	case have.Migrated != nil && have.Migrated.Partitions == m.Partitions:
		rep.LastSeq, rep.Sessions = have.Migrated.LastSeq, have.Migrated.Sessions
		rep.Streams = partitionStreams(cfg.Prefix, m.Partitions)
		say("the store was migrated to %d partitions at %s: nothing to do", m.Partitions, have.Time.Format(time.RFC3339))
		return rep, nil
	case have.Migrating == m.Partitions:
		say("resuming the migration to %d partitions recorded at %s", m.Partitions, have.Time.Format(time.RFC3339))
	case have.Migrating > 0:
		return rep, fmt.Errorf("%w: a migration to %d partitions is under way (recorded at %s): finish it with --partitions %d, or undo it with --abort", ErrLayout, have.Migrating, have.Time.Format(time.RFC3339), have.Migrating)
	default:
		return rep, fmt.Errorf("%w: the store already spreads sessions over %d event streams: only a store of one stream migrates", ErrLayout, have.k())
	}
	if err := oneStreamLookup(streamErr, have, one, m.Partitions); err != nil {
		return rep, err
	}
	oneLog, err := OpenLog(ctx, nc, cfg)
	if err != nil {
		return rep, err
	}
	if have == nil || have.Migrating == 0 {
		if err := oneLog.RunnerLeaseFree(ctx, "engine-migrate"); errors.Is(err, ErrRunnerActive) {
			return rep, fmt.Errorf("%w: %w: stop every engine serving the store, then migrate", ErrServing, err)
		} else if err != nil {
			return rep, err
		}
		v, _ := json.Marshal(layoutRecord{Migrating: m.Partitions, Time: time.Now().UTC()})
		if rev, err = putLayout(ctx, kv, bucket, v, have != nil, rev); err != nil {
			return rep, err
		}
		say("recorded that a migration to %d partitions is under way: engines serving %s stop, and none starts", m.Partitions, one)
	}
	sessions, last, err := settledSessions(ctx, stream, oneLog, m.Settle, say)
	if err != nil {
		return rep, err
	}
	rep.LastSeq, rep.Sessions = last, len(sessions)
	if rep.Streams, err = createPartitions(ctx, nc, cfg, m.Partitions); err != nil {
		return rep, err
	}
	say("created %s with %d replicas, as %s", strings.Join(rep.Streams, ", "), cfg.Replicas, one)
	// A session a writer nobody stopped added since the listing is the
	// one stream's too: it is kept, with a warning. The set then holds
	// every session with an event through end.
	end, late, err := lateSessions(ctx, oneLog, last, NewSessionSet(sessions))
	if err != nil {
		return rep, err
	}
	if len(late) > 0 {
		say("WARNING: %d sessions were written to %s after its listing (an engine or publisher still writes there: stop it); they are kept on it: %s",
			len(late), one, strings.Join(late[:min(len(late), 10)], ", "))
		sessions = append(sessions, late...)
		rep.Sessions = len(sessions)
	}
	last = end
	rep.LastSeq = last
	set := NewSessionSet(sessions)
	// A name of its own for every run: a run that loses the race to
	// record its layout never writes over the set another run recorded.
	name := fmt.Sprintf("one-stream-sessions-%s", strings.ToLower(ulid.Make().String()))
	if err := putSessionSet(ctx, js, cfg, name, set); err != nil {
		return rep, err
	}
	say("stored the %d sessions kept on %s as %s/%s", len(sessions), one, SessionsBucket(cfg.Prefix), name)
	v, _ := json.Marshal(layoutRecord{Time: time.Now().UTC(), Migrated: &migrated{
		Partitions: m.Partitions, OneStream: one, LastSeq: last, Sessions: len(sessions), SessionsObject: name,
		Hashes: set.Len(), SHA256: set.digest(),
	}})
	if _, err := putLayout(ctx, kv, bucket, v, true, rev); err != nil {
		return rep, err
	}
	say("recorded the migrated layout: serve the store with engine serve --nats URL --partitions %d", m.Partitions)
	return rep, unservedLate(ctx, oneLog, one, last, set)
}

// oneStreamLookup names what the one stream's look-up error (err) means
// for a migration to k partitions; nil when the stream was found.
func oneStreamLookup(err error, have *layoutRecord, one string, k int) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && have != nil && have.Migrating > 0:
		return fmt.Errorf("%w: the store's event stream %s is missing in the middle of its migration: restore it (from a backup or a replica) and run engine migrate again, or undo the migration with engine migrate --abort", ErrStreamMissing, one)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: the store has no event stream %s: there is nothing to migrate; engine serve --nats URL --partitions %d starts a store of partitions", ErrLayout, one, k)
	case err != nil:
		return fmt.Errorf("look up stream %s: %w", one, err)
	}
	return nil
}

// createPartitions creates (or opens) the event streams of k partitions
// and returns their names.
func createPartitions(ctx context.Context, nc *nats.Conn, cfg LogConfig, k int) ([]string, error) {
	var names []string
	for p := range k {
		pc := cfg
		pc.Partitions, pc.Partition = k, p
		pl, err := OpenLog(ctx, nc, pc)
		if err != nil {
			return names, fmt.Errorf("create partition %d of %d: %w", p, k, err)
		}
		names = append(names, pl.StreamName())
	}
	return names, nil
}

// unservedLate refuses, naming them, the sessions that got an event on
// the one stream (oneLog, named one) after the set was taken (through
// last) and that the set does not hold: they are not served.
func unservedLate(ctx context.Context, oneLog *Log, one string, last uint64, set *SessionSet) error {
	_, late, err := lateSessions(ctx, oneLog, last, set)
	if err != nil || len(late) == 0 {
		return err
	}
	return fmt.Errorf("%w: after the sessions of %s were taken (through sequence %d), events were stored there for %d sessions the migration did not keep, which are not served: %s; an engine or publisher still writes to %s: stop it (engine tail --last N prints them)",
		ErrServing, one, last, len(late), strings.Join(late[:min(len(late), 10)], ", "), one)
}

// partitionStreams names the event streams of k partitions.
func partitionStreams(prefix string, k int) []string {
	out := make([]string, k)
	for p := range out {
		out[p] = fmt.Sprintf("%s_%d", EventStreamName(prefix), p)
	}
	return out
}

// leaderLayoutEntry reads the layout record and its revision from the
// bucket's stream leader (nil and 0 when there is none): a replica behind
// it could answer a record another run has since replaced.
func leaderLayoutEntry(ctx context.Context, l *Log, bucket string) (*layoutRecord, uint64, error) {
	v, rev, err := l.leaderKV(ctx, bucket, layoutKey)
	if err != nil || v == nil {
		return nil, rev, err
	}
	r, err := parseLayout(bucket, v)
	return r, rev, err
}

// putLayout writes the layout record: created when the bucket holds none
// (exists false), else over revision rev only (another writer meanwhile
// refuses it).
func putLayout(ctx context.Context, kv jetstream.KeyValue, bucket string, v []byte, exists bool, rev uint64) (uint64, error) {
	var err error
	var next uint64
	if exists {
		next, err = kv.Update(ctx, layoutKey, v, rev)
	} else {
		next, err = kv.Create(ctx, layoutKey, v)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: write %s/%s: %w (another engine or migration wrote it meanwhile: run engine migrate again)", ErrLayout, bucket, layoutKey, err)
	}
	return next, nil
}

// abortMigration puts the one-stream layout back in place of a migration
// under way.
func abortMigration(ctx context.Context, kv jetstream.KeyValue, bucket string, have *layoutRecord, rev uint64, rep *MigrationReport) error {
	if have == nil || have.Migrating == 0 {
		return fmt.Errorf("%w: no migration is under way to abort (%s/%s: %s)", ErrLayout, bucket, layoutKey, describeLayout(have))
	}
	v, _ := json.Marshal(layoutRecord{Partitions: 1, Time: time.Now().UTC()})
	if _, err := putLayout(ctx, kv, bucket, v, true, rev); err != nil {
		return err
	}
	rep.Aborted = true
	return nil
}

// describeLayout says what a layout record lays out.
func describeLayout(r *layoutRecord) string {
	switch {
	case r == nil:
		return "no record"
	case r.Migrating > 0:
		return fmt.Sprintf("a migration to %d partitions under way", r.Migrating)
	case r.Migrated != nil:
		return fmt.Sprintf("migrated to %d partitions", r.Migrated.Partitions)
	}
	return streams(r.Partitions)
}

// ErrRunnerActive is matched by RunnerLeaseFree when an engine's
// projection holds the runner lease of the log's stream.
var ErrRunnerActive = errors.New("a projection runner is active")

// RunnerLeaseFree reports whether the projection runner lease of l's
// stream can be taken now, taking it as owner and giving it back: an
// error matching ErrRunnerActive, naming the stream, while an engine's
// projection holds it. Offline commands (rebuild, migrate) ask it first.
func (l *Log) RunnerLeaseFree(ctx context.Context, owner string) error {
	meta, err := l.OpenMeta(ctx)
	if err != nil {
		return err
	}
	lease, err := meta.Acquire(ctx, owner, 5*time.Second)
	if err != nil {
		return fmt.Errorf("%w on stream %s (%w)", ErrRunnerActive, l.StreamName(), err)
	}
	return meta.Release(ctx, lease)
}

// settledSessions returns the sessions the stream holds and its last
// sequence once the stream took no event for a whole settle: an engine
// that has not yet stopped, or a publisher, could still add a session.
// It tries five times, then refuses.
func settledSessions(ctx context.Context, stream jetstream.Stream, l *Log, settle time.Duration, say func(string, ...any)) ([]string, uint64, error) {
	const tries = 5
	for try := 1; ; try++ {
		before, err := stream.Info(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("stream %s: %w", l.StreamName(), err)
		}
		say("waiting %s for engines serving %s to stop (the stream must take no event meanwhile)", settle, l.StreamName())
		if err := logport.Sleep(ctx, settle); err != nil {
			return nil, 0, err
		}
		// The server lists a million subjects in pages, each of which can
		// take longer than a request's default timeout.
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		say("listing the %d sessions of %s (the server takes about 14 s a million)", before.State.NumSubjects, l.StreamName())
		info, err := stream.Info(lctx, jetstream.WithSubjectFilter(l.subjBase+"*"))
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("list the sessions of stream %s: %w", l.StreamName(), err)
		}
		last := before.State.LastSeq
		if info.State.LastSeq == last {
			sessions := make([]string, 0, len(info.State.Subjects))
			for subj := range info.State.Subjects {
				if s := l.SessionOf(subj); s != "" {
					sessions = append(sessions, s)
				}
			}
			slices.Sort(sessions)
			say("%s holds %d sessions, last sequence %d", l.StreamName(), len(sessions), last)
			return sessions, last, nil
		}
		if try == tries {
			return nil, 0, fmt.Errorf("%w: stream %s still takes events (last sequence %d, then %d %s later) after %d waits: stop every engine and publisher writing to it, then run engine migrate again (the migration stays recorded as under way, so no engine starts; --abort undoes it)",
				ErrServing, l.StreamName(), last, info.State.LastSeq, settle, tries)
		}
	}
}

// lateSessions reads l's stream after sequence last through its end now
// (asked of the leader first), and returns that end and the sessions of
// the events read that set does not hold. The reads may be answered by a
// replica: one that has not reached the end yet is asked again.
func lateSessions(ctx context.Context, l *Log, last uint64, set *SessionSet) (uint64, []string, error) {
	end, err := l.LastStreamSeq(ctx)
	if err != nil || end <= last {
		return max(end, last), nil, err
	}
	for try := 1; ; try++ {
		var late []string
		var reached uint64
		err := l.scan(ctx, l.subjBase+"*", last+1, end, func(r logport.Record) error {
			reached = max(reached, r.Seq)
			if r.Session != "" && !set.Has(r.Session) && !slices.Contains(late, r.Session) {
				late = append(late, r.Session)
			}
			return nil
		})
		if err != nil {
			return 0, nil, err
		}
		if reached == end {
			return end, late, nil
		}
		if try == 5 {
			return 0, nil, fmt.Errorf("read stream %s through sequence %d: the reads reached %d only (a replica behind its leader?): run engine migrate again", l.StreamName(), end, reached)
		}
		if err := logport.Sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, nil, err
		}
	}
}

// listTimeout bounds the listing of a stream's sessions.
const listTimeout = 30 * time.Minute

// putSessionSet stores set as the object name of the prefix's sessions
// object store, creating the store when it does not exist. A replicated
// store created a moment ago has no leader yet (its publish finds no
// responders), and a failover leaves it without one for as long: while
// the error is transient the whole step is asked again, putSetWait at
// most. A put under the same name replaces the object, so a retry after
// a put that did land stores the same set.
func putSessionSet(ctx context.Context, js jetstream.JetStream, cfg LogConfig, name string, set *SessionSet) error {
	bucket := SessionsBucket(cfg.Prefix)
	data := set.marshal()
	pctx, cancel := context.WithTimeout(ctx, putSetWait)
	defer cancel()
	return Retry(pctx, logport.Backoff{First: 50 * time.Millisecond, Max: time.Second}, nil, func(ctx context.Context) error {
		// A request sent while the cluster has no leader to answer it
		// may get no reply at all: each attempt has its own bound.
		ctx, cancel := context.WithTimeout(ctx, putSetAttempt)
		defer cancel()
		obs, err := js.ObjectStore(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			st := jetstream.FileStorage
			if cfg.MemoryStorage {
				st = jetstream.MemoryStorage
			}
			obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
				Bucket: bucket, Description: "engine layout: the sessions each migration kept on the one event stream",
				Replicas: cfg.Replicas, Storage: st,
			})
		}
		if err != nil {
			return fmt.Errorf("open object store %s: %w", bucket, err)
		}
		if _, err := obs.PutBytes(ctx, name, data); err != nil {
			return fmt.Errorf("store the session set %s/%s: %w", bucket, name, err)
		}
		return nil
	})
}

// putSetWait bounds putSessionSet's retries, and putSetAttempt each
// attempt: the wait is longer than a replicated store's leader election
// after a node is lost.
const (
	putSetWait    = time.Minute
	putSetAttempt = 5 * time.Second
)

// loadSessionSet reads the set of sessions a migration kept on the one
// stream, checking it against the layout record. A read a replica
// behind the store's leaders could fail is asked again a few times
// before the set is taken for lost.
func loadSessionSet(ctx context.Context, js jetstream.JetStream, cfg LogConfig, mig *migrated) (*SessionSet, error) {
	bucket := SessionsBucket(cfg.Prefix)
	var err error
	for try := 1; ; try++ {
		var set *SessionSet
		if set, err = readSessionSet(ctx, js, bucket, mig); err == nil {
			return set, nil
		}
		if try == 5 {
			break
		}
		if serr := logport.Sleep(ctx, 500*time.Millisecond); serr != nil {
			return nil, serr
		}
	}
	return nil, fmt.Errorf("%w: read the sessions the migration kept on %s (%s/%s): %w; without them no session can be placed: restore the object store from a backup",
		ErrLayout, mig.OneStream, bucket, mig.SessionsObject, err)
}

// readSessionSet is one read of loadSessionSet.
func readSessionSet(ctx context.Context, js jetstream.JetStream, bucket string, mig *migrated) (*SessionSet, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, err
	}
	data, err := obs.GetBytes(ctx, mig.SessionsObject)
	if err != nil {
		return nil, err
	}
	set, err := unmarshalSessionSet(data)
	if err == nil && (set.Len() != mig.Hashes || set.digest() != mig.SHA256) {
		err = fmt.Errorf("it holds %d session hashes with SHA-256 %s, the layout record names %d with %s", set.Len(), set.digest(), mig.Hashes, mig.SHA256)
	}
	return set, err
}

// OneStreamSessions is the set of sessions the migration kept on this
// log's stream, on a migrated store's one stream (nil otherwise).
func (l *Log) OneStreamSessions() *SessionSet {
	if l.cfg.Partitions > 1 {
		return nil
	}
	return l.cfg.OneStreamSessions
}

// KeptSessions returns, on a store migrated from one stream to
// partitions, the set of sessions the migration kept on that stream,
// after checking the stream exists; nil on any other store.
func KeptSessions(ctx context.Context, nc *nats.Conn, cfg LogConfig) (*SessionSet, error) {
	cfg.Partitions, cfg.Partition = 1, 0
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return nil, err
	}
	bucket := LayoutBucket(cfg.Prefix)
	have, err := readLayout(ctx, &Log{nc: nc, js: js, cfg: cfg}, bucket)
	if err != nil || have == nil || have.Migrated == nil {
		return nil, err
	}
	if _, err := js.Stream(ctx, have.Migrated.OneStream); err != nil {
		return nil, fmt.Errorf("%w: stream %s, which holds the sessions the migration to partitions kept on it: %w. Restore it (from a backup or a replica) before opening the store; nothing was created",
			ErrStreamMissing, have.Migrated.OneStream, err)
	}
	return loadSessionSet(ctx, js, cfg, have.Migrated)
}

// WatchLayout calls changed once, with an error matching ErrLayout, when
// the store's layout record stops being the one an engine opened it with
// (k partitions, migrated or not): a migration started or finished, or
// the record was replaced or removed. A serving engine stops then, as it
// would otherwise go on placing sessions by a layout the store no longer
// has. It watches until ctx ends; a store without a layout bucket is
// refused with an error, and not watched.
func WatchLayout(ctx context.Context, nc *nats.Conn, cfg LogConfig, changed func(error)) error {
	cfg.Partition = 0
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return err
	}
	bucket := LayoutBucket(cfg.Prefix)
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("the store has no layout bucket %s (the engine's user may not create it)", bucket)
	}
	if err != nil {
		return fmt.Errorf("open layout bucket %s: %w", bucket, err)
	}
	w, err := kv.Watch(ctx, layoutKey)
	if err != nil {
		return fmt.Errorf("watch %s/%s: %w", bucket, layoutKey, err)
	}
	migratedOpen := cfg.OneStreamSessions != nil
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			var open bool
			select {
			case <-ctx.Done():
				return
			case e, open = <-w.Updates():
				if !open {
					return
				}
			}
			if e == nil {
				continue // the end of the initial values
			}
			var now *layoutRecord
			if e.Operation() == jetstream.KeyValuePut {
				now, _ = parseLayout(bucket, e.Value())
			}
			if now != nil && now.k() == cfg.Partitions && (now.Migrated != nil) == migratedOpen {
				continue
			}
			changed(fmt.Errorf("%w: the store's layout changed while serving it as %s: %s/%s now says %s; restart the engine with the layout the record names",
				ErrLayout, streams(cfg.Partitions), bucket, layoutKey, describeLayout(now)))
			return
		}
	}()
	return nil
}
