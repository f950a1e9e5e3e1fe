package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/internal/httpguard"
	"github.com/toolintent/engine/internal/tokens"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// ServiceName is the NATS micro service name (nats micro ls / info).
const ServiceName = "tool-engine"

// Version is the API version, reported as the micro service version.
const Version = "1.0.0"

// Header names callers outside api use: wire's.
const (
	HeaderChannel   = wire.HeaderChannel
	HeaderErrorCode = wire.HeaderErrorCode
)

// RetryAfterSeconds is the Retry-After of busy (429) and unavailable or
// outcome_unknown (503) replies: the in-flight bounds and a lagging
// projection clear within about a second.
const RetryAfterSeconds = 1

// retryAfter is the Retry-After header value of an error reply, "" when
// it has none: 429 and 503 say when to retry.
func retryAfter(e *APIError) string {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		return strconv.Itoa(RetryAfterSeconds)
	}
	return ""
}

// MIMEJSON is the media type of JSON bodies: wire's.
const MIMEJSON = wire.MIMEJSON

// operation is an API operation with its request and reply types and the
// service method that answers it (service.Handler).
type operation = service.Handler

// operations is the one table both transports are built from, over
// wire's routes, so that they and the client cannot drift: the service's
// handlers, one per operation.
var operations = service.Handlers()

var opsByName = func() map[string]*operation {
	m := make(map[string]*operation, len(operations))
	for _, op := range operations {
		m[op.Name] = op
	}
	return m
}()

// Operations returns the API's operations in a fixed order (a fresh copy).
func Operations() []wire.Operation {
	out := make([]wire.Operation, len(operations))
	for i, op := range operations {
		out[i] = op.Operation
		out[i].Methods = append([]string(nil), op.Methods...)
	}
	return out
}

// Config configures an API. The zero value is usable.
type Config struct {
	// SubjectPrefix is the NATS API prefix: requests go to
	// <SubjectPrefix>.<channel>.<op>. Default "tools.api".
	SubjectPrefix string
	// HTTPChannel is the channel of HTTP requests without an
	// Engine-Channel header. Default "http".
	HTTPChannel string
	// MaxBodyBytes bounds a request body. Default 1 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds each request whose context has no deadline.
	// Default 30s.
	RequestTimeout time.Duration
	// MaxInFlightPerChannel bounds the requests one channel has in flight
	// (both transports); more get a CodeBusy (429) reply. Default 32.
	MaxInFlightPerChannel int
	// MaxInFlight bounds the requests in flight in total. Default 256.
	MaxInFlight int
	// MaxLivePerChannel bounds the live streams one channel has
	// open, both transports; more get a CodeBusy (429) reply. Default 8.
	MaxLivePerChannel int
	// MaxLive bounds the live streams open in total. Default 64 (each
	// HTTP stream holds one of engine serve's --http-max-conns
	// connections, default 512).
	MaxLive int
	// LiveHeartbeat is how often an idle live stream sends a heartbeat.
	// Default wire.LiveHeartbeat (15s).
	LiveHeartbeat time.Duration
	// HTTPChannels are the Engine-Channel values the HTTP gateway trusts
	// without tokens, besides HTTPChannel: each has its own in-flight
	// budget and metrics label; every other channel shares one budget and
	// the label "other". With Tokens, the tokens' channels.
	HTTPChannels []string
	// EraseChannel is the one channel that may purge events: erase
	// (DELETE with erase=true) and compaction. Default
	// DefaultEraseChannel ("ops").
	EraseChannel string
	// DeleteChannels, when set, are the channels that may delete sessions
	// (besides EraseChannel); any other is refused. Empty: every writing
	// channel may.
	DeleteChannels []string
	// Tokens, when set, authenticate HTTP requests: each needs
	// Authorization: Bearer <token>, and the channel comes from the token
	// (see tokens.Load).
	Tokens *tokens.Set
	// Hosts are the Host header values the HTTP gateway accepts (a name,
	// or name:port); a request naming another host is refused, which
	// stops DNS rebinding. Default: localhost, 127.0.0.1 and [::1] on any
	// port. Set it when the gateway is reached by another name.
	Hosts []string
	// Origins are the origins (scheme://host[:port]) whose browser pages
	// may send requests besides the gateway's own; any other cross-origin
	// write is refused (CSRF).
	Origins []string
	// Logger receives a line per failed request; the zero value logs
	// nothing.
	Logger zerolog.Logger
	// Observe, when set, is called once per request answered, on both
	// transports, with the operation name, the channel ("" when the
	// request was refused before its channel was known, OtherChannels
	// for an HTTP channel the engine does not know), the outcome
	// ("ok" or the error code) and the time taken (metrics).
	Observe func(op, channel, outcome string, took time.Duration)
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	check := func(what, token string) {
		if err := service.ValidToken(what, token); err != nil {
			errs = append(errs, fmt.Errorf("api config: %v", err))
		}
	}
	if c.SubjectPrefix != "" {
		for _, tok := range strings.Split(c.SubjectPrefix, ".") {
			check("subject prefix token", tok)
		}
	}
	if c.HTTPChannel != "" {
		check("HTTP channel", c.HTTPChannel)
	}
	if c.EraseChannel != "" {
		check("erase channel", c.EraseChannel)
	}
	for _, ch := range c.DeleteChannels {
		check("delete channel", ch)
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("api config: MaxBodyBytes %d is negative", c.MaxBodyBytes))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("api config: RequestTimeout %s is negative", c.RequestTimeout))
	}
	if c.MaxLivePerChannel < 0 || c.MaxLive < 0 || c.LiveHeartbeat < 0 {
		errs = append(errs, fmt.Errorf("api config: MaxLivePerChannel %d, MaxLive %d and LiveHeartbeat %s must not be negative", c.MaxLivePerChannel, c.MaxLive, c.LiveHeartbeat))
	}
	if c.MaxInFlightPerChannel < 0 || c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("api config: MaxInFlightPerChannel %d and MaxInFlight %d must not be negative", c.MaxInFlightPerChannel, c.MaxInFlight))
	}
	for _, ch := range c.HTTPChannels {
		check("HTTP channel", ch)
	}
	for _, o := range c.Origins {
		if _, err := httpguard.ParseOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("api config: %w", err))
		}
	}
	return errors.Join(errs...)
}

