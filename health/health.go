// Package health answers the engine's probes.
//
// Liveness (/healthz) says the process works: it never fails because
// NATS, the stream or the disk is down, so that an orchestrator does not
// restart every engine during a NATS blip. Readiness (/readyz) says the
// engine can serve: a set of named checks, each reporting why it fails.
// A check that failed counts as failing until it has passed for Hold
// (hysteresis), so readiness does not flap while a fault comes and goes.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
	"time"
)

// Check is one named readiness condition: it returns why the engine is
// not ready, or nil.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
	// Hold, when set, replaces Config.Hold for this check (negative: no
	// hold): a check whose passing answer is definite (the stream has a
	// leader that answered) recovers sooner than one that may come and go.
	Hold time.Duration
}

// Config configures a Checker. The zero value is usable.
type Config struct {
	// Hold is how long a failed check must pass before it counts as
	// passing again. Default 2s; negative: no hold.
	Hold time.Duration
	// Timeout bounds each check. Default 2s.
	Timeout time.Duration
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

// Checker runs readiness checks. Safe for concurrent use.
type Checker struct {
	cfg    Config
	checks []Check
	start  time.Time

	mu    sync.Mutex
	state map[string]*state
}

type state struct {
	lastFail time.Time
	lastErr  string
}

// New returns a Checker of checks.
func New(cfg Config, checks ...Check) *Checker {
	if cfg.Hold == 0 {
		cfg.Hold = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Checker{cfg: cfg, checks: checks, start: cfg.Now(), state: map[string]*state{}}
	for _, ch := range checks {
		c.state[ch.Name] = &state{}
	}
	return c
}

// Result is the outcome of one check.
type Result struct {
	OK bool `json:"ok"`
	// Error says why it fails, or, while it recovers, why it failed last.
	Error string `json:"error,omitempty"`
	// Recovering is set when the check passes again but has not yet
	// passed for Hold.
	Recovering bool `json:"recovering,omitempty"`
}

// Report is a readiness answer: OK when every check is.
type Report struct {
	OK     bool              `json:"ok"`
	Checks map[string]Result `json:"checks"`
}

// Ready runs every check (concurrently, each bounded by Timeout) and
// applies the hysteresis.
func (c *Checker) Ready(ctx context.Context) Report {
	errs := make([]error, len(c.checks))
	var wg sync.WaitGroup
	for i, ch := range c.checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			defer cancel()
			errs[i] = ch.Fn(cctx)
		})
	}
	wg.Wait()
	now := c.cfg.Now()
	rep := Report{OK: true, Checks: make(map[string]Result, len(c.checks))}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ch := range c.checks {
		st := c.state[ch.Name]
		r := Result{OK: true}
		switch {
		case errs[i] != nil:
			st.lastFail, st.lastErr = now, errs[i].Error()
			r = Result{Error: st.lastErr}
		case !st.lastFail.IsZero() && now.Sub(st.lastFail) < c.hold(ch):
			r = Result{Error: st.lastErr, Recovering: true}
		}
		if !r.OK {
			rep.OK = false
		}
		rep.Checks[ch.Name] = r
	}
	return rep
}

func (c *Checker) hold(ch Check) time.Duration {
	if ch.Hold != 0 {
		return ch.Hold
	}
	return c.cfg.Hold
}

// ReadyHandler serves /readyz: 200 with the report when ready, else 503.
func (c *Checker) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := c.Ready(r.Context())
		write(w, rep.OK, rep)
	})
}

// Liveness is the /healthz body.
type Liveness struct {
	OK         bool    `json:"ok"`
	UptimeSec  float64 `json:"uptime_s"`
	Goroutines int     `json:"goroutines"`
	// Extra carries informational fields (the NATS status, say) that
	// never fail liveness.
	Extra map[string]any `json:"info,omitempty"`
}

// LiveHandler serves /healthz: 200 whenever the process can answer;
// info, when set, adds fields that never make it fail.
func (c *Checker) LiveHandler(info func() map[string]any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := Liveness{OK: true, UptimeSec: c.cfg.Now().Sub(c.start).Seconds(), Goroutines: runtime.NumGoroutine()}
		if info != nil {
			l.Extra = info()
		}
		write(w, true, l)
	})
}

func write(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "stream last seq 45 < folded 90" reads as written
	_ = enc.Encode(body)
}
