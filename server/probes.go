package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/internal/tick"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
)

// probeDeps are what the readiness checks look at.
type probeDeps struct {
	nc         *nats.Conn
	parts      []*part // the event streams, each with its projection and write probe
	projecting bool
	maxLag     uint64 // events the projection may be behind once caught up
	extra      []health.Check
}

// Write probe timing. The probe asks the stream for its
// leader every writeProbeEvery in the background; /readyz only reads the
// cached answer, so a slow NATS under load never makes a request time
// out. A stream without a leader fails at once (appends stall: the
// answer is definite); a probe that times out fails readiness only once
// no probe has succeeded for writeProbeStale, so one slow answer under
// CPU load does not flip it, while a stall that lasts does.
const (
	writeProbeEvery   = time.Second
	writeProbeTimeout = 2 * time.Second
	writeProbeStale   = 3 * time.Second
	writeProbeHold    = 500 * time.Millisecond
)

// writeProbe caches whether the event stream can take an append now: it
// has a leader and answered recently.
type writeProbe struct {
	log *jetstream.Log
	now func() time.Time
	// watermark, when set, is the standing-by engine's question (what the
	// projection runner has folded), asked with the probe.
	watermark func(ctx context.Context) (folded uint64, standing bool, err error)
	// write, when set, stores one small value: whether the store takes a
	// write, asked with the probe.
	write func(ctx context.Context) error

	mu       sync.Mutex
	lastOK   time.Time // last answer with a leader
	lastSeq  uint64
	err      error // last probe's failure, nil when it succeeded
	writeErr error // the last probe write's failure, nil when it succeeded
	noLeader bool  // last answer said the stream has no leader
	folded   uint64
	foldKnow bool // folded was asked while standing by
	foldErr  error
}

func newWriteProbe(l *jetstream.Log) *writeProbe { return &writeProbe{log: l, now: time.Now} }

// watchRunner makes the probe also ask, while this engine stands by, how
// far the projection runner has folded.
func (p *writeProbe) watchRunner(proj *projection.Projection) {
	p.watermark = func(ctx context.Context) (uint64, bool, error) {
		if proj.Runner() {
			return 0, false, nil
		}
		w, _, err := proj.Meta().Watermark(ctx)
		return w, true, err
	}
}

// run probes until ctx ends.
func (p *writeProbe) run(ctx context.Context) {
	tick.EveryNow(ctx, writeProbeEvery, func() bool { p.probe(ctx); return true })
}

func (p *writeProbe) probe(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
	last, leader, single, err := p.log.StreamLeader(cctx)
	cancel()
	var folded uint64
	var standing bool
	var foldErr error
	if p.watermark != nil {
		cctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
		folded, standing, foldErr = p.watermark(cctx)
		cancel()
	}
	var writeErr error
	if p.write != nil {
		cctx, cancel := context.WithTimeout(ctx, writeProbeTimeout)
		writeErr = p.write(cctx)
		cancel()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeErr = writeErr
	if p.watermark != nil {
		p.folded, p.foldKnow, p.foldErr = folded, standing && foldErr == nil, foldErr
		if !standing {
			p.foldErr = nil
		}
	}
	p.noLeader = err == nil && !single && leader == ""
	switch {
	case err != nil:
		p.err = err
	case p.noLeader:
		p.err = errors.New("the event stream has no leader: appends stall until one is elected")
	default:
		p.err, p.lastOK, p.lastSeq = nil, p.now(), last
	}
}

// appended records an acknowledged append: the stream took a write now,
// which answers the question as well as a probe (and sooner, after a
// stall).
func (p *writeProbe) appended() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err, p.noLeader, p.lastOK, p.writeErr = nil, false, p.now(), nil
}

// check is the "stream" readiness check: the stream has a leader and
// answered, or took an append, within writeProbeStale.
func (p *writeProbe) check(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.writeErr != nil:
		return fmt.Errorf("the store takes no write (appends fail; ready again once a write succeeds): %w", p.writeErr)
	case p.noLeader:
		return p.err
	case p.lastOK.IsZero() && p.err != nil:
		return p.err
	case p.lastOK.IsZero():
		return errors.New("the event stream has not answered yet")
	}
	if age := p.now().Sub(p.lastOK); age > writeProbeStale {
		return fmt.Errorf("the event stream's leader has not answered for %s (appends stall): %v", age.Round(100*time.Millisecond), p.err)
	}
	return nil
}

