package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
)

// Client calls the API, over HTTP (NewClient) or NATS (NewNATSClient),
// for programs that already link the engine; a backend that only talks to
// the engine should import the light package client instead (it links
// neither nats-server nor the tokenizer). One method per operation. Errors from the engine are *APIError
// (errors.Is matches service.ErrConflict, service.ErrNoTurn and
// ErrBadRequest); transport failures are wrapped as they come. A Client is
// safe for concurrent use.
type Client struct {
	t     transport
	actor string
}

// ClientOption configures a Client.
type ClientOption func(*clientConfig)

type clientConfig struct {
	http    *http.Client
	channel string
	actor   string
	prefix  string
	token   string
}

// WithHTTPClient sets the HTTP client (default http.DefaultClient).
func WithHTTPClient(c *http.Client) ClientOption { return func(o *clientConfig) { o.http = c } }

// WithChannel sets the channel: the Engine-Channel header over HTTP, the
// subject token over NATS (default "cli").
func WithChannel(ch string) ClientOption { return func(o *clientConfig) { o.channel = ch } }

// WithToken sets the bearer token of HTTP requests (an engine serving
// with a tokens file needs one; the channel is then the token's).
func WithToken(token string) ClientOption { return func(o *clientConfig) { o.token = token } }

// WithActor sets the Engine-Actor header of every request.
func WithActor(actor string) ClientOption { return func(o *clientConfig) { o.actor = actor } }

// WithSubjectPrefix sets the NATS subject prefix (default "tools.api").
func WithSubjectPrefix(p string) ClientOption { return func(o *clientConfig) { o.prefix = p } }

func newConfig(opts []ClientOption) clientConfig {
	c := clientConfig{http: http.DefaultClient}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// NewClient returns a client of the HTTP gateway at baseURL (e.g.
// "http://127.0.0.1:7420", the default of engine serve). Without WithChannel it sends no
// Engine-Channel header, so the server's default channel applies.
func NewClient(baseURL string, opts ...ClientOption) *Client {
	c := newConfig(opts)
	return &Client{t: &httpTransport{base: strings.TrimSuffix(baseURL, "/"), hc: c.http, channel: c.channel, token: c.token}, actor: c.actor}
}

// NewNATSClient returns a client of the NATS micro service over nc,
// publishing to <prefix>.<channel>.<op> (channel default "cli").
func NewNATSClient(nc *nats.Conn, opts ...ClientOption) *Client {
	c := newConfig(opts)
	if c.channel == "" {
		c.channel = "cli"
	}
	if c.prefix == "" {
		c.prefix = Config{}.withDefaults().SubjectPrefix
	}
	return &Client{t: &natsTransport{nc: nc, prefix: c.prefix, channel: c.channel}, actor: c.actor}
}

type transport interface {
	call(ctx context.Context, op *operation, req any, actor string, out any) error
}

func (c *Client) do(ctx context.Context, name string, req, out any) error {
	op := opsByName[name]
	return c.t.call(ctx, op, req, c.actor, out)
}

// AppendKeyed is Append with an idempotency key (a ULID, see "Safe
// retries" in the package doc): a retry with the same key returns the
// original sequences and writes nothing.
func (c *Client) AppendKeyed(ctx context.Context, session, key string, expected *uint64, cmds ...events.Payload) (AppendResponse, error) {
	var out AppendResponse
	err := c.do(ctx, "append", &AppendRequest{Session: session, ExpectedSeq: expected, Commands: cmds, EventID: key}, &out)
	return out, err
}

// Append appends commands to a session; expected, when not nil, is the
// sequence the session must be at.
func (c *Client) Append(ctx context.Context, session string, expected *uint64, cmds ...events.Payload) (AppendResponse, error) {
	var out AppendResponse
	err := c.do(ctx, "append", &AppendRequest{Session: session, ExpectedSeq: expected, Commands: cmds}, &out)
	return out, err
}

// Intent reads a session's stored state; minSeq > 0 reads your writes.
func (c *Client) Intent(ctx context.Context, session string, minSeq uint64) (SessionView, error) {
	var out SessionView
	err := c.do(ctx, "intent", &IntentRequest{Session: session, MinSeq: minSeq}, &out)
	return out, err
}

// Resolve resolves a session's tools.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (service.TurnView, error) {
	var out service.TurnView
	err := c.do(ctx, "resolve", &req, &out)
	return out, err
}

