package service

// Pruning the registry history: the history keeps the newest
// N registry versions plus every version an open turn or a session's last
// checkpoint references, and nothing else. What is referenced comes from
// the projection's views (no log replay): a view's last checkpoint names
// its registry version, and an open turn's is in its TurnStarted, one
// direct read at the view's TurnSeq. A point of a history or explain
// under a pruned version says "registry version X pruned" (ErrRegistryPruned,
// rule RulePruned); a frozen turn's version is never pruned while the
// turn is open.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/tick"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// ErrRegistryPruned matches the error of a turn rebuild, a history point
// or a look-up whose registry version was pruned from the registry history;
// it matches ErrRegistryUnavailable too.
var ErrRegistryPruned = errors.New("registry version pruned")

// RulePruned is the rule of an explanation whose registry version was
// pruned: the explanation says so instead of explaining against another
// version.
const RulePruned = "registry-pruned"

// prunedErr is the error of a version pruned from the registry history.
func prunedErr(version string) error {
	return fmt.Errorf("%w: %s: %w", ErrRegistryUnavailable, prunedText(version), ErrRegistryPruned)
}

// Defaults of a zero RegistryPruneConfig.
const (
	// DefaultRegistryKeep is serve --registry-keep's default.
	DefaultRegistryKeep = 20
	// DefaultRegistryPruneBatch bounds the versions one pass prunes.
	DefaultRegistryPruneBatch = 100
	// DefaultRegistryPruneTick is how often serve looks for a registry
	// change to prune after.
	DefaultRegistryPruneTick = 30 * time.Second
)

// RegistryPruner removes registry versions from the registry history
// (jetstream.RegistryPruner).
type RegistryPruner interface {
	// Prune removes every stored version but the newest keepNewest and
	// those keep reports true for, at most maxPass a pass.
	Prune(ctx context.Context, keepNewest int, keep func(version string) bool, maxPass int) (jetstream.RegistryPruneReport, error)
}

var _ RegistryPruner = (*jetstream.RegistryPruner)(nil)

// RegistryPruneConfig configures a RegistryPrune. The zero value keeps
// every version (Keep 0).
type RegistryPruneConfig struct {
	// Keep is how many of the newest versions are kept besides the
	// referenced ones; 0 keeps every version (no pruning).
	Keep int
	// Batch bounds the versions one pass prunes (default 100).
	Batch int
	// CatchUp bounds the wait, at the start of a pass, for the views to
	// fold the log up to its last event (default 30s); a pass whose views
	// lag longer prunes nothing.
	CatchUp time.Duration
	// Observe, when set, receives each pass's counts.
	Observe func(RegistryPrunePass)
}

// Validate reports every problem of c at once, naming the serve flag.
func (c RegistryPruneConfig) Validate() error {
	var errs []error
	if c.Keep < 0 {
		errs = append(errs, fmt.Errorf("--registry-keep %d: want 1 or more versions kept, or 0 to keep every version: %w", c.Keep, ErrInvalid))
	}
	if c.Batch < 0 {
		errs = append(errs, fmt.Errorf("registry prune batch %d: want 1 or more (0: the default %d): %w", c.Batch, DefaultRegistryPruneBatch, ErrInvalid))
	}
	return errors.Join(errs...)
}

// RegistryPrunePass is what one prune pass did.
type RegistryPrunePass struct {
	// Started is when the pass began; Took how long it ran.
	Started time.Time
	Took    time.Duration
	// Referenced counts the distinct versions open turns and last
	// checkpoints reference (the live registry's included).
	Referenced int
	// Kept counts the versions stored after the pass; Pruned lists the
	// versions the pass pruned, oldest first.
	Kept   int
	Pruned []string
	// Remaining counts the versions left for the next pass (the bound).
	Remaining int
	// Conflicts counts versions recorded again while being pruned (kept).
	Conflicts int
	// Err is the pass's error (nil: it completed); the counts of a
	// failed pass are partial.
	Err error
}

// RegistryPrune applies a RegistryPruneConfig to an engine's registry
// history. Pass may be called from one goroutine at a time (calls are
// serialized); two engines pruning at once are harmless.
type RegistryPrune struct {
	e   *Engine
	p   RegistryPruner
	cfg RegistryPruneConfig
	mu  sync.Mutex
}

// NewRegistryPrune returns the prune policy cfg over e's registry history,
// pruning through p.
func (e *Engine) NewRegistryPrune(p RegistryPruner, cfg RegistryPruneConfig) (*RegistryPrune, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("registry prune: no pruner: %w", ErrInvalid)
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultRegistryPruneBatch
	}
	if cfg.CatchUp == 0 {
		cfg.CatchUp = 30 * time.Second
	}
	return &RegistryPrune{e: e, p: p, cfg: cfg}, nil
}

// Config is the prune's configuration with its defaults filled in.
func (r *RegistryPrune) Config() RegistryPruneConfig { return r.cfg }

// RegistryReferences returns every registry version an open turn (its
// TurnStarted's) or a session's last checkpoint references, and the
// engine's live registry version, read from the views: one view read per
// session, one event read per open turn. Any failure is an error: a pass
// must not prune on an incomplete answer.
func (e *Engine) RegistryReferences(ctx context.Context) (map[string]bool, error) {
	refs := map[string]bool{}
	if r := e.Registry(); r != nil {
		refs[r.Version()] = true
	}
	sessions, err := e.proj.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry references: list sessions: %w", err)
	}
	for _, s := range sessions {
		st, err := e.proj.Read(ctx, s, projection.ReadOptions{})
		if err != nil {
			return nil, fmt.Errorf("registry references: read session %q: %w", s, err)
		}
		if st.Deleted() {
			continue
		}
		if st.Checkpoint != nil && st.Checkpoint.RegistryVersion != "" {
			refs[st.Checkpoint.RegistryVersion] = true
		}
		if !st.InTurn {
			continue
		}
		v, err := e.turnVersion(ctx, s, st.Turn, st.TurnSeq, st.LastSeq)
		if err != nil {
			return nil, fmt.Errorf("registry references: session %q turn %d: %w", s, st.Turn, err)
		}
		if v != "" {
			refs[v] = true
		}
	}
	return refs, nil
}

