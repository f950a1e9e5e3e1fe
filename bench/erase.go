package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// Lines of the erase-memory step.
const (
	nameEraseReturned = "erase: event stream stored bytes returned, %s sessions erased"
	nameEraseBefore   = "erase: process memory per session before erase, %s sessions"
	nameEraseAfter    = "erase: process memory per session after erase, %s sessions"
	nameEraseRate     = "erase: Engine.Erase, %d concurrent, %s sessions"
	nameEraseAudit    = "erase: audit stream per erased session, %s sessions"
)

// eraseLineNames names the lines of the erase-memory step for cfg.
func eraseLineNames(cfg Config) []string {
	label := sessionsLabel(cfg.EraseSessions)
	return []string{
		fmt.Sprintf(nameEraseReturned, label),
		fmt.Sprintf(nameEraseBefore, label),
		fmt.Sprintf(nameEraseAfter, label),
		fmt.Sprintf(nameEraseRate, cfg.EraseConcurrency, label),
		fmt.Sprintf(nameEraseAudit, label),
	}
}

const (
	// erasePrefix is the erase-memory step's own stream prefix.
	erasePrefix = "ers"
	// eraseEvents is the events of each session (ToolsToggled,
	// WebSearchSet, ToolDisabled).
	eraseEvents = 3
	// eraseDedupe is the dedupe window of the step's event stream (the
	// engine's default is 2 min): every publish's Nats-Msg-Id is held for
	// the window, and the step waits it out before each reading so that
	// neither reading includes them.
	eraseDedupe = time.Second
	// eraseSettleMin is the least wait before each reading: twice the
	// dedupe window (the server expires them on a timer of the window)
	// and a second.
	eraseSettleMin = 2*eraseDedupe + time.Second
	// eraseSample is how many erased sessions the raw JetStream check
	// reads back (spread evenly over them).
	eraseSample = 1000
)

// eraseFigures are the readings of one erase-memory run.
type eraseFigures struct {
	n int
	// Go heap after GC and scavenge at each point (see eraseMemory).
	h0, h1, h2, h3, h4, h5, h6, h7, h8 uint64
	// h9 and h10: a fresh, empty event stream of the same configuration
	// made and deleted after h8: its fixed state (buffers every stream
	// holds whatever it stores), which h6-h7 includes and h1-h0 does not.
	h9, h10 uint64
	// Event stream state before and after the erase.
	subjBefore, subjAfter   uint64
	bytesBefore, bytesAfter uint64
	msgsBefore, msgsAfter   uint64
	// Audit stream state after the erase.
	auditMsgs, auditBytes, auditSubjects uint64
	cachedBefore, cachedAfter            int
	erase                                time.Duration
	sampled                              int
	rssBefore, rssAfter                  int64
}

func perSession(a, b uint64, n int) float64 { return (float64(a) - float64(b)) / float64(n) }

