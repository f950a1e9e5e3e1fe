package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// ServiceName is the NATS micro service name (nats micro ls / info).
const ServiceName = "tool-engine"

// Version is the API version, reported as the micro service version.
const Version = "1.0.0"

// Header names (wire's).
const (
	HeaderChannel        = wire.HeaderChannel
	HeaderActor          = wire.HeaderActor
	HeaderIdempotencyKey = wire.HeaderIdempotencyKey
	HeaderErrorCode      = wire.HeaderErrorCode
	HeaderRetryAfter     = wire.HeaderRetryAfter
)

// RetryAfterSeconds is the Retry-After of busy (429) and unavailable or
// outcome_unknown (503) replies: the in-flight bounds and a lagging
// projection clear within about a second.
const RetryAfterSeconds = 1

// retryAfter is the Retry-After header value of an error reply, "" when
// it has none (#29: 429 and 503 said nothing of when to retry).
func retryAfter(e *APIError) string {
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		return strconv.Itoa(RetryAfterSeconds)
	}
	return ""
}

// Media types of request and reply bodies (wire's).
const (
	MIMEJSON    = wire.MIMEJSON
	MIMEMsgpack = wire.MIMEMsgpack
)

// Operation describes one operation of the API: wire.Operation.
type Operation = wire.Operation

// operation is an Operation with its request type and implementation.
type operation struct {
	Operation
	newReq   func() any
	reqType  reflect.Type
	respType reflect.Type
	call     func(ctx context.Context, a *API, req any, o service.Origin) (any, error)
}

func defOp[Req, Resp any](o Operation, call func(ctx context.Context, a *API, req *Req, o service.Origin) (Resp, error)) *operation {
	return &operation{
		Operation: o,
		newReq:    func() any { return new(Req) },
		reqType:   reflect.TypeFor[Req](),
		respType:  reflect.TypeFor[Resp](),
		call: func(ctx context.Context, a *API, req any, org service.Origin) (any, error) {
			return call(ctx, a, req.(*Req), org)
		},
	}
}

// operations is the one table both transports are built from, over
// wire's routes, so that they and the client cannot drift.
var operations = []*operation{
	defOp(wire.OpAppend, opAppend),
	defOp(wire.OpIntent, opIntent),
	defOp(wire.OpResolve, opResolve),
	defOp(wire.OpHistory, opHistory),
	defOp(wire.OpExplain, opExplain),
	defOp(wire.OpExplainBatch, opExplainBatch),
	defOp(wire.OpResume, opResume),
	defOp(wire.OpBeginTurn, opBeginTurn),
	defOp(wire.OpDiscover, opDiscover),
	defOp(wire.OpDispatch, opDispatch),
	defOp(wire.OpInspect, opInspect),
	defOp(wire.OpCallCheck, opCallCheck),
	defOp(wire.OpCheckpoint, opCheckpoint),
	defOp(wire.OpEndTurn, opEndTurn),
	defOp(wire.OpDelete, opDelete),
	defOp(wire.OpSessions, opSessions),
	defOp(wire.OpRegistry, opRegistry),
	defOp(wire.OpBudget, opBudget),
	defOp(wire.OpRegistryDiff, opRegistryDiff),
}

var opsByName = func() map[string]*operation {
	m := make(map[string]*operation, len(operations))
	for _, op := range operations {
		m[op.Name] = op
	}
	return m
}()

