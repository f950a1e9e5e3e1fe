package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/health"
	"github.com/toolintent/engine/jetstream"
)

// serviceConn opens the API's own connection when c.NATSAPIUser is
// given (with deploy/nats-server.conf's engine-api user, whose
// publish rights are only the users' reply inboxes, the server itself
// refuses a reply to any other subject that a request names), else
// returns the engine's connection nc.
func serviceConn(ctx context.Context, c Config, url string, nc *nats.Conn) (*nats.Conn, func(), error) {
	if c.NATSAPIUser == "" {
		return nc, func() {}, nil
	}
	apiNC, err := jetstream.Connect(ctx, jetstream.ConnConfig{URL: url, Name: "engine-api", User: c.NATSAPIUser, Password: c.NATSAPIPassword,
		TLSCAFile: c.TLSCA, TLSCertFile: c.TLSCert, TLSKeyFile: c.TLSKey})
	if err != nil {
		return nil, nil, fmt.Errorf("API connection as --nats-api-user %s: %w", c.NATSAPIUser, err)
	}
	return apiNC, func() { _ = apiNC.Drain() }, nil
}

// protect applies the API's Host and cross-origin checks to every route
// but the probes /healthz and /readyz, which a load balancer or an
// orchestrator calls by whatever address it has, and which show nothing
// a page could misuse.
func protect(a *api.API, h http.Handler) http.Handler {
	p := a.Protect(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz") {
			h.ServeHTTP(w, r)
			return
		}
		p.ServeHTTP(w, r)
	})
}

// newHTTPServer bounds what one client can hold: the
// whole request must arrive within ReadTimeout (a slow body is cut off),
// the reply leave within WriteTimeout (after the API's request timeout),
// an idle keep-alive connection closes, headers are bounded, and at most
// maxConns connections are open.
func newHTTPServer(h http.Handler, readTimeout, requestTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(5*time.Second, readTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      requestTimeout + 15*time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// limitListener accepts at most n connections at once; the others wait
// in the kernel's listen queue until one closes.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func newLimitListener(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// swapHandler serves the handler last set: the start-up answers, then
// the engine's routes.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while serve starts: /healthz
// 200 (the process works), /readyz 503 naming the start-up wait, every
// other route 503.
func startingHandler() http.Handler {
	probes := health.New(health.Config{Hold: -1},
		health.Check{Name: "startup", Fn: func(ctx context.Context) error {
			if err := startupCheck(ctx); err != nil {
				return err
			}
			return errors.New("engine starting: opening the views and the API")
		}})
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", probes.LiveHandler(func() map[string]any {
		return map[string]any{"startup": engineStartup.String()}
	}))
	mux.Handle("GET /readyz", probes.ReadyHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		writeStartingError(w, engineStartup.String())
	})
	return mux
}

// writeStartingError answers a request that came before the API was
// ready with the API's own error envelope: 503, code
// "unavailable", so that clients parse it like any other error.
func writeStartingError(w http.ResponseWriter, state string) {
	msg := "engine starting: opening the views and the API; retry in a second (see /readyz)"
	if state != "" {
		msg = "engine starting: " + state + "; retry in a second (see /readyz)"
	}
	body, err := json.Marshal(struct {
		Error *api.APIError `json:"error"`
	}{&api.APIError{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: msg}})
	if err != nil { // an APIError always marshals
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", api.MIMEJSON)
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(append(body, '\n'))
}