// turnVersion is the registry version the TurnStarted of turn records
// (read at seq; for a view without TurnSeq, or when seq holds no such
// event, the last one of the session up to last); "" when it records none
// (written before turns recorded their request). Not found is an error:
// the pass must not prune what an open turn may need.
func (e *Engine) turnVersion(ctx context.Context, session string, turn, seq, last uint64) (string, error) {
	find := func(from, upTo uint64) (string, bool, error) {
		recs, err := e.log.ReadSession(ctx, session, from, upTo)
		if err != nil {
			return "", false, fmt.Errorf("read its TurnStarted: %w", err)
		}
		v, found := "", false
		for _, r := range recs {
			if p, ok := r.Envelope.Payload.(events.TurnStarted); ok && r.Err == nil && p.Turn == turn {
				v, found = p.RegistryVersion, true
			}
		}
		return v, found, nil
	}
	if seq != 0 {
		if v, found, err := find(seq, seq); err != nil || found {
			return v, err
		}
	}
	v, found, err := find(1, last)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("no TurnStarted of the open turn in the log up to %d: nothing pruned until it is found or the turn ends", last)
	}
	return v, nil
}

// Pass prunes the registry history once: it waits (CatchUp at most) for
// the views to fold the log up to its last event, reads the references,
// and prunes every stored version but the newest Keep and the referenced
// ones, at most Batch. Keep 0 prunes nothing. This engine forgets the
// registries it pruned, so that it records them again if it serves one.
func (r *RegistryPrune) Pass(ctx context.Context) (pass RegistryPrunePass, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pass.Started = time.Now()
	defer func() {
		pass.Took = time.Since(pass.Started)
		pass.Err = err
		if r.cfg.Observe != nil {
			r.cfg.Observe(pass)
		}
	}()
	if r.cfg.Keep <= 0 {
		return pass, nil
	}
	if err := r.caughtUp(ctx); err != nil {
		return pass, err
	}
	refs, err := r.e.RegistryReferences(ctx)
	if err != nil {
		return pass, err
	}
	pass.Referenced = len(refs)
	rep, err := r.p.Prune(ctx, r.cfg.Keep, func(v string) bool { return refs[v] }, r.cfg.Batch)
	pass.Kept, pass.Pruned, pass.Remaining, pass.Conflicts = rep.Kept, rep.Pruned, rep.Remaining, rep.Conflicts
	r.e.forgetRegistries(rep.Pruned)
	if err != nil {
		return pass, fmt.Errorf("registry prune: %w", err)
	}
	return pass, nil
}

// caughtUp waits (CatchUp at most) until the views have folded each
// stream of the log up to the last event it held when the pass began.
func (r *RegistryPrune) caughtUp(ctx context.Context) error {
	if err := r.e.viewsCaughtUp(ctx, r.cfg.CatchUp); err != nil {
		return fmt.Errorf("registry prune: %w: nothing pruned", err)
	}
	return nil
}

// forgetRegistries drops the pruned versions from this engine's memory
// of registries it served or loaded: history and explain then answer
// "pruned" here as on any other engine, and a pruned registry served
// again is recorded again.
func (e *Engine) forgetRegistries(pruned []string) {
	if len(pruned) == 0 {
		return
	}
	for _, v := range pruned {
		e.ts.regs.Remove(v)
	}
	e.ts.recorded.Range(func(k, _ any) bool {
		if reg, ok := k.(*resolver.Registry); ok && slices.Contains(pruned, reg.Version()) {
			e.ts.recorded.Delete(k)
		}
		return true
	})
}

// Run passes once at once, then every interval (DefaultRegistryPruneTick
// when 0) when changed reports true (nil: always), until ctx ends, while
// active reports true (nil: always). serve passes "the registry history
// grew" as changed and "this engine runs the projection" as active. A
// pass that pruned something logs its counts at info.
func (r *RegistryPrune) Run(ctx context.Context, interval time.Duration, changed, active func() bool) {
	if interval <= 0 {
		interval = DefaultRegistryPruneTick
	}
	pending := true // a pass is due: at start, after a failure, or a pass left work
	pass := func() bool {
		if active != nil && !active() {
			pending = true // the engine that becomes active passes at once
			return true
		}
		if changed != nil && changed() {
			pending = true
		}
		if !pending {
			return true
		}
		p, err := r.Pass(ctx)
		log := r.e.cfg.Logger
		pending = err != nil || p.Remaining > 0
		if err != nil {
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("registry prune pass")
			}
			return true
		}
		ev := log.Debug()
		if len(p.Pruned) > 0 {
			ev = log.Info()
		}
		ev.Int("keep", r.cfg.Keep).Int("referenced", p.Referenced).Int("kept", p.Kept).Strs("pruned", p.Pruned).
			Int("remaining", p.Remaining).Int("conflicts", p.Conflicts).Dur("took", p.Took).Msg("registry prune pass")
		return true
	}
	tick.EveryNow(ctx, interval, pass)
}