// Operations returns the API's operations in a fixed order (a fresh copy).
func Operations() []Operation {
	out := make([]Operation, len(operations))
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
	// MaxLivePerChannel bounds the live streams (#29) one channel has
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
	// the label "other" (#24 row 6). With Tokens, the tokens' channels.
	HTTPChannels []string
	// EraseChannel is the one channel that may erase sessions (DELETE
	// with erase=true, #30). Default DefaultEraseChannel ("ops").
	EraseChannel string
	// Tokens, when set, authenticate HTTP requests: each needs
	// Authorization: Bearer <token>, and the channel comes from the token
	// (see LoadTokens).
	Tokens *Tokens
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
	if c.SubjectPrefix != "" {
		for _, tok := range strings.Split(c.SubjectPrefix, ".") {
			if err := validToken("subject prefix token", tok); err != nil {
				errs = append(errs, fmt.Errorf("api config: %v", err))
			}
		}
	}
	if c.HTTPChannel != "" {
		if err := validToken("HTTP channel", c.HTTPChannel); err != nil {
			errs = append(errs, fmt.Errorf("api config: %v", err))
		}
	}
	if c.EraseChannel != "" {
		if err := validToken("erase channel", c.EraseChannel); err != nil {
			errs = append(errs, fmt.Errorf("api config: %v", err))
		}
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
		if err := validToken("HTTP channel", ch); err != nil {
			errs = append(errs, fmt.Errorf("api config: %v", err))
		}
	}
	for _, o := range c.Origins {
		if _, err := parseOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("api config: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = "tools.api"
	}
	if c.HTTPChannel == "" {
		c.HTTPChannel = "http"
	}
	if c.EraseChannel == "" {
		c.EraseChannel = DefaultEraseChannel
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.MaxInFlightPerChannel == 0 {
		c.MaxInFlightPerChannel = 32
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	if c.MaxLivePerChannel == 0 {
		c.MaxLivePerChannel = 8
	}
	if c.MaxLive == 0 {
		c.MaxLive = 64
	}
	if c.LiveHeartbeat == 0 {
		c.LiveHeartbeat = wire.LiveHeartbeat
	}
	return c
}

// API serves an engine over HTTP (Handler) and NATS micro (StartMicro).
// It is safe for concurrent use.
type API struct {
	eng *service.Engine
	cfg Config
	lim *limiter

	live     *limiter // live streams (live.go)
	liveCtx  context.Context
	stopLive context.CancelFunc

	budgetMu sync.Mutex
	budget   *deferral.BudgetTable // of budget.RegistryVersion
}

// New returns the API of eng, or the problems of cfg (Config.Validate).
func New(eng *service.Engine, cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	lctx, stop := context.WithCancel(context.Background())
	return &API{eng: eng, cfg: cfg, lim: newLimiter(cfg.MaxInFlightPerChannel, cfg.MaxInFlight),
		live: newLimiter(cfg.MaxLivePerChannel, cfg.MaxLive), liveCtx: lctx, stopLive: stop}, nil
}

// Config returns the configuration in use, defaults filled in.
func (a *API) Config() Config { return a.cfg }

// run executes op with a decoded request, under the request timeout.
func (a *API) run(ctx context.Context, op *operation, req any, o service.Origin) (any, error) {
	if err := a.check(req, &o); err != nil {
		return nil, err
	}
	return a.call(ctx, op, req, o)
}

// check validates the fields every operation shares and fills o.Actor.
func (a *API) check(req any, o *service.Origin) error {
	if s, ok := wire.FieldString(req, "session"); ok {
		if err := validSession(s); err != nil {
			return err
		}
	}
	if p, ok := wire.FieldString(req, "provider"); ok && p != "" && !slices.Contains(service.Providers, p) {
		return badRequest("provider %q is unknown: use one of %s", clip.String(p, clip.Max), strings.Join(service.Providers, ", "))
	}
	if o.Actor == "" {
		o.Actor, _ = wire.FieldString(req, "actor")
	}
	return validActor(o.Actor)
}

// call executes op with a checked request, under the request timeout.
func (a *API) call(ctx context.Context, op *operation, req any, o service.Origin) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.RequestTimeout)
		defer cancel()
	}
	return op.call(ctx, a, req, o)
}

func resolveRequest(profile, provider string, ov *Override, minSeq uint64) (service.ResolveRequest, error) {
	o, err := overrideOf(ov)
	if err != nil {
		return service.ResolveRequest{}, err
	}
	return service.ResolveRequest{Profile: profile, Provider: provider, Override: o, MinSeq: minSeq}, nil
}

func opAppend(ctx context.Context, a *API, r *AppendRequest, o service.Origin) (AppendResponse, error) {
	if len(r.Commands) == 0 {
		return AppendResponse{}, badRequest(`field "commands" is required: give at least one command, e.g. {"type":"ToolsToggled","enabled":true}`)
	}
	res, err := a.eng.ApplyKeyed(ctx, r.Session, o, r.ExpectedSeq, r.EventID, r.Commands...)
	if err != nil {
		return AppendResponse{}, err
	}
	st := res.State
	st.Session = r.Session
	return AppendResponse{Session: r.Session, FirstSeq: res.First, LastSeq: res.Last, Duplicate: res.Duplicate, Retries: res.Retries,
		EventIDs: res.EventIDs, State: viewOf(st)}, nil
}

// bindIdempotencyKey sets an append's event_id from the Idempotency-Key
// header; a header and a body field that differ are refused.
func bindIdempotencyKey(req any, key string) error {
	r, ok := req.(*AppendRequest)
	if !ok || key == "" {
		return nil
	}
	if r.EventID != "" && r.EventID != key {
		return badRequest("%s header %q differs from the body's event_id %q: send one of them", HeaderIdempotencyKey, clip.String(key, clip.Max), clip.String(r.EventID, clip.Max))
	}
	r.EventID = key
	return nil
}

func opIntent(ctx context.Context, a *API, r *IntentRequest, _ service.Origin) (SessionView, error) {
	st, err := a.eng.Session(ctx, r.Session, r.MinSeq)
	if err != nil {
		return SessionView{}, err
	}
	return viewOf(st), nil
}

