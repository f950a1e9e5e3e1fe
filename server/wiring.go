package server

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/inspector"
	"github.com/toolintent/engine/metrics"
)

// startMicro serves the NATS micro API; the returned func stops it.
func startMicro(ctx context.Context, a *api.API, nc *nats.Conn) (func(), error) {
	svc, err := a.StartMicro(ctx, nc)
	if err != nil {
		return nil, err
	}
	return func() { _ = svc.Stop() }, nil
}

// httpHandler serves the API under /v1 and the operator endpoints: the
// probes come from the health checker.
func httpHandler(a *api.API, m *metrics.Metrics, probes *health.Checker, live func() map[string]any) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", a.Handler())
	mux.Handle("/inspector/", inspector.Handler())
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("GET /healthz", probes.LiveHandler(live))
	mux.Handle("GET /readyz", probes.ReadyHandler())
	mux.Handle("/", a.Handler())
	return mux
}
