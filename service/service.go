// Package service is the engine's use-case layer: it turns intent commands
// into validated events appended with optimistic concurrency, reads session
// views, resolves and splits tools for a turn, runs the turn lifecycle
// (freeze, tool_search discovery, safe-point checkpoints), resumes after a
// crash, and answers audit questions (history, explain).
//
// It wires the pure core (aggregate, resolver, deferral, checkpoint) to the
// log (jetstream) and the views (projection). Transports (NATS micro, HTTP,
// CLI) live in package api and cmd/engine and call only this package.
//
// An *Engine is safe for concurrent use.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	lrucache "github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// Errors callers test for. Others wrap these.
var (
	// ErrConflict: the session moved past the expected sequence and the
	// command was not safe to retry (or the caller pinned a sequence).
	ErrConflict = logport.ErrConflict
	// ErrNoTurn: a turn operation on a session with no open turn.
	ErrNoTurn = errors.New("no open turn")
	// ErrInvalid: the request itself is wrong (bad session id, bad names).
	ErrInvalid = errors.New("invalid request")
)

// Hooks observe the engine, for metrics. Every field may be nil.
type Hooks struct {
	// Appended is called after events were stored (n events; duplicate
	// when the server had them already).
	Appended func(n int, duplicate bool)
	// Conflict is called for each optimistic-concurrency conflict;
	// retried tells whether the engine retried it.
	Conflict func(retried bool)
	// Resolved is called after each resolution with its duration.
	Resolved func(d time.Duration)
	// PrefixChanged is called when a session's provider tools array
	// breaks the prompt-cache prefix of its previous dispatch (a byte of
	// the previous array changed), with the cause: "intent", "registry",
	// "discovery" or "turn" (a turn boundary that changed the loaded set
	// without a discovery, such as a resume that dropped tools; a turn
	// with the same intent and registry keeps every byte).
	PrefixChanged func(cause string)
	// PrefixExtended is called when the array only appends tools after the
	// previous one (a discovery in the engine-catalog renderings): the
	// cached prefix holds. Same causes.
	PrefixExtended func(cause string)
	// CatalogChanged is called when the catalog text of the system prompt
	// differs from the previous dispatch's. Same causes.
	CatalogChanged func(cause string)
	// SearchEmbedded is called for each tool_search query with an
	// embedder set (SetEmbedder): EmbedFused, or the reason it ranked by
	// keywords (EmbedNotReady, EmbedTimeout, EmbedUnavailable, EmbedError,
	// EmbedDimension).
	SearchEmbedded func(outcome string)
}

// Config configures an Engine. The zero value is usable.
type Config struct {
	// Limits bound intent lists. Zero fields take aggregate's
	// defaults.
	Limits aggregate.Limits
	// MaxRetries bounds conflict retries of retry-safe commands and
	// re-sends after transport errors. Default 8.
	MaxRetries int
	// CacheSize bounds each per-session cache in memory: the last written
	// states, the open turns rebuilt from the log and the last dispatches.
	// Default 100,000.
	CacheSize int
	// Logger receives structured logs; the zero value logs nothing.
	Logger zerolog.Logger
	// Hooks observe the engine.
	Hooks Hooks
	// EraseTakeover is how old the last audit record of an erase another
	// process began must be before FinishErases finishes it (a crash
	// interrupted it; one in flight writes its next record well within
	// it). Default 30 s.
	EraseTakeover time.Duration
}

