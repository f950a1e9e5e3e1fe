package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// JetStream error codes that mean "the expected last subject sequence did
// not hold" (see NATS-FACTS: 10071 stale sequence, 10164 write in flight):
// nats.go's own constants.
const (
	codeWrongLastSeq         = jetstream.JSErrCodeStreamWrongLastSequence         // 10071
	codeWrongLastSeqConstant = jetstream.JSErrCodeStreamWrongLastSequenceConstant // 10164
	// codeMsgIDInProcess: a message with this Nats-Msg-Id is being stored
	// (proposed to the stream's group, not yet applied).
	codeMsgIDInProcess jetstream.ErrorCode = 10158
)

// Header names used on event messages: nats.go's where it has them (the
// atomic batch headers it does not declare).
const (
	headerMsgID       = jetstream.MsgIDHeader               // Nats-Msg-Id
	headerExpectedSeq = jetstream.ExpectedLastSubjSeqHeader // Nats-Expected-Last-Subject-Sequence
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
	// HeaderEventType carries the event type beside the msgpack body so
	// that operators can filter without decoding. Optional on read.
	HeaderEventType = "Engine-Event-Type"
)

// LogConfig configures the event stream. The zero value is usable.
type LogConfig struct {
	// Prefix is the subject prefix: events go to <Prefix>.events.<session>.
	// Default "tools". The stream is named <PREFIX>_EVENTS.
	Prefix string
	// Replicas of the stream (1 for a single server, 3 for a cluster).
	// Default 1.
	Replicas int
	// Duplicates is the dedupe window for Nats-Msg-Id. Default 2 minutes.
	Duplicates time.Duration
	// MemoryStorage keeps the stream in memory (tests, benchmarks only).
	MemoryStorage bool
	// AllowDeletes allows deleting messages and purging the stream. The
	// default denies both: the log is the audit record.
	AllowDeletes bool
	// Timeout applies to each operation whose context has no deadline.
	// Default 10s.
	Timeout time.Duration
	// APIPrefix is the JetStream API prefix of an account that imports
	// another's JetStream (nats.go's NewWithAPIPrefix); Domain the
	// JetStream domain of a leaf node's hub ($JS.<domain>.API.). At most
	// one; default $JS.API. Every request of the log, direct gets
	// included, goes to it.
	APIPrefix string
	Domain    string
	// Guard, when set, is asked before each append; its error refuses the
	// append, nothing written (a DiskGuard's Check).
	Guard func() error
	// Partitions is the number of event streams sessions are spread over
	// (events.Partition of the session id), and Partition the one this
	// log holds, in [0, Partitions). Above 1, the stream is
	// <PREFIX>_EVENTS_<p> on the subjects <prefix>.events.<p>.*, the
	// views, projection and history buckets are per partition
	// (<PREFIX>_VIEWS_<p>, ...), every other stream and bucket (keys,
	// registry, audit, actor keys, embeddings) is shared, and the log
	// refuses sessions of other partitions (ErrWrongPartition). Default
	// 1: one stream, <PREFIX>_EVENTS on <prefix>.events.*.
	Partitions int
	Partition  int
	// OneStreamSessions, on a store migrated from one stream to
	// partitions, is the set of sessions the migration kept on the one
	// stream: a partition's log refuses them, and the one stream's log
	// (Partitions 1) holds only them (ErrWrongPartition either way), so
	// events stored on the wrong side read back refused on every engine.
	// OpenPartitions sets it from the store's layout record.
	OneStreamSessions *SessionSet
	// Faults, when set, returns a channel closed when the store fails a
	// write or JetStream is disabled (an embedded server's Faults), or
	// already closed while such a fault stands. An append waiting for its
	// acknowledgement then stops waiting (nats-server never answers a
	// publish whose write failed) and answers at once: stored when its
	// events are found in the stream, else outcome unknown.
	Faults func() <-chan struct{}
}

