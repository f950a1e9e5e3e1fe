package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// testEnv is a real engine on a real in-process NATS server, served over
// HTTP (httptest) and NATS micro.
type testEnv struct {
	srv     *jetstream.Embedded
	engNC   *nats.Conn // the engine's own connection
	eng     *service.Engine
	api     *API
	httpURL string
	nc      *nats.Conn // a client connection
	svc     micro.Service
}

func newEnv(t testing.TB, cfg Config) *testEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := natstest.Server(t)
	return newEnvOn(t, ctx, srv, srv.ClientURL(), cfg)
}

func newEnvOn(t testing.TB, ctx context.Context, srv *jetstream.Embedded, url string, cfg Config, opts ...nats.Option) *testEnv {
	t.Helper()
	engNC := natstest.Connect(t, url, opts...)
	log, err := jetstream.OpenLog(ctx, engNC, jetstream.LogConfig{})
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatalf("open projection: %v", err)
	}
	go func() { _ = proj.Run(ctx) }()
	eng := service.New(log, proj, resolver.Default(), service.Config{})
	a, err := New(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)
	svc, err := a.StartMicro(ctx, engNC)
	if err != nil {
		t.Fatalf("start micro: %v", err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return &testEnv{srv: srv, engNC: engNC, eng: eng, api: a, httpURL: hs.URL, nc: natstest.Connect(t, url, opts...), svc: svc}
}

// recorder counts the operations a client called.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func record(c *Client) (*Client, *recorder) {
	r := &recorder{seen: map[string]int{}}
	rc := *c
	rc.onCall = func(op string) {
		r.mu.Lock()
		r.seen[op]++
		r.mu.Unlock()
	}
	return &rc, r
}

func (e *testEnv) httpClient(opts ...ClientOption) *Client { return NewClient(e.httpURL, opts...) }

func (e *testEnv) natsClient(opts ...ClientOption) *Client { return NewNATSClient(e.nc, opts...) }

// rawHTTP sends a request and returns the status, the headers and body.
func rawHTTP(t *testing.T, method, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", MIMEJSON) // unless headers say otherwise
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// rawNATS sends a request to a subject and returns the reply.
func rawNATS(t *testing.T, nc *nats.Conn, subject, body string, headers ...string) *nats.Msg {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	for i := 0; i+1 < len(headers); i += 2 {
		msg.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return resp
}

// apiError decodes an error envelope.
func apiError(t *testing.T, body []byte) *APIError {
	t.Helper()
	var env wire.Envelope
	if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope: %s (%v)", body, err)
	}
	return env.Error
}

// asAPIError asserts err is an *APIError with status and code.
func asAPIError(t *testing.T, err error, status int, code string) *APIError {
	t.Helper()
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *APIError", err, err)
	}
	if ae.Status != status || ae.Code != code {
		t.Fatalf("error = %d %s (%s), want %d %s", ae.Status, ae.Code, ae.Message, status, code)
	}
	return ae
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

// transports runs f once with an HTTP client and once with a NATS client.
func transports(t *testing.T, e *testEnv, f func(t *testing.T, c *Client)) {
	t.Run("http", func(t *testing.T) { f(t, e.httpClient()) })
	t.Run("nats", func(t *testing.T) { f(t, e.natsClient()) })
}
