package main

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/toolintent/engine/api"
)

// httpFlags configure the HTTP gateway's trust boundary (issue 11).
type httpFlags struct {
	HTTPTokens  string        `name:"http-tokens" type:"existingfile" env:"ENGINE_HTTP_TOKENS" help:"Tokens file (JSON array of {\"token\",\"channel\",\"actor\",\"read_only\"}): every HTTP API request then needs Authorization: Bearer <token> and writes as the token's channel. Required for a non-loopback --http."`
	HTTPHosts   []string      `name:"http-host" env:"ENGINE_HTTP_HOSTS" help:"Host names (or name:port) the HTTP server answers to, besides localhost, 127.0.0.1 and [::1]; other Host headers are refused (DNS rebinding)."`
	HTTPOrigins []string      `name:"http-origin" help:"Origins (scheme://host[:port]) whose pages may send cross-origin writes; by default only the engine's own pages may."`
	HTTPMaxConn int           `name:"http-max-conns" default:"512" help:"Most HTTP connections open at once; more wait in the listen queue."`
	HTTPRead    time.Duration `name:"http-read-timeout" default:"15s" help:"Time a client has to send a whole request (headers and body); slower ones are cut off."`
}

// apiConfig completes an API configuration with the HTTP trust settings
// and refuses a non-loopback listener without tokens.
func (f httpFlags) apiConfig(cfg api.Config, addr string) (api.Config, error) {
	if f.HTTPTokens != "" {
		toks, err := api.LoadTokens(f.HTTPTokens)
		if err != nil {
			return cfg, err
		}
		cfg.Tokens = toks
	}
	if addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return cfg, fmt.Errorf("--http %q: %w (want host:port, e.g. 127.0.0.1:7420)", addr, err)
		}
		if !loopbackHost(host) && cfg.Tokens == nil {
			return cfg, fmt.Errorf("--http %s is not a loopback address and the HTTP API has no authentication: give --http-tokens FILE (bearer tokens mapped to channels), or listen on 127.0.0.1", addr)
		}
		if host != "" && !net.ParseIP(host).IsUnspecified() && !loopbackHost(host) {
			f.HTTPHosts = append(f.HTTPHosts, host)
		}
	}
	if len(f.HTTPHosts) > 0 {
		cfg.Hosts = append([]string{"localhost", "127.0.0.1", "[::1]"}, f.HTTPHosts...)
	}
	cfg.Origins = f.HTTPOrigins
	return cfg, nil
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// newHTTPServer bounds what one client can hold (issue 11, item 7): the
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