// The default bounds of Config: requests in flight and live streams, per
// channel and in all.
const (
	DefaultMaxInFlightPerChannel = 32
	DefaultMaxInFlight           = 256
	DefaultMaxLivePerChannel     = 8
	DefaultMaxLive               = 64
)

func (c Config) withDefaults() Config {
	orDefault(&c.SubjectPrefix, "tools.api")
	orDefault(&c.HTTPChannel, "http")
	orDefault(&c.EraseChannel, service.DefaultEraseChannel)
	orDefault(&c.MaxBodyBytes, 1<<20)
	orDefault(&c.RequestTimeout, 30*time.Second)
	orDefault(&c.MaxInFlightPerChannel, DefaultMaxInFlightPerChannel)
	orDefault(&c.MaxInFlight, DefaultMaxInFlight)
	orDefault(&c.MaxLivePerChannel, DefaultMaxLivePerChannel)
	orDefault(&c.MaxLive, DefaultMaxLive)
	orDefault(&c.LiveHeartbeat, wire.LiveHeartbeat)
	return c
}

// orDefault sets *p to v when *p is the zero value.
func orDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// API serves an engine over HTTP (Handler) and NATS micro (StartMicro).
// It is safe for concurrent use.
type API struct {
	eng *service.Engine
	req *service.Requests
	cfg Config
	lim *service.Limiter

	live *service.LiveHub // live streams (live.go)
}

// New returns the API of eng, or the problems of cfg (Config.Validate).
func New(eng *service.Engine, cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &API{eng: eng, req: service.NewRequests(eng), cfg: cfg, lim: service.NewLimiter(cfg.MaxInFlightPerChannel, cfg.MaxInFlight),
		live: service.NewLiveHub(eng, cfg.MaxLivePerChannel, cfg.MaxLive, cfg.LiveHeartbeat)}, nil
}

// Config returns the configuration in use, defaults filled in.
func (a *API) Config() Config { return a.cfg }

// run executes op with a decoded request, under the request timeout.
func (a *API) run(ctx context.Context, op *operation, req any, o service.Origin) (any, error) {
	if err := service.CheckRequest(req, &o); err != nil {
		return nil, err
	}
	return a.call(ctx, op, req, o)
}

// call executes op with a checked request, under the request timeout.
func (a *API) call(ctx context.Context, op *operation, req any, o service.Origin) (any, error) {
	if err := (service.ChannelRules{Erase: a.cfg.EraseChannel, Delete: a.cfg.DeleteChannels}).Check(op.Operation, req, o.Channel); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.RequestTimeout)
		defer cancel()
	}
	return op.Call(ctx, a.req, req, o)
}

// observe reports one answered request to Config.Observe.
func (a *API) observe(op *operation, channel string, err error, start time.Time) {
	if a.cfg.Observe == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = errorOf(err).Code
	}
	a.cfg.Observe(op.Name, channel, outcome, time.Since(start))
}