// eraseMemory: N sessions of eraseEvents events each are created on
// a fresh event stream (the engine's configuration, but a 1 s dedupe
// window) by raw pipelined publishes of the documented wire format
// (docs/wire-format.md: msgpack envelope, Nats-Msg-Id = event id), folded
// by a projection, then erased, all of them, through service.Engine.Erase
// with an eraser on its own connection (the code DELETE ?erase=true runs:
// SessionDeleted, wait for the views to fold it, audit record, per-subject
// purge), EraseConcurrency at a time. Heap readings (Go heap after two GCs
// and a scavenge, server and engine share the process; each after
// max(MemorySettle, 3 s)):
//
//	h0 baseline: the three streams (events, audit, views) made, one warm
//	   session created, folded and erased; no projection or engine
//	h1 the N sessions stored (no projection)
//	h2 a projection folded them (running, its cache holding them)
//	h3 projection dropped (the views bucket stays)
//	h4 a fresh projection, engine and eraser erased all N (running)
//	h5 projection, engine and eraser dropped
//	h6 audit stream deleted; h7 event stream deleted; h8 views deleted
//
// Event stream per session: before = h1-h0, after = h6-h7 (by deleting
// it, as memory.go measures the views) less h9-h10, the fixed state of a
// fresh empty stream of the same configuration (h0 holds one too; at 2k
// sessions it is about as large as the sessions' own state). Process per session: before =
// h2-h0, after = h4-h0.
func (h *harness) eraseMemory(ctx context.Context) error {
	r, err := h.newEraseRun(ctx)
	if err != nil {
		return err
	}
	defer r.adminNC.Close()
	for _, step := range []func(context.Context) error{
		r.warmUp,        // h0
		r.storeAndFold,  // h1, h2, h3
		r.eraseSessions, // h4, h5 and the streams' state after
		r.attribute,     // h6 to h10
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	h.addEraseLines(r.f, r.c, sessionsLabel(r.f.n), r.settle, r.pub)
	return nil
}

// eraseRun is the state one erase-memory run shares between its steps:
// the step's log and event stream, the eraser's own connection, the wait
// before each reading, the sessions, and the figures read so far.
type eraseRun struct {
	h       *harness
	lcfg    jetstream.LogConfig
	log     *jetstream.Log
	adminNC *nats.Conn
	stream  njs.Stream
	c       int           // erases at a time
	settle  time.Duration // wait before each reading
	f       eraseFigures

	sessions  []string      // the N sessions
	sample    []string      // those the raw JetStream check reads back
	pub       time.Duration // the time to publish the sessions' events
	folded    uint64        // the last sequence before the erase
	auditName string        // the eraser's audit stream
}

// newEraseRun opens the step's log, the eraser's connection (the caller
// closes it) and the event stream.
func (h *harness) newEraseRun(ctx context.Context) (*eraseRun, error) {
	r := &eraseRun{
		h:      h,
		lcfg:   jetstream.LogConfig{Prefix: erasePrefix, Duplicates: eraseDedupe},
		c:      h.cfg.EraseConcurrency,
		settle: max(h.cfg.MemorySettle, eraseSettleMin),
		f:      eraseFigures{n: h.cfg.EraseSessions},
	}
	var err error
	if r.log, err = jetstream.OpenLog(ctx, h.engNC, r.lcfg); err != nil {
		return nil, err
	}
	if r.adminNC, err = jetstream.Connect(ctx, jetstream.ConnConfig{URL: h.url, Name: "bench-eraser"}); err != nil {
		return nil, err
	}
	if r.stream, err = h.rjs.Stream(ctx, r.log.StreamName()); err != nil {
		r.adminNC.Close()
		return nil, fmt.Errorf("erase: look up %s: %w", r.log.StreamName(), err)
	}
	return r, nil
}

// eraseEngine is a projection, an engine over it and an eraser, running.
type eraseEngine struct {
	p   *projection.Projection
	eng *service.Engine
	x   *jetstream.Eraser
}

// withEngine starts a projection (resuming from the views' watermark and
// folding up to seq), an engine over it and an eraser on the admin
// connection, runs fn with them and stops them, whatever fn returns.
func (r *eraseRun) withEngine(ctx context.Context, seq uint64, fn func(*eraseEngine) error) error {
	p, err := projection.Open(ctx, r.log, projection.Config{})
	if err != nil {
		return err
	}
	stop, err := runProjection(ctx, p, seq, 20*time.Minute)
	if err != nil {
		return err
	}
	defer stop()
	x, err := r.log.NewEraser(ctx, r.adminNC)
	if err != nil {
		return err
	}
	eng := service.New(r.log, p, resolver.Default(), service.Config{})
	eng.SetEraser(x)
	return fn(&eraseEngine{p: p, eng: eng, x: x})
}

// eraseAll erases sessions through eng, r.c at a time; the first error
// stops the others.
func (r *eraseRun) eraseAll(ctx context.Context, eng *service.Engine, sessions []string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, r.c)
	for g := range r.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(sessions) || ctx.Err() != nil {
					return
				}
				res, err := eng.Erase(ctx, sessions[i], origin, "")
				if err == nil && res.Purged == 0 {
					err = fmt.Errorf("erase %s: nothing purged", sessions[i])
				}
				if err != nil {
					errs[g] = err
					next.Store(int64(len(sessions))) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// foldAll waits until e's projection has folded the event stream's last
// event.
func (r *eraseRun) foldAll(ctx context.Context, e *eraseEngine) error {
	seq, err := r.log.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	return e.p.WaitApplied(ctx, seq)
}

// reading is the heap after the settle wait.
func (r *eraseRun) reading(ctx context.Context) (uint64, error) {
	if err := logport.Sleep(ctx, r.settle); err != nil {
		return 0, err
	}
	return heapScavenged(), nil
}

// warmUp creates, folds and erases one session, so that the fixed
// buffers of the three streams and of an erase are in the baseline, then
// reads the baseline (h0).
func (r *eraseRun) warmUp(ctx context.Context) error {
	warm := []string{"e-warm"}
	if err := generate(ctx, r.h.rjs, erasePrefix, warm, eraseEvents); err != nil {
		return err
	}
	seq, err := r.log.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	if err := r.withEngine(ctx, seq, func(e *eraseEngine) error {
		if err := r.eraseAll(ctx, e.eng, warm); err != nil {
			return err
		}
		return r.foldAll(ctx, e)
	}); err != nil {
		return err
	}
	if r.f.h0, err = r.reading(ctx); err != nil {
		return err
	}
	r.f.rssBefore = r.h.rss()
	return nil
}

// storeAndFold stores the N sessions (h1, the stream's state before, the
// raw check that each sampled session is there), then folds them with a
// projection (h2) and drops it (h3).
func (r *eraseRun) storeAndFold(ctx context.Context) error {
	r.sessions = sessionNames("e-", r.f.n)
	start := time.Now()
	if err := generate(ctx, r.h.rjs, erasePrefix, r.sessions, eraseEvents); err != nil {
		return err
	}
	r.pub = time.Since(start)
	var err error
	if r.f.h1, err = r.reading(ctx); err != nil {
		return err
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("erase: stream info before: %w", err)
	}
	r.f.subjBefore, r.f.bytesBefore, r.f.msgsBefore = uint64(info.State.NumSubjects), info.State.Bytes, info.State.Msgs
	r.sample = sampleOf(r.sessions, eraseSample)
	r.f.sampled = len(r.sample)
	if err := r.h.rawLastBySubject(ctx, r.log.StreamName(), r.sample, true); err != nil {
		return err
	}
	if r.folded, err = r.log.LastStreamSeq(ctx); err != nil {
		return err
	}
	if err := r.withEngine(ctx, r.folded, func(e *eraseEngine) error {
		var err error
		if r.f.h2, err = r.reading(ctx); err != nil {
			return err
		}
		r.f.cachedBefore = e.p.Cached()
		return nil
	}); err != nil {
		return err
	}
	r.f.h3, err = r.reading(ctx)
	return err
}

// eraseSessions erases all N through a fresh engine and reads the heap
// with it running (h4) and dropped (h5), then the event and audit
// streams' state, checking that each erased session keeps its tombstone
// only.
func (r *eraseRun) eraseSessions(ctx context.Context) error {
	if err := r.withEngine(ctx, r.folded, func(e *eraseEngine) error {
		start := time.Now()
		err := r.eraseAll(ctx, e.eng, r.sessions)
		r.f.erase = time.Since(start)
		if err == nil {
			err = r.foldAll(ctx, e)
		}
		if err != nil {
			return err
		}
		if r.f.h4, err = r.reading(ctx); err != nil {
			return err
		}
		r.f.rssAfter = r.h.rss()
		r.f.cachedAfter = e.p.Cached()
		r.auditName = e.x.AuditStream()
		return nil
	}); err != nil {
		return err
	}
	var err error
	if r.f.h5, err = r.reading(ctx); err != nil {
		return err
	}
	return r.streamsAfter(ctx)
}

// streamsAfter reads the event and audit streams' state after the erase.
func (r *eraseRun) streamsAfter(ctx context.Context) error {
	f := &r.f
	info, err := r.stream.Info(ctx, njs.WithSubjectFilter(erasePrefix+".events.>"))
	if err != nil {
		return fmt.Errorf("erase: stream info after: %w", err)
	}
	f.subjAfter, f.bytesAfter, f.msgsAfter = uint64(info.State.NumSubjects), info.State.Bytes, info.State.Msgs
	// Each erased id keeps its SessionDeleted as its tombstone: one
	// message on each subject, nothing else.
	if f.msgsAfter != uint64(len(info.State.Subjects)) || f.msgsAfter < uint64(f.n) {
		return fmt.Errorf("erase: after erasing every session the event stream holds %d messages on %d subjects, want one tombstone on each of at least %d", f.msgsAfter, len(info.State.Subjects), f.n)
	}
	if err := r.h.rawLastBySubject(ctx, r.log.StreamName(), r.sample, false); err != nil {
		return err
	}
	audit, err := r.h.rjs.Stream(ctx, r.auditName)
	if err != nil {
		return fmt.Errorf("erase: audit stream: %w", err)
	}
	ainfo, err := audit.Info(ctx)
	if err != nil {
		return fmt.Errorf("erase: audit stream info: %w", err)
	}
	f.auditMsgs, f.auditBytes, f.auditSubjects = ainfo.State.Msgs, ainfo.State.Bytes, uint64(ainfo.State.NumSubjects)
	return nil
}

// attribute deletes the audit stream (h6), the event stream (h7) and the
// views bucket (h8), then makes (h9) and deletes (h10) a fresh empty event
// stream, reading the heap after each. The audit stream goes first: its
// dedupe entries (2 min window) expire meanwhile, which must not fall in
// the event stream's delta.
func (r *eraseRun) attribute(ctx context.Context) error {
	rjs := r.h.rjs
	deleteStream := func(name string) func() error {
		return func() error { return rjs.DeleteStream(ctx, name) }
	}
	for _, s := range []struct {
		what string
		do   func() error
		into *uint64
	}{
		{"delete the audit stream", deleteStream(r.auditName), &r.f.h6},
		{"delete the event stream", deleteStream(r.log.StreamName()), &r.f.h7},
		{"delete the views bucket", func() error { return rjs.DeleteKeyValue(ctx, strings.ToUpper(erasePrefix)+"_VIEWS") }, &r.f.h8},
		{"a fresh empty event stream", func() error { _, err := jetstream.OpenLog(ctx, r.h.rawNC, r.lcfg); return err }, &r.f.h9},
		{"delete the fresh event stream", deleteStream(r.log.StreamName()), &r.f.h10},
	} {
		if err := s.do(); err != nil {
			return fmt.Errorf("erase: %s: %w", s.what, err)
		}
		var err error
		if *s.into, err = r.reading(ctx); err != nil {
			return err
		}
	}
	return nil
}

// addEraseLines turns one run's readings into the step's lines.
func (h *harness) addEraseLines(f eraseFigures, c int, label string, settle, pub time.Duration) {
	n := f.n
	fixed := perSession(f.h9, f.h10, n) // an empty stream's own state, per session
	streamBefore, streamAfter := perSession(f.h1, f.h0, n), perSession(f.h6, f.h7, n)-fixed
	heapReturned := 1 - streamAfter/streamBefore
	returned := 1 - float64(f.bytesAfter)/float64(f.bytesBefore)
	viewsBefore, projBefore := perSession(f.h3, f.h1, n), perSession(f.h2, f.h3, n)
	procBefore, procAfter := perSession(f.h2, f.h0, n), perSession(f.h4, f.h0, n)
	engAfter, auditHeap, viewsAfter := perSession(f.h4, f.h5, n), perSession(f.h5, f.h6, n), perSession(f.h7, f.h8, n)
	rate := float64(n) / f.erase.Seconds()
	auditPer := float64(f.auditBytes) / float64(n)
	names := eraseLineNames(h.cfg)
	one := func(name, unit string, v float64, note string) Line {
		return Line{Name: name, Unit: unit, Engine: v, Runs: 1, EngineRuns: []float64{v}, Note: note}
	}
	h.add(one(names[0], "fraction", returned, fmt.Sprintf(
		"1 - after/before of the event stream's stored bytes (%d B before, %d B after: an erased id keeps its SessionDeleted and its subject as its tombstone, so a session of %d events keeps one). "+
			"Its server memory per session returned: %.2f (1 - after/before of the Go heap after 2 GCs and a scavenge, read %s after the last write; server and engine share the process; the purged records leave the blocks and the server's delete maps at its sync interval, 2 min, so read sooner this figure can be negative): "+
			"before = %.0f B/session = heap with the %d sessions stored (%d events each, raw publishes of the wire format, no projection) - heap of the baseline (streams made, a warm session erased), its per-block subject state (2 min expiry) still in, as in the memory step's server line; "+
			"after = %.0f B/session = heap after erasing all of them through Engine.Erase (erasing engine dropped, audit stream deleted) - heap once the event stream is deleted too, less the fixed state of a fresh empty stream of the same configuration (%.0f B/session, made and deleted at the end: the baseline holds one too, so before excludes it); "+
			"stream state before: %d subjects, %d msgs, %d B; after: %d subjects, %d msgs, %d B; a raw direct get last-by-subject of %d erased sessions found their SessionDeleted only (an erased id keeps it as its tombstone); the step's event stream has a %s dedupe window (engine default 2 min) so that no reading holds Nats-Msg-Ids",
		f.bytesBefore, f.bytesAfter, eraseEvents, heapReturned, settle, streamBefore, n, eraseEvents, streamAfter, fixed, f.subjBefore, f.msgsBefore, f.bytesBefore, f.subjAfter, f.msgsAfter, f.bytesAfter, f.sampled, eraseDedupe)))
	h.add(one(names[1], "B/session", procBefore, fmt.Sprintf(
		"whole process (Go heap) per session with the %d sessions stored and folded, the projection running - the baseline: event stream %.0f B, views bucket %.0f B (one view each), running projection %.0f B (%d sessions cached); %d events published in %.1f s; process RSS at the baseline %.0f MB",
		n, streamBefore, viewsBefore, projBefore, f.cachedBefore, n*eraseEvents, pub.Seconds(), float64(f.rssBefore)/1e6)))
	h.add(one(names[2], "B/session", procAfter, fmt.Sprintf(
		"whole process (Go heap) per session after erasing all %d, the erasing projection, engine and eraser still running - the baseline: event stream %.0f B (by deleting it), audit stream %.0f B (by deleting it: one record and subject per session), views bucket %.0f B (by deleting it: the deleted view and its deleted.<session> marker per session), projection + engine + eraser %.0f B (by dropping them: %d sessions still cached by the projection, the eraser's set of erased ids); process RSS %+.0f MB since the baseline (the runtime keeps freed pages mapped until it scavenges)",
		n, streamAfter, auditHeap, viewsAfter, engAfter, f.cachedAfter, float64(f.rssAfter-f.rssBefore)/1e6)))
	h.add(one(names[3], "sessions/s", rate, fmt.Sprintf(
		"%d sessions erased in %.1f s by service.Engine.Erase (what DELETE /v1/sessions/{session}?erase=true runs; no idempotency-key store, as the bench's engine has none), %d at a time: read, SessionDeleted appended, wait for the views to fold it (50 ms polls of the projection's watermark), audit record, per-subject purge through an eraser on its own connection; the projection folds behind in the same process",
		n, f.erase.Seconds(), c)))
	h.add(one(names[4], "B/session", auditPer, fmt.Sprintf(
		"the audit stream's stored bytes after the erase / the %d sessions erased (%d records on %d subjects, %d B; the warm session's record included); its server heap: %.0f B per erased session (by deleting it, dedupe entries of its 2 min window included)",
		n, f.auditMsgs, f.auditSubjects, f.auditBytes, auditHeap)))
	h.progress("erase-memory at %s: event stream %d -> %d B stored (%.2f returned), heap %.0f -> %.0f B/session (%.2f returned), process %.0f -> %.0f B/session, %.0f sessions/s erased, audit %.0f B/session",
		label, f.bytesBefore, f.bytesAfter, returned, streamBefore, streamAfter, heapReturned, procBefore, procAfter, rate, auditPer)
}

// rawLastBySubject reads the last message of each session's subject with
// a raw direct get ($JS.API.DIRECT.GET.<stream>.<subject>) and checks it:
// before the erase (present), one of its events; after it, its
// SessionDeleted, the id's tombstone.
func (h *harness) rawLastBySubject(ctx context.Context, streamName string, sessions []string, present bool) error {
	for _, s := range sessions {
		subj := erasePrefix + ".events." + s
		m, err := h.rawNC.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+streamName+"."+subj, nil)
		if err != nil {
			return fmt.Errorf("erase: raw direct get %s: %w", subj, err)
		}
		status := ""
		if m.Header != nil {
			status = m.Header.Get("Status")
		}
		switch {
		case present && (len(m.Data) == 0 || status != ""):
			return fmt.Errorf("erase: raw direct get %s before the erase: status %q, %d B", subj, status, len(m.Data))
		case !present:
			env, err := events.Decode(m.Data)
			if status != "" || err != nil || env.Type != events.TypeSessionDeleted {
				return fmt.Errorf("erase: raw direct get %s after the erase: status %q, %d B (%v), want its SessionDeleted only", subj, status, len(m.Data), err)
			}
		}
	}
	return nil
}

// sampleOf returns at most k elements of xs, evenly spread, first and last
// included.
func sampleOf(xs []string, k int) []string {
	if len(xs) <= k {
		return xs
	}
	out := make([]string, 0, k)
	for i := range k {
		out = append(out, xs[i*(len(xs)-1)/(k-1)])
	}
	return out
}

// heapScavenged is the live heap after two full collections and a
// scavenge (debug.FreeOSMemory), as heapAfterGC reads it.
func heapScavenged() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	return heapAfterGC()
}