// HistoryPage returns one page of a session's timeline: the entries after
// req.AfterSeq, at most req.Limit (default DefaultHistoryPage); when More
// is set, the next page is after NextAfterSeq.
func (c *Client) HistoryPage(ctx context.Context, req HistoryRequest) (HistoryResponse, error) {
	var out HistoryResponse
	err := c.do(ctx, "history", &req, &out)
	return out, err
}

// HistoryPages calls fn with each page of a session's timeline up to
// req.Until, from the one after req.AfterSeq to the last; it stops at the
// first error of a call or of fn. Memory is one page at a time.
func (c *Client) HistoryPages(ctx context.Context, req HistoryRequest, fn func(HistoryResponse) error) error {
	for {
		page, err := c.HistoryPage(ctx, req)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if !page.More {
			return nil
		}
		if page.NextAfterSeq <= req.AfterSeq {
			return fmt.Errorf("history of %q: the page after sequence %d says more but its next_after_seq is %d", req.Session, req.AfterSeq, page.NextAfterSeq)
		}
		req.AfterSeq = page.NextAfterSeq
	}
}

// History returns a session's whole timeline up to req.Until (from after
// req.AfterSeq), reading it page by page (HistoryPages): every entry, and
// the state after the last one; More is false. It holds the whole timeline
// in memory: for a long session use HistoryPages.
func (c *Client) History(ctx context.Context, req HistoryRequest) (HistoryResponse, error) {
	var out HistoryResponse
	err := c.HistoryPages(ctx, req, func(page HistoryResponse) error {
		entries := append(out.Entries, page.Entries...)
		out = page
		out.Entries = entries
		return nil
	})
	if err != nil {
		return HistoryResponse{}, err
	}
	out.More, out.NextAfterSeq = false, 0
	if out.Entries == nil {
		out.Entries = []HistoryEntry{}
	}
	return out, nil
}

// Explain says why req.Tool is or is not in the session's set.
func (c *Client) Explain(ctx context.Context, req ExplainRequest) (service.ExplainResult, error) {
	var out service.ExplainResult
	err := c.do(ctx, "explain", &req, &out)
	return out, err
}

// Checkpoint records a safe point of the session's open turn.
func (c *Client) Checkpoint(ctx context.Context, session string) (CheckpointResponse, error) {
	var out CheckpointResponse
	err := c.do(ctx, "turn-checkpoint", &TurnRequest{Session: session}, &out)
	return out, err
}

// Resume resumes a session after a crash.
func (c *Client) Resume(ctx context.Context, req ResumeRequest) (ResumeResponse, error) {
	var out ResumeResponse
	err := c.do(ctx, "resume", &req, &out)
	return out, err
}

// BeginTurn begins the session's next turn.
func (c *Client) BeginTurn(ctx context.Context, req BeginTurnRequest) (service.TurnView, error) {
	var out service.TurnView
	err := c.do(ctx, "turn-begin", &req, &out)
	return out, err
}

// Discover is tool_search in the open turn, for exact names.
func (c *Client) Discover(ctx context.Context, session, provider string, names ...string) (service.DiscoverResult, error) {
	var out service.DiscoverResult
	err := c.do(ctx, "turn-discover", &DiscoverRequest{Session: session, Names: names, Provider: provider}, &out)
	return out, err
}

// ToolSearch is tool_search in the open turn with the model's input object
// as it wrote it: {"names":[...]}, {"query":"..."}, {"regex":"..."},
// "max_results".
func (c *Client) ToolSearch(ctx context.Context, session, provider string, input json.RawMessage) (service.DiscoverResult, error) {
	var out service.DiscoverResult
	err := c.do(ctx, "turn-discover", &DiscoverRequest{Session: session, Input: input, Provider: provider}, &out)
	return out, err
}

// Dispatch returns the provider request of the open turn.
func (c *Client) Dispatch(ctx context.Context, session, provider string) (service.TurnView, error) {
	var out service.TurnView
	err := c.do(ctx, "turn-dispatch", &DispatchRequest{Session: session, Provider: provider}, &out)
	return out, err
}

// LastDispatch returns the classification of the session's last dispatch.
func (c *Client) LastDispatch(ctx context.Context, session string) (DispatchRecord, error) {
	var out DispatchRecord
	err := c.do(ctx, "turn-inspect", &TurnRequest{Session: session}, &out)
	return out, err
}