// Validate reports every problem of the configuration at once.
func (c LogConfig) Validate() error {
	var errs []error
	if c.Prefix != "" && !events.ValidToken(c.Prefix) {
		errs = append(errs, fmt.Errorf("log: prefix %q must be one subject token of [A-Za-z0-9_-]", c.Prefix))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("log: replicas %d out of range 1..5", c.Replicas))
	}
	if c.Duplicates < 0 {
		errs = append(errs, fmt.Errorf("log: duplicate window %s is negative", c.Duplicates))
	}
	if c.APIPrefix != "" && c.Domain != "" {
		errs = append(errs, fmt.Errorf("log: API prefix %q and domain %q both set: give one", c.APIPrefix, c.Domain))
	}
	if c.Partitions < 0 || c.Partitions > events.MaxPartitions {
		errs = append(errs, fmt.Errorf("log: partitions %d out of range 1..%d", c.Partitions, events.MaxPartitions))
	} else if c.Partition < 0 || c.Partition >= max(c.Partitions, 1) {
		errs = append(errs, fmt.Errorf("log: partition %d out of range 0..%d (partitions %d)", c.Partition, max(c.Partitions, 1)-1, max(c.Partitions, 1)))
	}
	return errors.Join(errs...)
}

func (c LogConfig) withDefaults() LogConfig {
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Duplicates == 0 {
		c.Duplicates = 2 * time.Minute
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	return c
}

// partitionSuffix ends the names of the per-partition streams and
// buckets: "_<p>", or "" for the unpartitioned layout.
func (c LogConfig) partitionSuffix() string {
	if c.Partitions <= 1 {
		return ""
	}
	return "_" + strconv.Itoa(c.Partition)
}

// subjectBase is what the subjects of the log's sessions start with:
// "<prefix>.events.", or "<prefix>.events.<p>." for partition p.
func (c LogConfig) subjectBase() string {
	if c.Partitions <= 1 {
		return c.Prefix + ".events."
	}
	return c.Prefix + ".events." + strconv.Itoa(c.Partition) + "."
}

// Log is the session event log. It is safe for concurrent use; appends to
// one session are serialized inside the process (a CAS publish to a subject
// with a write in flight would fail), appends to different sessions run in
// parallel.
type Log struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	cfg      LogConfig
	name     string
	subjBase string // "<prefix>.events."
	atomic   bool
	// purgeDenied: the stream was created with deny_purge (by an engine without erase),
	// so no session of it can be erased (ErrPurgeDenied).
	purgeDenied bool
	want        jetstream.StreamConfig // what OpenLog made (CheckStream)
	locks       [512]sync.Mutex

	rcMu sync.Mutex
	rc   chan struct{} // closed (and replaced) when the connection reconnects
	acks ackMux        // the appends' publishes and their acknowledgements

	keys     keysOnce      // the idempotency-key index, opened on first use
	msgsRead atomic.Uint64 // messages read back by scans and direct gets
}

// MessagesRead counts the messages this log has read back from the stream
// (session scans and single direct gets): what a look-up costs, in
// messages, whatever the machine's speed.
func (l *Log) MessagesRead() uint64 { return l.msgsRead.Load() }

// newJetStream is nats.go's JetStream context on cfg's API prefix or
// domain.
func newJetStream(nc *nats.Conn, cfg LogConfig) (jetstream.JetStream, error) {
	switch {
	case cfg.APIPrefix != "":
		return jetstream.NewWithAPIPrefix(nc, cfg.APIPrefix)
	case cfg.Domain != "":
		return jetstream.NewWithDomain(nc, cfg.Domain)
	}
	return jetstream.New(nc)
}

// prepare validates c and returns it with its defaults and the JetStream
// context of its API prefix or domain on nc.
func (c LogConfig) prepare(nc *nats.Conn) (LogConfig, jetstream.JetStream, error) {
	if err := c.Validate(); err != nil {
		return c, nil, err
	}
	c = c.withDefaults()
	js, err := newJetStream(nc, c)
	if err != nil {
		return c, nil, fmt.Errorf("open jetstream: %w", err)
	}
	return c, js, nil
}

