package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// JetStream error codes that mean "the expected last subject sequence did
// not hold" (see NATS-FACTS: 10071 stale sequence, 10164 write in flight):
// nats.go's own constants.
const (
	codeWrongLastSeq         = jetstream.JSErrCodeStreamWrongLastSequence         // 10071
	codeWrongLastSeqConstant = jetstream.JSErrCodeStreamWrongLastSequenceConstant // 10164
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

// MaxBatch is the largest multi-event append (the server's atomic batch
// limit).
const MaxBatch = 1000

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
	// default denies both: the log is the audit record (R10).
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
	// append, nothing written (a DiskGuard's Check: issue 12, item 4).
	Guard func() error
	// Faults, when set, returns a channel closed when the store fails a
	// write or JetStream is disabled (an embedded server's Faults), or
	// already closed while such a fault stands. An append waiting for its
	// acknowledgement then stops waiting (nats-server never answers a
	// publish whose write failed) and answers at once: stored when its
	// events are found in the stream, else outcome unknown (#24 row 8).
	Faults func() <-chan struct{}
}

// Validate reports every problem of the configuration at once.
func (c LogConfig) Validate() error {
	var errs []error
	if c.Prefix != "" && !validToken(c.Prefix) {
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
	return c
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
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
	want     jetstream.StreamConfig // what OpenLog made (CheckStream)
	locks    [512]sync.Mutex

	rcMu sync.Mutex
	rc   chan struct{} // closed (and replaced) when the connection reconnects

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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	js, err := newJetStream(nc, cfg)
	if err != nil {
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	l := &Log{
		nc:       nc,
		js:       js,
		cfg:      cfg,
		name:     EventStreamName(cfg.Prefix),
		subjBase: cfg.Prefix + ".events.",
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	sc := jetstream.StreamConfig{
		Name:               l.name,
		Description:        "session tool-intent events, one subject per session",
		Subjects:           []string{l.subjBase + "*"},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           cfg.Replicas,
		Duplicates:         cfg.Duplicates,
		MaxMsgSize:         int32(events.MaxEventBytes + 4096),
		Discard:            jetstream.DiscardOld,
		DenyDelete:         !cfg.AllowDeletes,
		DenyPurge:          !cfg.AllowDeletes,
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

// StreamName is the name of the event stream.
func (l *Log) StreamName() string { return l.name }

// Prefix is the subject prefix.
func (l *Log) Prefix() string { return l.cfg.Prefix }

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

// Conn is the NATS connection the log uses.
func (l *Log) Conn() *nats.Conn { return l.nc }

// Atomic reports whether multi-event appends are possible.
func (l *Log) Atomic() bool { return l.atomic }

func (l *Log) lock(session string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(session))
	return &l.locks[h.Sum32()%uint32(len(l.locks))]
}

// AppendResult says where an append landed.
type AppendResult struct {
	// First and Last are the stream sequences of the first and last event.
	First, Last uint64
	// Duplicate is true when the server had already stored these events
	// (a retried publish with the same ULIDs): nothing new was written.
	Duplicate bool
}

// Append writes events to a session, all or nothing, provided the
// session's last stored sequence is expected (0: the session has no
// events). A stale expectation returns a *ConflictError (errors.Is
// ErrConflict). Each event's ULID is its Nats-Msg-Id, so a retry of the
// same envelopes within the duplicate window stores them once and returns
// Duplicate.
//
// Appends to one session are serialized within this process.
func (l *Log) Append(ctx context.Context, session string, expected uint64, evs ...events.Envelope) (AppendResult, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return AppendResult{}, fmt.Errorf("append to %q: %w: %w", session, ErrInvalidSession, err)
	}
	if len(evs) == 0 {
		return AppendResult{}, errors.New("append: no events given")
	}
	if len(evs) > MaxBatch {
		return AppendResult{}, fmt.Errorf("append: %d events exceed the atomic batch limit %d: split the command", len(evs), MaxBatch)
	}
	if len(evs) > 1 && !l.atomic {
		return AppendResult{}, fmt.Errorf("append %d events to %q: %w (server or stream has no atomic publish; upgrade nats-server to 2.12+ or append one event at a time)", len(evs), session, ErrBatchUnsupported)
	}
	// Asked before the guard: a fault recorded after the guard passed
	// closes this channel.
	faulted := l.faults()
	if l.cfg.Guard != nil {
		if err := l.cfg.Guard(); err != nil {
			return AppendResult{}, fmt.Errorf("append to %q: %w", session, err)
		}
	}
	msgs := make([]*nats.Msg, len(evs))
	subj := l.Subject(session)
	for i, e := range evs {
		if e.Session != session {
			return AppendResult{}, fmt.Errorf("append: event %s is for session %q, not %q", e.ID, e.Session, session)
		}
		data, err := events.Encode(e)
		if err != nil {
			return AppendResult{}, fmt.Errorf("append: encode event %s: %w", e.ID, err)
		}
		m := nats.NewMsg(subj)
		m.Data = data
		m.Header.Set(headerMsgID, e.ID)
		m.Header.Set(HeaderEventType, string(e.Type))
		msgs[i] = m
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	mu := l.lock(session)
	mu.Lock()
	defer mu.Unlock()
	select {
	case <-faulted:
		// The store faulted while this append waited for the session:
		// nothing is sent yet, so a refusal is definite.
		if l.cfg.Guard != nil {
			if err := l.cfg.Guard(); err != nil {
				return AppendResult{}, fmt.Errorf("append to %q: %w", session, err)
			}
		}
		if faulted = l.faults(); isClosed(faulted) {
			return AppendResult{}, fmt.Errorf("append to %q: %w: the store failed a write or JetStream is disabled: nothing was sent; retry when the disk has space again", session, ErrStorageFull)
		}
	default:
	}
	publish := func(ctx context.Context) (AppendResult, error) {
		if len(msgs) == 1 {
			return l.appendOne(ctx, session, expected, msgs[0])
		}
		return l.appendBatch(ctx, session, expected, msgs)
	}
	res, err := l.resendOnReconnect(ctx, faulted, publish)
	if errors.Is(err, errStoreFault) {
		return l.afterFault(ctx, session, expected, evs, err)
	}
	// A replicated stream's leader acknowledges a write before it stops
	// counting it in flight (nats-server 2.15 applies the entry, acks,
	// then clears the subject's in-flight mark), so the session's next
	// CAS publish can be refused with 10164 although the session is still
	// at expected: nothing was stored and nobody else wrote. Send the
	// same messages again (their ids dedupe) a few times before calling
	// it a conflict; a real conflict moves the session past expected.
	for wait := time.Millisecond; inFlightRefusal(err, expected) && wait <= 64*time.Millisecond; wait *= 2 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			res, err = l.resendOnReconnect(ctx, faulted, publish)
			if errors.Is(err, errStoreFault) {
				return l.afterFault(ctx, session, expected, evs, err)
			}
			continue
		}
		break
	}
	if err != nil && (errors.Is(err, ErrConflict) || errors.Is(err, errDuplicateInBatch)) {
		// The server checks the expected sequence (and, for batches, the
		// ids) before its dedupe window, so a retry of an append that was
		// stored fails here: look for the ids after expected.
		var atLeast uint64 // the leader's last sequence of the session
		var ce *ConflictError
		if errors.As(err, &ce) {
			atLeast = ce.Actual
		}
		dup, ok, seen := l.findStored(ctx, session, expected, evs)
		// Direct gets may be answered by a replica that lags the leader
		// (after a partition heals, say) and miss our own events stored
		// by an earlier attempt: read again until the replies reach the
		// sequence the leader reported. Answering "conflict" for a stored
		// append would tell the caller nothing was written.
		for wait := 5 * time.Millisecond; !ok && seen < atLeast; wait = min(wait*2, 200*time.Millisecond) {
			select {
			case <-ctx.Done():
				return AppendResult{}, fmt.Errorf("append to %q: the session is at sequence %d but reads reach only %d: cannot tell whether this append was stored: %w", session, atLeast, seen, ctx.Err())
			case <-time.After(wait):
			}
			dup, ok, seen = l.findStored(ctx, session, expected, evs)
		}
		if ok {
			return dup, nil
		}
		if errors.Is(err, errDuplicateInBatch) {
			// The ids are in the dedupe window but not on this session
			// after expected: another session's events hold them.
			return AppendResult{}, fmt.Errorf("append batch to %q: %w (%w)", session, &KeyInUseError{Key: evs[0].ID, Session: session}, err)
		}
	}
	if err == nil && res.Duplicate {
		return l.checkDuplicate(ctx, session, res, evs)
	}
	return res, err
}

// checkDuplicate verifies the server's "duplicate" answer: the dedupe
// window is stream-wide (Nats-Msg-Id), so the sequences it names may hold
// another session's events with these ids. Only when the messages there
// are this session's events with these ids are they this append's;
// otherwise the append is refused (ErrKeyInUse) and nothing is returned
// for the caller to fold (#24 row 4: handing another session's sequence
// to the session's state wedged it).
func (l *Log) checkDuplicate(ctx context.Context, session string, res AppendResult, evs []events.Envelope) (AppendResult, error) {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	if res.Last-res.First+1 != uint64(len(evs)) {
		return AppendResult{}, fmt.Errorf("append to %q: %w", session, &KeyInUseError{Key: ids[0], Session: session})
	}
	ok, err := l.StoredAt(ctx, session, res.First, ids)
	if err != nil {
		return AppendResult{}, fmt.Errorf("append to %q: the server says event %s is stored at sequence %d: %w", session, ids[0], res.First, err)
	}
	if !ok {
		return AppendResult{}, fmt.Errorf("append to %q: %w", session, &KeyInUseError{Key: ids[0], Session: session})
	}
	return res, nil
}

// errStoreFault cancels an append attempt whose store failed a write or
// whose JetStream was disabled while it waited for the server's reply:
// nats-server never answers the publish whose write failed.
var errStoreFault = errors.New("the store failed a write or JetStream was disabled while the append waited for its acknowledgement")

// faultReadWait bounds the read with which an append cut short by a store
// fault looks for its events: the answer comes well within a client's
// timeout, however the store fares.
const faultReadWait = time.Second

func (l *Log) faults() <-chan struct{} {
	if l.cfg.Faults == nil {
		return nil
	}
	return l.cfg.Faults()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// afterFault answers an append whose wait for an acknowledgement a store
// fault cut short (#24 row 8). The publish was sent, so whether it was
// stored is not known from the server's side: the session is read after
// expected for the append's ids.
//
//   - Found at or below the stream's last sequence (stream info, from the
//     file store's state, which counts a message only once its write
//     succeeded): stored, as durable as any acknowledged append: success.
//   - Found above it, or the stream info unreadable: a message whose
//     write failed can still sit in the server's block cache (nats-server
//     accounts it in the block before the write, and reads may find it
//     there) but is not on disk and is gone when JetStream reloads the
//     store: not a success.
//   - Not found: the fault may be another stream's (the views bucket on
//     the same disk) and the publish still queued in the server, to be
//     stored after this read; only the answer "unknown" is true.
//
// Either of the last two answers outcome unknown (503, "read the session
// at seq N"), at once instead of after the whole try.
func (l *Log) afterFault(ctx context.Context, session string, expected uint64, evs []events.Envelope, err error) (AppendResult, error) {
	rctx, cancel := context.WithTimeout(ctx, faultReadWait)
	defer cancel()
	if res, found, _ := l.findStored(rctx, session, expected, evs); found {
		if last, lerr := l.LastStreamSeq(rctx); lerr == nil && res.Last <= last {
			res.Duplicate = false // this append's own write stored them
			return res, nil
		}
	}
	var ou *OutcomeUnknownError
	if errors.As(err, &ou) {
		err = fmt.Errorf("%w: %w", errStoreFault, ou.Err) // not "outcome unknown" twice
	}
	return AppendResult{}, &OutcomeUnknownError{Session: session, AfterSeq: expected, Err: err}
}

// errReconnected cancels an append attempt whose connection reconnected
// while it waited for the server's reply.
var errReconnected = errors.New("connection reconnected: re-sending")

// maxResends bounds the re-sends of one append after reconnects (each
// needs a reconnect, so a flapping connection cannot spin).
const maxResends = 16

// watchReconnects starts following the connection's status: each
// reconnect closes the current l.rc. It stops when the connection closes.
func (l *Log) watchReconnects() {
	l.rc = make(chan struct{})
	ch := l.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	go func() {
		defer l.nc.RemoveStatusListener(ch)
		for st := range ch {
			if st == nats.CLOSED {
				return
			}
			l.rcMu.Lock()
			close(l.rc)
			l.rc = make(chan struct{})
			l.rcMu.Unlock()
		}
	}()
}

// reconnected returns a channel closed at the connection's next reconnect.
func (l *Log) reconnected() <-chan struct{} {
	l.rcMu.Lock()
	defer l.rcMu.Unlock()
	return l.rc
}

// resendOnReconnect runs attempt and, when the connection reconnects
// before its reply came, cancels it and runs it again at once: the request
// went out on the old connection, so no reply is coming, and waiting out
// the attempt's timeout would stall the append for nothing (#20 item 3).
// The re-sent messages carry the same ids and expected sequence: if the
// first ones were stored, the server deduplicates them or reports the
// expected sequence stale, and Append finds them stored.
//
// A store fault (faulted closed) cancels the attempt too, and the error
// returned then matches errStoreFault.
func (l *Log) resendOnReconnect(ctx context.Context, faulted <-chan struct{}, attempt func(context.Context) (AppendResult, error)) (AppendResult, error) {
	for n := 0; ; n++ {
		rc := l.reconnected()
		actx, cancel := context.WithCancelCause(ctx)
		go func() {
			select {
			case <-rc:
				cancel(errReconnected)
			case <-faulted:
				cancel(errStoreFault)
			case <-actx.Done():
			}
		}()
		if n > 0 {
			// Right after a reconnect the reply may still be lost: the
			// servers learn the new connection's reply interest over
			// their routes asynchronously. Ask again soon (the resend
			// is deduplicated) rather than wait out the whole attempt.
			t := time.AfterFunc(resendWait, func() { cancel(errReconnected) })
			defer t.Stop()
		}
		res, err := attempt(actx)
		if err != nil && errors.Is(context.Cause(actx), errStoreFault) && ctx.Err() == nil {
			cancel(nil)
			return res, fmt.Errorf("%w: %w", errStoreFault, err)
		}
		resend := err != nil && errors.Is(context.Cause(actx), errReconnected) && ctx.Err() == nil && n < maxResends
		cancel(nil)
		if !resend {
			return res, err
		}
	}
}

// resendWait is how long an append re-sent after a reconnect waits for
// its reply before it is sent again.
const resendWait = time.Second

// retryRead runs an idempotent read and asks again, at once, when the
// connection reconnects before it answered or no answer came within
// readIdle (a request to a node that died is never answered), while ctx
// lasts.
func (l *Log) retryRead(ctx context.Context, read func(context.Context) error) error {
	for {
		w := newBatchWait(ctx, l.reconnected())
		err := read(w.ctx)
		again := err != nil && errors.Is(context.Cause(w.ctx), errReadAgain) && ctx.Err() == nil
		w.stop()
		if !again {
			return err
		}
	}
}

// errDuplicateInBatch is the server's answer to a batch whose ids are
// already in the dedupe window (error code 10201).
var errDuplicateInBatch = errors.New("batch contains an already stored event id")

const codeBatchDuplicateID jetstream.ErrorCode = 10201

// findStored reports whether every event of evs is stored on the session
// after seq expected, in order and contiguously, and where; seen is the
// highest sequence of the session the read reached.
func (l *Log) findStored(ctx context.Context, session string, expected uint64, evs []events.Envelope) (res AppendResult, found bool, seen uint64) {
	i := 0
	broken := false // a foreign event between two of ours: not ours as a whole
	err := l.ScanSession(ctx, session, expected+1, 0, func(r Record) error {
		seen = r.Seq
		if broken || i == len(evs) {
			return nil
		}
		if r.Err != nil || r.Envelope.ID != evs[i].ID {
			broken = i > 0
			return nil
		}
		if i == 0 {
			res.First = r.Seq
		}
		res.Last = r.Seq
		i++
		return nil
	})
	if err != nil {
		return AppendResult{}, false, seen
	}
	res.Duplicate = true
	return res, !broken && i == len(evs), seen
}

func (l *Log) appendOne(ctx context.Context, session string, expected uint64, m *nats.Msg) (AppendResult, error) {
	ack, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expected))
	if err != nil {
		return AppendResult{}, l.publishError(ctx, session, expected, err)
	}
	return AppendResult{First: ack.Sequence, Last: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// batchAck is the server's reply to the commit of an atomic batch.
type batchAck struct {
	Stream    string              `json:"stream"`
	Seq       uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	BatchID   string              `json:"batch,omitempty"`
	Count     uint64              `json:"count,omitempty"`
	Error     *jetstream.APIError `json:"error,omitempty"`
}

func (l *Log) appendBatch(ctx context.Context, session string, expected uint64, msgs []*nats.Msg) (AppendResult, error) {
	id := msgs[0].Header.Get(headerMsgID)
	n := len(msgs)
	for i, m := range msgs {
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i == 0 {
			m.Header.Set(headerExpectedSeq, strconv.FormatUint(expected, 10))
		}
		if i < n-1 {
			if err := l.nc.PublishMsg(m); err != nil {
				// Nothing is committed before the last message.
				return AppendResult{}, fmt.Errorf("append batch to %q: publish event %d of %d: %w", session, i+1, n, notSent(err))
			}
		}
	}
	last := msgs[n-1]
	last.Header.Set(headerBatchCommit, "1")
	resp, err := l.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return AppendResult{}, fmt.Errorf("append batch to %q: %w", session, jetstream.ErrNoStreamResponse)
		}
		return AppendResult{}, transportError(session, expected, fmt.Errorf("commit: %w", err))
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return AppendResult{}, fmt.Errorf("append batch to %q: decode ack %q: %w", session, resp.Data, err)
	}
	if ack.Error != nil {
		return AppendResult{}, l.publishError(ctx, session, expected, ack.Error)
	}
	return AppendResult{First: ack.Seq - uint64(n) + 1, Last: ack.Seq, Duplicate: ack.Duplicate}, nil
}

// inFlightRefusal reports a CAS refusal after which the session is still
// at the expected sequence: the leader refused the publish because a write
// to the subject was still in flight (10164), not because the session
// moved.
func inFlightRefusal(err error, expected uint64) bool {
	var ce *ConflictError
	return errors.As(err, &ce) && ce.Actual == expected && ce.InFlight
}

func (l *Log) publishError(ctx context.Context, session string, expected uint64, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == codeBatchDuplicateID {
		return fmt.Errorf("%w: %w", errDuplicateInBatch, err)
	}
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSeq || apiErr.ErrorCode == codeWrongLastSeqConstant) {
		ce := &ConflictError{Session: session, Expected: expected, InFlight: apiErr.ErrorCode == codeWrongLastSeqConstant}
		if _, after, ok := strings.Cut(apiErr.Description, "wrong last sequence: "); ok {
			if n, perr := strconv.ParseUint(strings.TrimSpace(after), 10, 64); perr == nil {
				ce.Actual = n
				return ce
			}
		}
		if n, lerr := l.LastSeq(ctx, session); lerr == nil {
			ce.Actual = n
		}
		return ce
	}
	return transportError(session, expected, err)
}