func opResolve(ctx context.Context, a *API, r *ResolveRequest, o service.Origin) (service.TurnView, error) {
	rr, err := resolveRequest(r.Profile, r.Provider, r.Override, r.MinSeq)
	if err != nil {
		return service.TurnView{}, err
	}
	rr.Channel = o.Channel // #31: the caller's channel policy applies
	return a.eng.Resolve(ctx, r.Session, rr)
}

func opHistory(ctx context.Context, a *API, r *HistoryRequest, o service.Origin) (HistoryResponse, error) {
	return a.history(ctx, r, o.Channel) // paged: see types.go (#24 row 7)
}

func opExplain(ctx context.Context, a *API, r *ExplainRequest, o service.Origin) (service.ExplainResult, error) {
	if r.Tool == "" {
		return service.ExplainResult{}, badRequest(`field "tool" is required: the tool name to explain`)
	}
	if err := events.ValidateToolName(r.Tool); err != nil {
		return service.ExplainResult{}, badRequest("tool: %v", err)
	}
	until, err := parseUntil(r.Until)
	if err != nil {
		return service.ExplainResult{}, err
	}
	rr, err := resolveRequest(r.Profile, "", r.Override, 0)
	if err != nil {
		return service.ExplainResult{}, err
	}
	rr.Channel = o.Channel // #31: explain names the caller's channel policy
	return a.eng.Explain(ctx, r.Session, r.Tool, until, rr)
}

// ExplainBatchResponse is explain-batch's reply: one explanation per
// requested tool, in the request's order (wire.ExplainBatchReply).
type ExplainBatchResponse struct {
	Session      string                  `json:"session"`
	Explanations []service.ExplainResult `json:"explanations"`
}

// opExplainBatch explains up to wire.MaxExplainBatch tools in one request
// (#29: the inspector's explain card asks one request per page, not one
// per tool), each exactly as explain would, under the caller's channel.
func opExplainBatch(ctx context.Context, a *API, r *wire.ExplainBatchRequest, o service.Origin) (ExplainBatchResponse, error) {
	if len(r.Tools) == 0 || len(r.Tools) > wire.MaxExplainBatch {
		return ExplainBatchResponse{}, badRequest(`field "tools" has %d names: give 1 to %d tool names, e.g. {"tools":["bash","grep"]}, and page through longer lists`, len(r.Tools), wire.MaxExplainBatch)
	}
	for i, name := range r.Tools {
		if err := events.ValidateToolName(name); err != nil {
			return ExplainBatchResponse{}, badRequest("tools[%d]: %v", i, err)
		}
	}
	until, err := parseUntil(r.Until)
	if err != nil {
		return ExplainBatchResponse{}, err
	}
	rr, err := resolveRequest(r.Profile, "", r.Override, 0)
	if err != nil {
		return ExplainBatchResponse{}, err
	}
	rr.Channel = o.Channel
	out := ExplainBatchResponse{Session: r.Session, Explanations: make([]service.ExplainResult, 0, len(r.Tools))}
	for _, name := range r.Tools {
		ex, err := a.eng.Explain(ctx, r.Session, name, until, rr)
		if err != nil {
			return ExplainBatchResponse{}, err
		}
		out.Explanations = append(out.Explanations, ex)
	}
	return out, nil
}

func opResume(ctx context.Context, a *API, r *ResumeRequest, o service.Origin) (ResumeResponse, error) {
	rr, err := resolveRequest(r.Profile, "", r.Override, 0)
	if err != nil {
		return ResumeResponse{}, err
	}
	res, err := a.eng.Resume(ctx, r.Session, o, rr)
	if err != nil {
		return ResumeResponse{}, err
	}
	return resumeOf(r.Session, res), nil
}

func opBeginTurn(ctx context.Context, a *API, r *BeginTurnRequest, o service.Origin) (service.TurnView, error) {
	rr, err := resolveRequest(r.Profile, r.Provider, r.Override, 0)
	if err != nil {
		return service.TurnView{}, err
	}
	return a.eng.BeginTurn(ctx, r.Session, o, rr)
}

func opDiscover(ctx context.Context, a *API, r *DiscoverRequest, o service.Origin) (service.DiscoverResult, error) {
	var req deferral.SearchRequest
	switch {
	case len(r.Input) > 0 && len(r.Names) > 0:
		return service.DiscoverResult{}, badRequest(`give "input" (the tool_search call's input object) or "names", not both`)
	case len(r.Input) > 0:
		sr, err := deferral.ParseSearchInput(r.Input)
		if err != nil {
			return service.DiscoverResult{}, badRequest("input: %v", err)
		}
		req = sr
	case len(r.Names) > 0:
		req = deferral.SearchRequest{Names: r.Names}
		if err := req.Validate(); err != nil {
			return service.DiscoverResult{}, badRequest("names: %v", err)
		}
	default:
		return service.DiscoverResult{}, badRequest(`field "input" is required: the tool_search call's input object, e.g. {"query":"browser screenshot"}; or give "names", e.g. ["send_message"]`)
	}
	return a.eng.Discover(ctx, r.Session, o, service.DiscoverRequest{Search: req, Provider: r.Provider, CallID: r.CallID})
}