// Engine serves sessions.
type Engine struct {
	log   Log
	pager SessionScanner                      // history pages' scans (Ports.Pages, else log)
	keys  func(context.Context) (Keys, error) // nil: no keyed writes
	proj  Views
	reg   atomic.Pointer[resolver.Registry]
	cfg   Config
	clock func() time.Time

	states *lrucache.Cache[string, aggregate.State] // last state this process wrote or read strongly

	ts     turnState   // bounded caches of open turns, dispatches, registries (frozen.go)
	native nativeCache // native renderings across turns (nativecache.go)
	marks  *marks      // per session: the highest sequence acknowledged or served

	eraser atomic.Pointer[Eraser] // purges erased sessions; nil: none
	erases *eraseScan             // the unfinished erases FinishErases knows, and this process's

	sealer atomic.Pointer[ActorSealer] // seals stored actors (actors.go); nil: plain

	embedder atomic.Pointer[embedderBox] // tool_search's engine-side embeddings (embedsearch.go); nil: none

	writes writeLocks   // serialize apply's decide-and-append per session
	pages  historyPages // where recent history pages ended (history.go)
	reads  readSlots    // history pages folding at once

	lastAppend atomic.Int64 // Unix nanoseconds of the last append's start
}

// appending reports whether the engine began an append within the last
// second (readSlots leaves writers the processors then).
func (e *Engine) appending() bool {
	return time.Since(time.Unix(0, e.lastAppend.Load())) < time.Second
}

// New returns an engine over a JetStream log, its projection and a
// registry: NewFromPorts with JetStreamPorts(log, proj).
func New(log *jetstream.Log, proj *projection.Projection, reg *resolver.Registry, cfg Config) *Engine {
	return NewFromPorts(JetStreamPorts(log, proj), reg, cfg)
}

// NewFromPorts returns an engine over its stores (Ports.Log and
// Ports.Views are required) and a registry.
func NewFromPorts(p Ports, reg *resolver.Registry, cfg Config) *Engine {
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 8
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 100_000
	}
	if cfg.EraseTakeover <= 0 {
		cfg.EraseTakeover = DefaultEraseTakeover
	}
	e := &Engine{
		log: p.Log, pager: p.Pages, keys: p.Keys, proj: p.Views, cfg: cfg, clock: time.Now, erases: newEraseScan(),
		states: lrucache.New[string, aggregate.State](cfg.CacheSize),
		ts:     newTurnState(cfg.CacheSize),
		marks:  newMarks(cfg.CacheSize),
	}
	e.reads.writing = e.appending
	if e.pager == nil {
		e.pager = p.Log
	}
	e.reg.Store(reg)
	e.keepRegistry(reg)
	go deferral.IndexFor(reg) // warm tool_search's index off the first turn's path
	return e
}

// Registry is the live registry.
func (e *Engine) Registry() *resolver.Registry { return e.reg.Load() }

// SetRegistry swaps the live registry. Open turns keep their frozen tools;
// the next turn and every resolution outside a turn use reg.
func (e *Engine) SetRegistry(reg *resolver.Registry) {
	old := e.reg.Swap(reg)
	e.keepRegistry(reg)       // open turns of either version rebuild without the history
	go deferral.IndexFor(reg) // built from the previous index: changed tools only
	e.prepareEmbeddings(reg)  // the changed tools' vectors, in the background
	if old.Version() != reg.Version() {
		e.cfg.Logger.Info().Str("from", old.Version()).Str("to", reg.Version()).Msg("registry changed")
	}
}

// Log is the JetStream event log of an engine made by New; nil for an
// engine over another Log. Prefer keeping the log the engine was given.
func (e *Engine) Log() *jetstream.Log {
	l, _ := e.log.(*jetstream.Log)
	return l
}

// Projection is the views projection of an engine made by New; nil for an
// engine over other Views. Prefer keeping the projection the engine was
// given.
func (e *Engine) Projection() *projection.Projection {
	p, _ := e.proj.(*projection.Projection)
	return p
}

// Sessions lists the sessions that have a view, sorted (for transports:
// instead of reaching through Projection()).
func (e *Engine) Sessions(ctx context.Context) ([]string, error) { return e.proj.Sessions(ctx) }

// Origin is who wrote an event: the channel (web UI, a chat channel, TUI)
// and the actor (a user id). The transports take them from what they can
// verify (the API subject or the connection's credentials). The channel is
// required; an empty actor is recorded as Anonymous.
type Origin struct {
	Channel string `json:"channel"`
	Actor   string `json:"actor"`
}