// last is the stream's last sequence at the last good probe.
func (p *writeProbe) last() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSeq, !p.lastOK.IsZero()
}

// runnerFolded is the runner's watermark at the last probe; known is
// false until a probe asked it while this engine stood by.
func (p *writeProbe) runnerFolded() (folded uint64, known bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.folded, p.foldKnow, p.foldErr
}

// startupCheck fails while serve waits for NATS, saying why.
func startupCheck(context.Context) error {
	if s := engineStartup.String(); s != "" {
		return errors.New(s)
	}
	return nil
}

// newProbes builds the checker behind /healthz and /readyz: ready means an append and a read succeed now — no
// start-up wait, the NATS connection up, and for each event stream: a
// leader that answered within writeProbeStale (cached, probed in the
// background), no acknowledged events missing, the projection caught up
// (then within maxLag), its log intact; plus the extra checks (disk, ...),
// each named in the reply. A stream's checks are suffixed with its
// partition's number when there are several.
func newProbes(d probeDeps) *health.Checker {
	checks := []health.Check{
		{Name: "startup", Fn: startupCheck},
		{Name: "nats", Fn: func(context.Context) error {
			if !d.nc.IsConnected() {
				return fmt.Errorf("NATS connection is %s", d.nc.Status())
			}
			return nil
		}},
	}
	for _, p := range d.parts {
		checks = append(checks,
			// A leader that answered is definite: recover after
			// writeProbeHold, not the checker's 2 s.
			health.Check{Name: p.check("stream"), Fn: p.probe.check, Hold: writeProbeHold},
			// Acknowledged events missing from the log: what this
			// engine's projection found, or the runner recorded.
			health.Check{Name: p.check("log_damage"), Fn: p.proj.Damaged})
		if d.projecting {
			checks = append(checks, health.Check{Name: p.check("projection"), Fn: projectionCheck(p, d.maxLag)})
		}
		integrity := p.integrity
		checks = append(checks, health.Check{Name: p.check("log_integrity"), Fn: func(context.Context) error { return integrity() }})
	}
	return health.New(health.Config{}, append(checks, d.extra...)...)
}

// projectionCheck is the readiness of p's projection: caught up once,
// then within maxLag of the log; standing by, the runner's within maxLag.
func projectionCheck(p *part, maxLag uint64) func(context.Context) error {
	var caughtUp atomic.Bool
	return func(ctx context.Context) error {
		last, known := p.probe.last()
		if !p.proj.Runner() {
			// Standing by: ready while the runner,
			// in another engine, keeps the views within maxLag.
			w, wKnown, err := p.probe.runnerFolded()
			if err != nil {
				return err
			}
			if known && wKnown && last > w && last-w > maxLag {
				return fmt.Errorf("standing by: the projection runner has folded %d of %d events, more than %d behind (is a runner alive?)", w, last, maxLag)
			}
			return nil
		}
		if p.proj.CaughtUp() {
			caughtUp.Store(true)
			return nil
		}
		applied := p.proj.Applied()
		if !caughtUp.Load() {
			return fmt.Errorf("projection catching up: folded up to sequence %d", applied)
		}
		if known && last > applied && last-applied > maxLag {
			return fmt.Errorf("projection %d events behind the log (folded %d of %d), more than %d", last-applied, applied, last, maxLag)
		}
		return nil
	}
}

// liveInfo is what /healthz shows besides ok: informational, it never
// makes liveness fail.
// With several partitions, each stream's figures are listed under
// "partitions".
func liveInfo(nc *nats.Conn, parts []*part) func() map[string]any {
	return func() map[string]any {
		if len(parts) == 1 {
			proj := parts[0].proj
			return map[string]any{"nats": nc.Status().String(), "applied_seq": proj.Applied(), "projection_runner": proj.Runner()}
		}
		each := make([]map[string]any, len(parts))
		for i, p := range parts {
			each[i] = map[string]any{"stream": p.log.StreamName(), "applied_seq": p.proj.Applied(), "projection_runner": p.proj.Runner()}
		}
		return map[string]any{"nats": nc.Status().String(), "partitions": each}
	}
}