func opDispatch(ctx context.Context, a *API, r *DispatchRequest, _ service.Origin) (service.TurnView, error) {
	return a.eng.Dispatch(ctx, r.Session, r.Provider)
}

func opInspect(ctx context.Context, a *API, r *TurnRequest, _ service.Origin) (DispatchRecord, error) {
	d, ok, err := a.eng.LastDispatchOf(ctx, r.Session)
	if err != nil {
		return DispatchRecord{}, err
	}
	if !ok {
		return DispatchRecord{}, &APIError{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: "session " + strconv.Quote(r.Session) + " has started no turn: begin and dispatch a turn first (turn.begin, turn.dispatch)"}
	}
	return dispatchOf(r.Session, d), nil
}

// opCallCheck asks, before a tool call executes, whether it may (#26 item
// 3, #31): a refusal is a reply with callable false, not an error.
func opCallCheck(ctx context.Context, a *API, r *CallCheckRequest, o service.Origin) (service.CallCheckResult, error) {
	if r.Tool == "" {
		return service.CallCheckResult{}, badRequest(`field "tool" is required: the name of the tool the model called, e.g. {"tool":"send_message"}`)
	}
	if err := events.ValidateToolName(r.Tool); err != nil {
		return service.CallCheckResult{}, badRequest("tool: %v", err)
	}
	return a.eng.CallCheckAs(ctx, r.Session, r.Tool, o.Channel)
}

func opCheckpoint(ctx context.Context, a *API, r *TurnRequest, o service.Origin) (CheckpointResponse, error) {
	res, err := a.eng.Checkpoint(ctx, r.Session, o)
	if err != nil {
		return CheckpointResponse{}, err
	}
	return CheckpointResponse{Session: r.Session, Seq: res.Seq, Checkpoint: checkpointOf(res.Record, res.Seq)}, nil
}

func opEndTurn(ctx context.Context, a *API, r *TurnRequest, o service.Origin) (CheckpointResponse, error) {
	res, err := a.eng.EndTurn(ctx, r.Session, o)
	if err != nil {
		return CheckpointResponse{}, err
	}
	return CheckpointResponse{Session: r.Session, Seq: res.Seq, Checkpoint: checkpointOf(res.Record, res.Seq)}, nil
}

// opDelete deletes a session (#30), and with erase purges it too.
func opDelete(ctx context.Context, a *API, r *DeleteRequest, o service.Origin) (DeleteResponse, error) {
	if r.Erase {
		return a.erase(ctx, r, o)
	}
	res, err := a.eng.Delete(ctx, r.Session, o, r.Reason)
	if err != nil {
		return DeleteResponse{}, err
	}
	return DeleteResponse{Session: r.Session, Seq: res.Seq}, nil
}

func opSessions(ctx context.Context, a *API, _ *Empty, _ service.Origin) (SessionsResponse, error) {
	list, err := a.eng.Projection().Sessions(ctx)
	if err != nil {
		return SessionsResponse{}, err
	}
	return SessionsResponse{Sessions: nonNil(list)}, nil
}

func opRegistry(_ context.Context, a *API, _ *Empty, _ service.Origin) (RegistryInfo, error) {
	return registryOf(a.eng.Registry()), nil
}

// opRegistryDiff reports what pushing a candidate registry would change
// (#31 item 3); it writes nothing.
func opRegistryDiff(ctx context.Context, a *API, r *RegistryDiffRequest, _ service.Origin) (service.Impact, error) {
	if len(r.Registry) == 0 || string(r.Registry) == "null" {
		return service.Impact{}, badRequest(`field "registry" is required: the candidate registry, the JSON of a registry file (the format of resolver/default_registry.json)`)
	}
	cand, err := resolver.Load(r.Registry)
	if err != nil {
		return service.Impact{}, badRequest("registry: %v", err)
	}
	return a.eng.Impact(ctx, cand)
}

// opBudget measures the live registry once per registry version.
func opBudget(_ context.Context, a *API, _ *Empty, _ service.Origin) (deferral.BudgetTable, error) {
	reg := a.eng.Registry()
	a.budgetMu.Lock()
	defer a.budgetMu.Unlock()
	if a.budget != nil && a.budget.RegistryVersion == reg.Version() {
		return *a.budget, nil
	}
	t, err := deferral.Table(reg)
	if err != nil {
		return deferral.BudgetTable{}, err
	}
	a.budget = &t
	return t, nil
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