// transportError classifies an append's failure that is not the server's
// answer: a publish that never left (the connection was down: no publish
// is buffered across a reconnect) stored nothing; one that left and got
// no acknowledgement may have been stored (issue 12, item 2).
func transportError(session string, expected uint64, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		return fmt.Errorf("append to %q: %w", session, err)
	case errors.Is(err, nats.ErrReconnectBufExceeded):
		return fmt.Errorf("append to %q: %w", session, notSent(err))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return &OutcomeUnknownError{Session: session, AfterSeq: expected, Err: err}
	}
	return fmt.Errorf("append to %q: %w", session, err)
}

// notSent marks a publish refused before it left the process.
func notSent(err error) error {
	if errors.Is(err, nats.ErrReconnectBufExceeded) {
		return fmt.Errorf("%w (%w)", ErrNotSent, err)
	}
	return err
}

// LastSeq returns the stream sequence of the session's last event, 0 when
// it has none. One direct get.
func (l *Log) LastSeq(ctx context.Context, session string) (uint64, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return 0, fmt.Errorf("last sequence of %q: %w: %w", session, ErrInvalidSession, err)
	}
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	msg, err := l.stream.GetLastMsgForSubject(ctx, l.Subject(session))
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
// readiness probe's cheap question (#20 item 2). leader is "" on a
// clustered stream without a leader (appends stall); single reports a
// stream without a cluster (an embedded single server), whose leader is
// the server itself.
func (l *Log) StreamLeader(ctx context.Context) (last uint64, leader string, single bool, err error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	info, err := l.stream.Info(ctx)
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
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info %s: %w", l.name, err)
	}
	return info.State.LastSeq, nil
}
