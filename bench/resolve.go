package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// turnResolve: the whole per-turn read path of Engine.Resolve: session
// read (from the projection's memory), cached resolve, split, Anthropic
// rendering, sha256 prefix hash.
func (h *harness) turnResolve(ctx context.Context) error {
	keys := h.readKeys
	if len(keys) == 0 {
		return errors.New("turn resolve needs the sessions of append-concurrent")
	}
	n := max(h.cfg.ReadOps/2, 1)
	var tools int
	l, err := h.single(ctx, nameTurnResolve, "µs/op", func(ctx context.Context, _ int) (float64, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			v, err := h.eng.Resolve(ctx, keys[i%len(keys)], service.ResolveRequest{})
			if err != nil {
				return 0, err
			}
			tools = len(v.Provider)
		}
		return micros(time.Since(start), n), nil
	})
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("%d resolves/run, %d tools in the provider array; Engine.Resolve in the process running the projection: session read from its memory (no KV get), cached resolve, split, Anthropic rendering, prefix hash; no raw baseline", n, tools)
	h.add(l)
	return nil
}

// micro measures a CPU-only function: ns per op and allocations per op.
// fn performs ops operations per call.
func (h *harness) micro(ctx context.Context, name string, ops int, fn func() error) (Line, error) {
	if err := fn(); err != nil {
		return Line{}, fmt.Errorf("%s: %w", name, err)
	}
	// Calibrate the number of calls of one run to about CPUTime.
	calls := 1
	for {
		start := time.Now()
		for i := 0; i < calls; i++ {
			_ = fn()
		}
		el := time.Since(start)
		if el >= h.cfg.CPUTime/8 || calls >= 1<<30 {
			calls = max(1, int(float64(calls)*float64(h.cfg.CPUTime)/float64(max(el, 1))))
			break
		}
		calls *= 4
	}
	var allocs []float64
	l, err := h.single(ctx, name, "ns/op", func(ctx context.Context, _ int) (float64, error) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		for i := 0; i < calls; i++ {
			if err := fn(); err != nil {
				return 0, err
			}
		}
		el := time.Since(start)
		runtime.ReadMemStats(&m1)
		// Background goroutines (server, client) allocate too: the
		// smallest figure of the runs is the closest to fn's own.
		allocs = append(allocs, float64(m1.Mallocs-m0.Mallocs)/float64(calls*ops))
		return float64(el.Nanoseconds()) / float64(calls*ops), nil
	})
	if err != nil {
		return l, err
	}
	l.Allocs = fptr(minOf(allocs))
	return l, nil
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

// registryJSON is a valid registry file of n tools, every one in
// DEFAULT_TOOLS (so a resolution has n tools), every tenth deferred, with
// tool_search among them and a web_search tool outside the defaults.
func registryJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":"bench-1","tools":[`)
	names := make([]string, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tool_%04d", i)
		if i == n/2 {
			name = resolver.ToolSearch
		}
		names = append(names, name)
		fmt.Fprintf(&b, `{"name":%q,"description":"Tool number %d reads and writes things for the agent.","permission":"read",`+
			`"parameters":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"limit":{"type":"integer"}},"required":["path"]}},`, name, i)
	}
	b.WriteString(`{"name":"web_search","description":"Searches the web.","permission":"network","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}`)
	b.WriteString(`],"default_tools":["` + strings.Join(names, `","`) + `"],"deferred_default_tools":[`)
	sep := ""
	for i, name := range names {
		if i%10 == 3 && name != resolver.ToolSearch {
			b.WriteString(sep + `"` + name + `"`)
			sep = ","
		}
	}
	b.WriteString(`],"presets":{"half":["` + strings.Join(names[:n/2+1], `","`) + `"]},"profiles":{"coder":{"preset":"half"}}}`)
	return []byte(b.String())
}

func benchRequest(n int) resolver.Request {
	return resolver.Request{Session: resolver.Intent{Enabled: bptr(true), WebSearch: bptr(true),
		Disabled: []string{fmt.Sprintf("tool_%04d", 7), fmt.Sprintf("tool_%04d", n/4+1)}}}
}

// resolveLines: cached Resolve and cold ResolveUncached for each registry
// size.
func (h *harness) resolveLines(ctx context.Context) error {
	for _, n := range h.cfg.RegistrySizes {
		reg, err := resolver.Load(registryJSON(n))
		if err != nil {
			return fmt.Errorf("registry of %d tools: %w", n, err)
		}
		req := benchRequest(n)
		want := n - 2 + 1 // two disabled, web_search added
		check := func(res *resolver.Resolution, err error) error {
			if err != nil {
				return err
			}
			if len(res.Tools) != want {
				return fmt.Errorf("resolution of %d tools, want %d", len(res.Tools), want)
			}
			return nil
		}
		l, err := h.micro(ctx, fmt.Sprintf(nameResolveCached, n), 1, func() error { return check(reg.Resolve(req)) })
		if err != nil {
			return err
		}
		l.Target = "< 1 µs, 0 allocs"
		l.Met = bptr(l.Engine < 1000 && *l.Allocs < 0.005)
		l.Note = fmt.Sprintf("Registry.Resolve, repeated request, %d tools out", want)
		h.add(l)
		l, err = h.micro(ctx, fmt.Sprintf(nameResolveCold, n), 1, func() error { return check(reg.ResolveUncached(req)) })
		if err != nil {
			return err
		}
		if n == 500 {
			l.Target = "< 50 µs"
			l.Met = bptr(l.Engine < 50_000)
		}
		l.Note = fmt.Sprintf("Registry.ResolveUncached, %d tools out (all tools are defaults)", want)
		h.add(l)
	}
	return nil
}