// CommandResult is the outcome of Apply.
type CommandResult struct {
	// First and Last are the stream sequences of the stored events; 0
	// when the commands were no-ops.
	First, Last uint64
	// Duplicate is true when the events were already stored.
	Duplicate bool
	// Retries counts conflicts the engine retried.
	Retries int
	// EventIDs are the ids (ULIDs) of the stored events, in order; empty
	// when the commands were no-ops.
	EventIDs []string
	// State is the session after the commands.
	State aggregate.State
}

// retrySafe reports whether every command may be re-decided against a
// newer state after a conflict without asking the caller (the payload
// table's retry safety, events.RetrySafe): blind writes of one intent
// field and set additions. Turn boundaries, checkpoints and curated lists
// depend on what the caller saw and are returned as conflicts.
func retrySafe(cmds []events.Payload) bool {
	for _, c := range cmds {
		if !events.RetrySafe(c) {
			return false
		}
	}
	return true
}

// Apply validates commands against the session's current state and the
// live registry and appends the resulting events atomically. With expected
// set, the session must be at that sequence (else a conflict is returned);
// without it, retry-safe commands are re-decided and retried on conflict.
func (e *Engine) Apply(ctx context.Context, session string, origin Origin, expected *uint64, cmds ...events.Payload) (CommandResult, error) {
	if err := checkWrite(session, cmds); err != nil {
		return CommandResult{}, err
	}
	return e.apply(ctx, session, origin, expected, nil, cmds)
}