// EndTurn ends the open turn at a safe point.
func (c *Client) EndTurn(ctx context.Context, session string) (CheckpointResponse, error) {
	var out CheckpointResponse
	err := c.do(ctx, "turn-end", &TurnRequest{Session: session}, &out)
	return out, err
}

// Sessions lists the sessions that have a view.
func (c *Client) Sessions(ctx context.Context) ([]string, error) {
	var out SessionsResponse
	err := c.do(ctx, "sessions", &Empty{}, &out)
	return out.Sessions, err
}

// Registry describes the live registry.
func (c *Client) Registry(ctx context.Context) (RegistryInfo, error) {
	var out RegistryInfo
	err := c.do(ctx, "registry", &Empty{}, &out)
	return out, err
}

// Budget returns the live registry's token table.
func (c *Client) Budget(ctx context.Context) (deferral.BudgetTable, error) {
	var out deferral.BudgetTable
	err := c.do(ctx, "budget", &Empty{}, &out)
	return out, err
}

type httpTransport struct {
	base    string
	hc      *http.Client
	channel string
	token   string
}

func (t *httpTransport) call(ctx context.Context, op *operation, req any, actor string, out any) error {
	names := pathNames(op.Path)
	path := op.Path
	for _, n := range names {
		v, _ := fieldString(req, n)
		if v == "" {
			return badRequest("%s: %s is required", op.Name, n)
		}
		path = strings.Replace(path, "{"+n+"}", url.PathEscape(v), 1)
	}
	method := op.Methods[len(op.Methods)-1] // POST where both are served
	var body io.Reader
	if method == http.MethodPost {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("%s: encode request: %w", op.Name, err)
		}
		body = bytes.NewReader(b)
	} else {
		q, err := encodeQuery(req, names)
		if err != nil {
			return fmt.Errorf("%s: %w", op.Name, err)
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
	}
	hr, err := http.NewRequestWithContext(ctx, method, t.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op.Name, err)
	}
	hr.Header.Set("Accept", MIMEJSON)
	if body != nil {
		hr.Header.Set("Content-Type", MIMEJSON)
	}
	if t.channel != "" {
		hr.Header.Set(HeaderChannel, t.channel)
	}
	if t.token != "" {
		hr.Header.Set("Authorization", "Bearer "+t.token)
	}
	if actor != "" {
		hr.Header.Set(HeaderActor, actor)
	}
	resp, err := t.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read reply: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return replyError(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode reply: %w", method, path, err)
	}
	return nil
}

// replyError turns an error reply into an *APIError.
func replyError(status int, data []byte) error {
	var env errorEnvelope
	if err := json.Unmarshal(data, &env); err == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.Status = status
		return env.Error
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &APIError{Status: status, Code: codeForStatus(status), Message: clipString(msg)}
}

type natsTransport struct {
	nc      *nats.Conn
	prefix  string
	channel string
}

func (t *natsTransport) call(ctx context.Context, op *operation, req any, actor string, out any) error {
	subj := t.prefix + "." + t.channel + "." + op.Subject
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", op.Name, err)
	}
	msg := nats.NewMsg(subj)
	msg.Data = b
	msg.Header.Set("Accept", MIMEJSON)
	msg.Header.Set("Content-Type", MIMEJSON)
	if actor != "" {
		msg.Header.Set(HeaderActor, actor)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, Config{}.withDefaults().RequestTimeout)
		defer cancel()
	}
	resp, err := t.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "no engine answers on " + subj + ": is `engine serve` running, and may this user publish there?"}
	}
	if err != nil {
		return fmt.Errorf("request %s: %w", subj, err)
	}
	if code := resp.Header.Get(micro.ErrorCodeHeader); code != "" {
		status, _ := strconv.Atoi(code)
		if status == 0 {
			status = http.StatusInternalServerError
		}
		if len(resp.Data) == 0 {
			return &APIError{Status: status, Code: codeForStatus(status), Message: resp.Header.Get(micro.ErrorHeader)}
		}
		return replyError(status, resp.Data)
	}
	if err := json.Unmarshal(resp.Data, out); err != nil {
		return fmt.Errorf("request %s: decode reply: %w", subj, err)
	}
	return nil
}