// apiPrefix is the JetStream API prefix the log's requests go to, ending
// in a dot, as nats.go builds it.
func (c LogConfig) apiPrefix() string {
	switch {
	case c.APIPrefix != "":
		return strings.TrimSuffix(c.APIPrefix, ".") + "."
	case c.Domain != "":
		return "$JS." + c.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

// OpenLog creates the event stream, or verifies and updates an existing one.
func OpenLog(ctx context.Context, nc *nats.Conn, cfg LogConfig) (*Log, error) {
	cfg, js, err := cfg.prepare(nc)
	if err != nil {
		return nil, err
	}
	l := &Log{
		nc:       nc,
		acks:     ackMux{nc: nc},
		js:       js,
		cfg:      cfg,
		name:     EventStreamName(cfg.Prefix) + cfg.partitionSuffix(),
		subjBase: cfg.subjectBase(),
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	sc := jetstream.StreamConfig{
		Name:        l.name,
		Description: "session tool-intent events, one subject per session",
		Subjects:    []string{l.subjBase + "*"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.Duplicates,
		MaxMsgSize:  int32(events.MaxEventBytes + 4096),
		Discard:     jetstream.DiscardOld,
		DenyDelete:  !cfg.AllowDeletes,
		// Purge stays possible: an erase purges one session's
		// subject through the admin path (Eraser); the engine user and
		// the channels may not purge (credentials, deploy/accounts.conf).
		DenyPurge:          false,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
	if cfg.MemoryStorage {
		sc.Storage = jetstream.MemoryStorage
	}
	stream, err := js.Stream(ctx, l.name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		stream, err = js.CreateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", l.name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("look up stream %s: %w", l.name, err)
	default:
		have := stream.CachedInfo().Config
		if len(have.Subjects) != 1 || have.Subjects[0] != sc.Subjects[0] {
			return nil, fmt.Errorf("stream %s exists with subjects %v, want %v: use another --prefix or fix the stream", l.name, have.Subjects, sc.Subjects)
		}
		sc.Storage = have.Storage // storage cannot change
		sc.Replicas = have.Replicas
		// A stream created denies purge, and JetStream cannot
		// lift that: it still serves, and an erase answers ErrPurgeDenied.
		sc.DenyPurge = have.DenyPurge
		if have.DenyDelete != sc.DenyDelete || have.DenyPurge != sc.DenyPurge || !have.AllowDirect ||
			have.Duplicates != sc.Duplicates || !have.AllowAtomicPublish || have.MaxMsgSize != sc.MaxMsgSize {
			stream, err = js.UpdateStream(ctx, sc)
			if err != nil {
				return nil, fmt.Errorf("update stream %s to the configuration the engine needs: %w (only an admin may update the stream: run engine stream repair as the admin user)", l.name, err)
			}
		}
	}
	l.stream = stream
	l.atomic = stream.CachedInfo().Config.AllowAtomicPublish
	l.purgeDenied = stream.CachedInfo().Config.DenyPurge
	l.want = sc
	l.watchReconnects()
	return l, nil
}

func (l *Log) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.cfg.Timeout)
}

// streamInfo asks the event stream's leader for the stream's info, asking
// again after a reconnect or a second without an answer: a leader that
// died or went silent never answers, and the replicas left elect another.
func (l *Log) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	return ask(ctx, l, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return l.stream.Info(ctx)
	})
}

// StreamName is the name of the event stream.
func (l *Log) StreamName() string { return l.name }

// Prefix is the subject prefix.
func (l *Log) Prefix() string { return l.cfg.Prefix }

// Partition is the partition the log holds and the number of partitions
// of its layout (0 and 1 for one stream).
func (l *Log) Partition() (p, partitions int) { return l.cfg.Partition, l.cfg.Partitions }

// checkSession reports whether session is a valid id (an error matching
// events.ErrInvalidSession) of a session this log holds (one of another
// partition: ErrWrongPartition).
func (l *Log) checkSession(session string) error {
	if err := events.ValidateSessionID(session); err != nil {
		return err
	}
	if set := l.cfg.OneStreamSessions; set != nil {
		kept, one := set.Has(session), EventStreamName(l.cfg.Prefix)
		switch {
		case kept && l.cfg.Partitions > 1:
			return &logport.WrongPartitionError{Session: session, Partition: -1, Partitions: l.cfg.Partitions, Stream: l.name, StreamPartition: l.cfg.Partition, OneStream: one}
		case kept:
			return nil
		case l.cfg.Partitions <= 1:
			// The log of the kept one stream: the session is a partition's.
			return &logport.WrongPartitionError{Session: session, Partition: events.Partition(session, 1), Stream: l.name, OneStream: one}
		}
	}
	if p := events.Partition(session, l.cfg.Partitions); p != l.cfg.Partition {
		return &logport.WrongPartitionError{Session: session, Partition: p, Partitions: l.cfg.Partitions, Stream: l.name, StreamPartition: l.cfg.Partition}
	}
	return nil
}

// Subject is the subject of a session's events.
func (l *Log) Subject(session string) string { return l.subjBase + session }

// SessionOf returns the session of an event subject, or "" when the subject
// is not one of this log's.
func (l *Log) SessionOf(subject string) string {
	s, ok := strings.CutPrefix(subject, l.subjBase)
	if !ok {
		return ""
	}
	return s
}

// JetStream exposes the JetStream context (for the projection's KV and for
// benchmarks that compare against raw publishes).
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// OnConn returns a log of the same stream and settings on nc, another
// connection to the same servers (its user needs the same permissions).
// The engine reads history pages through one: a page's batched direct
// get delivers hundreds of messages, and on the appends' connection the
// acknowledgements behind them wait until they are read. The caller
// closes nc.
func (l *Log) OnConn(nc *nats.Conn) (*Log, error) {
	js, err := newJetStream(nc, l.cfg)
	if err != nil {
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	o := &Log{
		nc: nc, acks: ackMux{nc: nc}, js: js, cfg: l.cfg, name: l.name, subjBase: l.subjBase,
		stream: l.stream, atomic: l.atomic, purgeDenied: l.purgeDenied, want: l.want,
	}
	o.watchReconnects()
	return o, nil
}

// Conn is the NATS connection the log uses.
func (l *Log) Conn() *nats.Conn { return l.nc }

// Atomic reports whether multi-event appends are possible.
func (l *Log) Atomic() bool { return l.atomic }

// lock is the mutex of session's stripe: FNV-1a of the id, as
// events.Partition spreads sessions.
func (l *Log) lock(session string) *sync.Mutex {
	return &l.locks[events.Partition(session, len(l.locks))]
}

// LastSeq returns the stream sequence of the session's last event, 0 when
// it has none. One direct get, which any replica may answer: one behind
// the leader answers with a sequence it passed, and one that died or went
// silent is asked again a second later. Callers that act on the answer
// where a low one is not safe ask LeaderLastSeq.
func (l *Log) LastSeq(ctx context.Context, session string) (uint64, error) {
	if err := l.checkSession(session); err != nil {
		return 0, fmt.Errorf("last sequence of %q: %w", session, err)
	}
	msg, err := ask(ctx, l, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return l.stream.GetLastMsgForSubject(ctx, l.Subject(session))
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last sequence of %q: %w", session, err)
	}
	l.msgsRead.Add(1)
	return msg.Sequence, nil
}

// StreamLeader asks the stream for its last sequence and its leader: the
// readiness probe's cheap question. leader is "" on a
// clustered stream without a leader (appends stall); single reports a
// stream without a cluster (an embedded single server), whose leader is
// the server itself.
func (l *Log) StreamLeader(ctx context.Context) (last uint64, leader string, single bool, err error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	info, err := l.streamInfo(ctx)
	if err != nil {
		return 0, "", false, fmt.Errorf("stream info %s: %w", l.name, err)
	}
	if info.Cluster == nil || (info.Cluster.Leader == "" && len(info.Cluster.Replicas) == 0 && info.Config.Replicas <= 1) {
		return info.State.LastSeq, "", true, nil
	}
	return info.State.LastSeq, info.Cluster.Leader, false, nil
}

// LastStreamSeq returns the last sequence of the whole stream.
func (l *Log) LastStreamSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	info, err := l.streamInfo(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info %s: %w", l.name, err)
	}
	return info.State.LastSeq, nil
}
