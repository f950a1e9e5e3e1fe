package main

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/inspector"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/service"
)

// startMicro serves the NATS micro API; the returned func stops it.
func startMicro(ctx context.Context, a *api.API, nc *nats.Conn) (func(), error) {
	svc, err := a.StartMicro(ctx, nc)
	if err != nil {
		return nil, err
	}
	return func() { _ = svc.Stop() }, nil
}

// httpHandler serves the API under /v1 and the operator endpoints.
// Readiness needs the NATS connection and, when this engine runs the
// projection, a projection that has caught up with the log.
func httpHandler(a *api.API, eng *service.Engine, m *metrics.Metrics, nc *nats.Conn, projecting bool, inputs ...readyInput) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", a.Handler())
	mux.Handle("/inspector/", inspector.Handler())
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		status(w, nc.IsConnected(), map[string]any{"nats": nc.Status().String()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		p := eng.Projection()
		ok := nc.IsConnected() && (p.CaughtUp() || !projecting)
		body := map[string]any{"nats": nc.Status().String(), "projection_running": projecting, "projection_caught_up": p.CaughtUp(), "applied_seq": p.Applied()}
		for _, in := range inputs {
			if err := in.check(); err != nil {
				ok = false
				body[in.name] = err.Error()
			}
		}
		status(w, ok, body)
	})
	mux.Handle("/", a.Handler())
	return mux
}

// readyInput is one more condition of /readyz: check returns why the
// engine is not ready, or nil.
type readyInput struct {
	name  string
	check func() error
}

func status(w http.ResponseWriter, ok bool, body map[string]any) {
	body["ok"] = ok
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