// checkWrite is the one check of a write's session id and command count,
// made where a write enters the engine (Apply, ApplyKeyed); the log checks
// the id again where it builds the subject.
func checkWrite(session string, cmds []events.Payload) error {
	if err := events.ValidateSessionID(session); err != nil {
		return fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	if len(cmds) == 0 {
		return fmt.Errorf("%w: no commands given", ErrInvalid)
	}
	return nil
}

// beginWrite seals origin's actor (the log stores it sealed) and waits
// for this engine's other writes of the session; what names the write in
// the error ("append to", "compact").
func (e *Engine) beginWrite(ctx context.Context, session string, origin *Origin, what string) (unlock func(), err error) {
	sealed, err := e.sealActor(ctx, origin.Actor)
	if err != nil {
		return nil, err
	}
	origin.Actor = sealed
	unlock, err = e.writes.lock(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("%s %q: wait for the session's other writes: %w", what, session, err)
	}
	return unlock, nil
}

// apply is Apply after checkWrite; ids, when set, names the i-th event
// decided (a client's idempotency key, see ApplyKeyed).
func (e *Engine) apply(ctx context.Context, session string, origin Origin, expected *uint64, ids func(i int) string, cmds []events.Payload) (CommandResult, error) {
	var res CommandResult
	unlock, err := e.beginWrite(ctx, session, &origin, "append to")
	if err != nil {
		return res, err
	}
	defer unlock()
	strong := false
	var atLeast uint64 // the sequence a conflict said the session is at
	for attempt := 0; ; attempt++ {
		st, err := e.current(ctx, session, strong, atLeast)
		if err != nil {
			return res, err
		}
		if expected != nil && *expected != st.LastSeq {
			if !strong {
				strong = true // the cache may be stale: check the log
				attempt--
				continue
			}
			e.onConflict(false)
			return res, &logport.ConflictError{Session: session, Expected: *expected, Actual: st.LastSeq}
		}
		envs, next, err := e.decide(st, origin, cmds)
		if err != nil {
			return res, err
		}
		if len(envs) == 0 {
			if expected != nil && !strong {
				// Nothing to write, so no CAS will check the expectation:
				// check it against the log, not a cached state that may
				// be behind it (a stale expectation must be a conflict).
				strong = true
				attempt--
				continue
			}
			if !strong {
				// A no-op decided on this engine's cached state: the
				// session may have been deleted through another engine,
				// which the view says.
				if v, err := e.proj.Read(ctx, session, projection.ReadOptions{}); err == nil {
					if err := alive(session, v); err != nil {
						e.forget(session)
						return res, err
					}
				}
			}
			e.marks.raise(session, st.LastSeq)
			res.State = st
			return res, nil
		}
		if ids != nil {
			for i := range envs {
				envs[i].ID = ids(i)
			}
		}
		ar, err := e.appendResend(ctx, session, st.LastSeq, envs)
		if errors.Is(err, logport.ErrConflict) {
			e.forget(session)
			var ce *logport.ConflictError
			if errors.As(err, &ce) {
				atLeast = ce.Actual
			}
			retry := expected == nil && retrySafe(cmds) && attempt < e.cfg.MaxRetries
			e.onConflict(retry)
			if retry {
				res.Retries++
				strong = true
				continue
			}
			return res, err
		}
		if err != nil {
			e.forget(session)
			return res, err
		}
		e.onAppended(len(envs), ar.Duplicate)
		// Fold what was stored at the sequences it got.
		next = st.Clone()
		for i, env := range envs {
			next.Apply(ar.First+uint64(i), env)
		}
		e.remember(next)
		// The projection folds them now; its feed skips them.
		e.handoff(session, st.LastSeq, ar, envs)
		e.marks.raise(session, ar.Last) // acknowledged: reads through this engine include it
		res.First, res.Last, res.Duplicate, res.State = ar.First, ar.Last, ar.Duplicate, next
		for _, env := range envs {
			res.EventIDs = append(res.EventIDs, env.ID)
		}
		return res, nil
	}
}

// Anonymous is the actor the engine records on events whose writer gave
// none: a version-2 event always names its actor.
const Anonymous = "anonymous"

// decide runs each command through aggregate.Decide against the state as
// the earlier commands of the same call leave it.
func (e *Engine) decide(st aggregate.State, origin Origin, cmds []events.Payload) ([]events.Envelope, aggregate.State, error) {
	if origin.Channel == "" {
		return nil, st, fmt.Errorf("%w: no channel: every event records the channel that wrote it, set Origin.Channel", ErrInvalid)
	}
	if origin.Actor == "" {
		origin.Actor = Anonymous
	}
	reg := e.Registry()
	sim := st.Clone()
	var envs []events.Envelope
	for _, c := range cmds {
		out, err := aggregate.Decide(sim, reg, c, e.cfg.Limits)
		if err != nil {
			return nil, st, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		for _, p := range out {
			env := events.New(st.Session, origin.Channel, origin.Actor, p)
			if st.Session == "" {
				env.Session = sim.Session
			}
			sim.Apply(sim.LastSeq+1, env)
			envs = append(envs, env)
		}
	}
	return envs, sim, nil
}

// appendResend appends, re-sending the same envelopes (same ULIDs, so the
// log stores them once) after transport errors such as a leader failover,
// until the context ends or MaxRetries is spent. Only errors worth asking
// again are re-sent: jetstream.Transient's, and an outcome the log could
// not learn (the same ids make the re-send safe); a conflict, a bad
// session, a full disk or a refused key is the log's answer.
func (e *Engine) appendResend(ctx context.Context, session string, expected uint64, envs []events.Envelope) (logport.AppendResult, error) {
	backoff := logport.Backoff{First: 50 * time.Millisecond, Max: time.Second}
	// A try whose outcome is unknown stays unknown until a later try
	// learns it (stored, or a conflict: the session moved on without
	// these events).
	var unknown *logport.OutcomeUnknownError
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		e.lastAppend.Store(time.Now().UnixNano())
		ar, err := e.log.Append(actx, session, expected, envs...)
		cancel()
		if unknown == nil {
			errors.As(err, &unknown)
		}
		if err == nil || !resendable(err) {
			return ar, stillUnknownUnlessStored(unknown, err)
		}
		if ctx.Err() != nil || try >= e.cfg.MaxRetries*4 {
			return ar, stillUnknown(unknown, err)
		}
		e.cfg.Logger.Warn().Str("session", session).Err(err).Int("try", try+1).Msg("append failed: re-sending the same events")
		if serr := logport.Sleep(ctx, backoff.Next()); serr != nil {
			return ar, stillUnknown(unknown, fmt.Errorf("append to %q: %w (last error: %w)", session, serr, err))
		}
	}
}

// resendable reports whether an append's error is worth re-sending the
// same events for: a transient one or an unknown outcome, never a
// conflict (the log's answer, which settles an unknown outcome).
func resendable(err error) bool {
	return (jetstream.Transient(err) || errors.Is(err, logport.ErrOutcomeUnknown)) && !errors.Is(err, logport.ErrConflict)
}

// stillUnknown returns err, as an outcome-unknown error when an earlier
// try's outcome was never learnt.
func stillUnknown(unknown *logport.OutcomeUnknownError, err error) error {
	if unknown == nil || errors.Is(err, logport.ErrOutcomeUnknown) {
		return err
	}
	return &logport.OutcomeUnknownError{Session: unknown.Session, AfterSeq: unknown.AfterSeq, Err: err}
}

// stillUnknownUnlessStored is stillUnknown for a definite answer: a
// conflict or success settles an earlier unknown try (the log looks for
// the events' ids on a conflict); a disk-full refusal does not.
func stillUnknownUnlessStored(unknown *logport.OutcomeUnknownError, err error) error {
	if errors.Is(err, logport.ErrStorageFull) {
		return stillUnknown(unknown, err)
	}
	return err
}

func (e *Engine) onAppended(n int, dup bool) {
	if f := e.cfg.Hooks.Appended; f != nil {
		f(n, dup)
	}
}

func (e *Engine) onConflict(retried bool) {
	if f := e.cfg.Hooks.Conflict; f != nil {
		f(retried)
	}
}

// current returns the session state used to decide a command: the state
// this process last wrote, or the view plus the log's tail (strong), which
// includes at least sequence atLeast (a sequence the stream leader reported:
// a replica answering direct gets may lag behind it) and the session's mark.
func (e *Engine) current(ctx context.Context, session string, strong bool, atLeast uint64) (aggregate.State, error) {
	if !strong {
		st, ok := e.states.Get(session)
		if ok && st.LastSeq >= e.floor(session, atLeast) {
			return st, nil
		}
	}
	st, err := e.proj.Read(ctx, session, projection.ReadOptions{Latest: true, MinSeq: e.floor(session, atLeast)})
	if err != nil {
		return st, err
	}
	st.Session = session
	if err := alive(session, st); err != nil {
		return st, err
	}
	if err := e.erasedID(ctx, session, st); err != nil {
		return st, err
	}
	e.remember(st)
	e.marks.raise(session, st.LastSeq)
	return st, nil
}

func (e *Engine) remember(st aggregate.State) { e.states.Put(st.Session, st) }

func (e *Engine) forget(session string) { e.states.Remove(session) }

// Session returns a session's view (one KV get, or the projection's
// memory). The view includes every event up to minSeq (read-your-writes
// across engines), every event this engine acknowledged for the session,
// and is never older than a view this engine already served for it
// (read-your-writes and monotonic reads within one engine). When the
// stored view is behind that floor the log's tail is folded onto it; when
// the log cannot be read up to it within a bound, the error wraps
// projection.ErrNotCaughtUp. A deleted session is ErrDeleted.
func (e *Engine) Session(ctx context.Context, session string, minSeq uint64) (aggregate.State, error) {
	return e.read(ctx, session, projection.ReadOptions{MinSeq: minSeq})
}

// read reads session's view as opts ask, at least at minSeq and the
// session's mark, refusing a deleted or erased session, and raises the
// mark to what it read.
func (e *Engine) read(ctx context.Context, session string, opts projection.ReadOptions) (aggregate.State, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.State{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	opts.MinSeq = e.floor(session, opts.MinSeq)
	st, err := e.proj.Read(ctx, session, opts)
	if err != nil {
		return st, err
	}
	st.Session = session
	if err := alive(session, st); err != nil {
		return aggregate.State{}, err
	}
	if err := e.erasedID(ctx, session, st); err != nil {
		return aggregate.State{}, err
	}
	e.marks.raise(session, st.LastSeq)
	return st, nil
}
