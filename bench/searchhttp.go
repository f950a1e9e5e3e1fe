package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/toolsearch/searcheval"
)

// Line names of tool_search over HTTP.
const (
	nameSearchHTTP     = "tool_search over HTTP %s, %s tools, view none"
	nameSearchHTTPFull = "tool_search over HTTP p50, %s tools, full view (%s)"
)

// searchHTTPProviders are the renderings of the full-view line: the
// engine catalog's and a native one (every tool in the array).
var searchHTTPProviders = []string{service.ProviderAnthropicEngine, "anthropic"}

func searchHTTPLineNames() []string {
	big := sessionsLabel(searchSizes[len(searchSizes)-1])
	out := []string{fmt.Sprintf(nameSearchHTTP, "p50", big), fmt.Sprintf(nameSearchHTTP, "p99", big)}
	for _, p := range searchHTTPProviders {
		out = append(out, fmt.Sprintf(nameSearchHTTPFull, big, p))
	}
	return out
}

// searchHTTPLines: tool_search through the whole path a backend takes,
// over HTTP on a loopback port (client.NewHTTP, the API's handler, the
// service, the turn's search and the DeferredLoaded it appends) at 10,000
// MCP tools: each labelled query in a turn of its own session (its begin
// is not timed). With view "none" the reply is the search's alone; the
// full view, which carries the turn's next provider request, is a line
// of its own per rendering.
func (h *harness) searchHTTPLines(ctx context.Context, reg *resolver.Registry) error {
	qs, err := searcheval.Queries()
	if err != nil {
		return err
	}
	if h.cfg.Quick {
		qs = qs[:24] // proves the lines work; the figures are the full run's
	}
	eng := service.New(h.elog, h.proj, reg, service.Config{})
	a, err := api.New(eng, api.Config{})
	if err != nil {
		return fmt.Errorf("search over HTTP: api: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", a.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("search over HTTP: listen: %w", err)
	}
	srv := &http.Server{Handler: a.Protect(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	c := client.NewHTTP("http://"+ln.Addr().String(), client.WithActor(origin.Actor), client.WithTimeout(time.Minute))

	label := sessionsLabel(searchSizes[len(searchSizes)-1])
	// measure runs every labelled query once in sessions named by run and
	// returns the latencies in ms, sorted.
	measure := func(run int, provider, view string) ([]float64, error) {
		var lat []float64
		for i, q := range qs {
			s := fmt.Sprintf("sh-%s-%s-%d-%03d", provider, view, run, i)
			if _, err := eng.Apply(ctx, s, origin, nil, events.ToolsToggled{Enabled: bptr(true)}); err != nil {
				return nil, err
			}
			if _, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: s, Provider: provider}); err != nil {
				return nil, err
			}
			input, _ := json.Marshal(map[string]string{"query": q.Query})
			start := time.Now()
			if _, err := c.TurnDiscover(ctx, client.DiscoverRequest{Session: s, Input: input, Provider: provider, View: view}); err != nil {
				return nil, err
			}
			lat = append(lat, float64(time.Since(start).Nanoseconds())/1e6)
		}
		slices.Sort(lat)
		return lat, nil
	}
	var p99s []float64
	l, err := h.single(ctx, fmt.Sprintf(nameSearchHTTP, "p50", label), "ms", p50(func(run int) ([]float64, error) {
		return measure(run, service.ProviderAnthropicEngine, "none")
	}, &p99s))
	if err != nil {
		return err
	}
	note := fmt.Sprintf("turn/discover {\"query\"} with view none over HTTP (loopback, Go client), %d tools, the %d labelled queries each in its own turn per run; includes the DeferredLoaded append", reg.Len(), len(qs))
	l.Note = note
	maxTarget(&l, 5, "<= 5 ms")
	h.add(l)
	p99 := p99Line(fmt.Sprintf(nameSearchHTTP, "p99", label), "ms", p99s, note)
	maxTarget(&p99, 20, "<= 20 ms")
	h.add(p99)
	for _, provider := range searchHTTPProviders {
		l, err := h.single(ctx, fmt.Sprintf(nameSearchHTTPFull, label, provider), "ms", p50(func(run int) ([]float64, error) {
			return measure(run, provider, "full")
		}, nil))
		if err != nil {
			return err
		}
		l.Note = "the same searches with the full view: the reply carries the turn's next provider request (every tool's name, class and catalog line; with a native rendering every tool's schema)"
		h.add(l)
	}
	return nil
}
