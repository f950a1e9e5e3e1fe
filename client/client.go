package client

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
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/wire"
)

// Default addresses of `engine serve`.
const (
	// DefaultURL is the engine's default HTTP address.
	DefaultURL = "http://127.0.0.1:7420"
	// DefaultNATSURL is the embedded NATS server's default address.
	DefaultNATSURL = "nats://127.0.0.1:4222"
	// DefaultSubjectPrefix is the default prefix of the API's subjects.
	DefaultSubjectPrefix = "tools.api"
	// DefaultChannel is the channel of a NATS client without WithChannel.
	DefaultChannel = "client"
	// DefaultTimeout bounds a request whose context has no deadline.
	DefaultTimeout = 30 * time.Second
)

// Client calls the engine's API over HTTP (NewHTTP) or NATS (NewNATS).
type Client struct {
	t       transport
	actor   string
	timeout time.Duration
}

type transport interface {
	call(ctx context.Context, o wire.Operation, req, out any, actor string) error
}

// Option configures a Client.
type Option func(*config)

type config struct {
	hc      *http.Client
	channel string
	actor   string
	token   string
	prefix  string
	timeout time.Duration
}

// WithHTTPClient sets the HTTP client (default http.DefaultClient).
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.hc = hc } }

// WithChannel sets the writing channel: the Engine-Channel header over
// HTTP (default: none, the server's default channel), the subject token
// over NATS (default DefaultChannel).
func WithChannel(ch string) Option { return func(c *config) { c.channel = ch } }

// WithActor sets the Engine-Actor header of every request: the user the
// events this client writes record.
func WithActor(actor string) Option { return func(c *config) { c.actor = actor } }

// WithToken sets the bearer token of HTTP requests, for an engine serving
// with --http-tokens; the channel is then the token's.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithSubjectPrefix sets the NATS subject prefix (default
// DefaultSubjectPrefix).
func WithSubjectPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithTimeout bounds each request whose context has no deadline (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

func newConfig(opts []Option) config {
	c := config{hc: http.DefaultClient, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// NewHTTP returns a client of the HTTP API at baseURL ("" is DefaultURL;
// a URL without a scheme gets http://).
func NewHTTP(baseURL string, opts ...Option) *Client {
	c := newConfig(opts)
	if baseURL == "" {
		baseURL = DefaultURL
	}
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	return &Client{t: &httpTransport{base: strings.TrimSuffix(baseURL, "/"), hc: c.hc, channel: c.channel, token: c.token},
		actor: c.actor, timeout: c.timeout}
}

// NewNATS returns a client of the engine's NATS micro service over nc.
func NewNATS(nc *nats.Conn, opts ...Option) *Client {
	c := newConfig(opts)
	if c.channel == "" {
		c.channel = DefaultChannel
	}
	if c.prefix == "" {
		c.prefix = DefaultSubjectPrefix
	}
	return &Client{t: &natsTransport{nc: nc, prefix: c.prefix, channel: c.channel}, actor: c.actor, timeout: c.timeout}
}

// Do calls one operation of wire's table: req is any value whose JSON is
// the operation's request object (the session, and the tool of explain,
// go into the HTTP path), and the reply's JSON is decoded into out. The
// typed methods are Do with wire's types; an engine-side caller may pass
// its own types of the same JSON. Errors are as for the typed methods.
func (c *Client) Do(ctx context.Context, o wire.Operation, req, out any) error {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return c.t.call(ctx, o, req, out, c.actor)
}

// Append appends intent commands to a session, atomically (operation
// append). opts set the request's optional fields per call (ExpectSeq,
// IdempotencyKey) instead of its pointer fields, which still work.
func (c *Client) Append(ctx context.Context, req AppendRequest, opts ...AppendOption) (AppendReply, error) {
	for _, o := range opts {
		o(&req)
	}
	var out AppendReply
	return out, c.Do(ctx, wire.OpAppend, &req, &out)
}

// Intent reads a session's stored intent, loaded tools, turn and last
// checkpoint; MinSeq reads your writes.
func (c *Client) Intent(ctx context.Context, req IntentRequest) (Session, error) {
	var out Session
	return out, c.Do(ctx, wire.OpIntent, &req, &out)
}

// Resolve resolves a session's tools for a provider request.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (TurnView, error) {
	var out TurnView
	return out, c.Do(ctx, wire.OpResolve, &req, &out)
}

// HistoryPage returns one page of a session's event timeline: the
// entries after req.AfterSeq, at most req.Limit; when More is set the next
// page is after NextAfterSeq.
func (c *Client) HistoryPage(ctx context.Context, req HistoryRequest) (History, error) {
	var out History
	return out, c.Do(ctx, wire.OpHistory, &req, &out)
}

// History returns a session's whole event timeline, read page by page
// (each call within the client's timeout); the state is the one after the
// last entry.
func (c *Client) History(ctx context.Context, req HistoryRequest) (History, error) {
	var all []HistoryEntry
	for {
		page, err := c.HistoryPage(ctx, req)
		if err != nil {
			return History{}, err
		}
		all = append(all, page.Entries...)
		if !page.More {
			page.Entries = all
			if page.Entries == nil {
				page.Entries = []HistoryEntry{}
			}
			return page, nil
		}
		if page.NextAfterSeq <= req.AfterSeq {
			return History{}, fmt.Errorf("history of %q: the page after sequence %d says more but its next_after_seq is %d", req.Session, req.AfterSeq, page.NextAfterSeq)
		}
		req.AfterSeq = page.NextAfterSeq
	}
}

// Explain says why a tool is or is not in a session's set.
func (c *Client) Explain(ctx context.Context, req ExplainRequest) (Explanation, error) {
	var out Explanation
	return out, c.Do(ctx, wire.OpExplain, &req, &out)
}

// ExplainBatch explains each of req.Tools (1 to wire.MaxExplainBatch) in
// one request: for each, what Explain answers, in the request's order.
func (c *Client) ExplainBatch(ctx context.Context, req ExplainBatchRequest) (ExplainBatchReply, error) {
	var out ExplainBatchReply
	return out, c.Do(ctx, wire.OpExplainBatch, &req, &out)
}

// Resume resumes a session after a crash from its last checkpoint.
func (c *Client) Resume(ctx context.Context, req ResumeRequest) (ResumeReply, error) {
	var out ResumeReply
	return out, c.Do(ctx, wire.OpResume, &req, &out)
}

// TurnBegin begins the session's next turn and freezes its tools
// (operation turn-begin).
func (c *Client) TurnBegin(ctx context.Context, req BeginTurnRequest) (TurnView, error) {
	var out TurnView
	return out, c.Do(ctx, wire.OpBeginTurn, &req, &out)
}

// TurnDiscover is tool_search in the open turn (operation turn-discover):
// pass the model's input object as Input, or Names.
func (c *Client) TurnDiscover(ctx context.Context, req DiscoverRequest) (DiscoverReply, error) {
	var out DiscoverReply
	return out, c.Do(ctx, wire.OpDiscover, &req, &out)
}

// TurnDispatch returns the provider request of the open turn and records
// its classification (operation turn-dispatch).
func (c *Client) TurnDispatch(ctx context.Context, req DispatchRequest) (TurnView, error) {
	var out TurnView
	return out, c.Do(ctx, wire.OpDispatch, &req, &out)
}

// TurnInspect returns the classification of the session's last dispatch
// (operation turn-inspect).
func (c *Client) TurnInspect(ctx context.Context, req TurnRequest) (DispatchRecord, error) {
	var out DispatchRecord
	return out, c.Do(ctx, wire.OpInspect, &req, &out)
}

// TurnCheckpoint records a checkpoint of the session's open turn
// (operation turn-checkpoint).
func (c *Client) TurnCheckpoint(ctx context.Context, req TurnRequest) (CheckpointReply, error) {
	var out CheckpointReply
	return out, c.Do(ctx, wire.OpCheckpoint, &req, &out)
}

// TurnEnd ends the open turn at a safe point: one TurnEnded event carrying
// the checkpoint (operation turn-end).
func (c *Client) TurnEnd(ctx context.Context, req TurnRequest) (CheckpointReply, error) {
	var out CheckpointReply
	return out, c.Do(ctx, wire.OpEndTurn, &req, &out)
}

// SessionCompact rolls a session's log up into one SessionCompacted that
// folds to the same state, and purges the events it replaces (operation
// session-compact; the engine's erase channel only). Reply.Already: it was
// compact already.
func (c *Client) SessionCompact(ctx context.Context, req CompactRequest) (CompactReply, error) {
	var out CompactReply
	return out, c.Do(ctx, wire.OpCompact, &req, &out)
}

// SessionDelete deletes a session for good (operation session-delete):
// reads of it then fail with ErrDeleted, writes too, and the id starts no
// new session. With req.Erase its events are purged as well (the engine's
// erase channel only; others get ErrForbidden).
func (c *Client) SessionDelete(ctx context.Context, req DeleteRequest) (DeleteReply, error) {
	var out DeleteReply
	return out, c.Do(ctx, wire.OpDelete, &req, &out)
}

// Sessions lists the sessions that have a view.
func (c *Client) Sessions(ctx context.Context) (SessionList, error) {
	var out SessionList
	return out, c.Do(ctx, wire.OpSessions, &struct{}{}, &out)
}

// Registry describes the live registry.
func (c *Client) Registry(ctx context.Context) (RegistryInfo, error) {
	var out RegistryInfo
	return out, c.Do(ctx, wire.OpRegistry, &wire.RegistryRequest{}, &out)
}

// Budget returns the live registry's per-turn token table.
func (c *Client) Budget(ctx context.Context) (BudgetTable, error) {
	var out BudgetTable
	return out, c.Do(ctx, wire.OpBudget, &struct{}{}, &out)
}

// TurnCallCheck asks, before a tool call the model made executes, whether
// req.Tool may run now in the session's open turn for the client's
// channel (operation turn-call-check): a refusal is a reply with Callable
// false and a Reason ("disabled", "not_in_turn", "not_loaded",
// "unknown", "ask", "denied"), not an error; outside a turn the error is
// ErrNoTurn.
func (c *Client) TurnCallCheck(ctx context.Context, req CallCheckRequest) (CallCheckReply, error) {
	var out CallCheckReply
	return out, c.Do(ctx, wire.OpCallCheck, &req, &out)
}

// RegistryDiff compares a candidate registry (req.Registry, the JSON of a
// registry file) with the live one and reports what pushing it would
// change (operation registry-diff): the tools, presets and profiles, the
// sessions whose tools prefix changes and the checkpoints that lose tools
// on resume. It writes nothing.
func (c *Client) RegistryDiff(ctx context.Context, req RegistryDiffRequest) (RegistryImpact, error) {
	var out RegistryImpact
	return out, c.Do(ctx, wire.OpRegistryDiff, &req, &out)
}

// fields returns a request's JSON object as a map.
func fields(req any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

type httpTransport struct {
	base, channel, token string
	hc                   *http.Client
}

func (t *httpTransport) call(ctx context.Context, o wire.Operation, req, out any, actor string) error {
	m, err := fields(req)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", o.Name, err)
	}
	path := o.Path
	for _, name := range []string{"session", "tool"} {
		if !strings.Contains(path, "{"+name+"}") {
			continue
		}
		var v string
		if raw, ok := m[name]; ok {
			_ = json.Unmarshal(raw, &v)
		}
		if v == "" {
			return &Error{Status: http.StatusBadRequest, Code: wire.CodeInvalid, Message: o.Name + ": field " + strconv.Quote(name) + " is required"}
		}
		path = strings.Replace(path, "{"+name+"}", url.PathEscape(v), 1)
		delete(m, name)
	}
	var body io.Reader
	if o.Method() == http.MethodPost {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("%s: encode request: %w", o.Name, err)
		}
		body = bytes.NewReader(b)
	} else if len(m) > 0 {
		q := url.Values{}
		for k, raw := range m {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw) // numbers, booleans and objects as JSON text
			}
			q.Set(k, s)
		}
		path += "?" + q.Encode()
	}
	hr, err := http.NewRequestWithContext(ctx, o.Method(), t.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Name, err)
	}
	hr.Header.Set("Accept", wire.MIMEJSON)
	if body != nil {
		hr.Header.Set("Content-Type", wire.MIMEJSON)
	}
	if t.channel != "" && t.token == "" {
		hr.Header.Set(wire.HeaderChannel, t.channel)
	}
	if t.token != "" {
		hr.Header.Set("Authorization", "Bearer "+t.token)
	}
	if actor != "" {
		hr.Header.Set(wire.HeaderActor, actor)
	}
	resp, err := t.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.Method(), t.base+path, err)
	}
	defer resp.Body.Close()
	data, err := readReply(resp)
	if err != nil {
		return fmt.Errorf("%s %s: read reply: %w", o.Method(), path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return wire.DecodeError(resp.StatusCode, data, resp.Header.Get(wire.HeaderRetryAfter))
	}
	if err := DecodeReply(data, out); err != nil {
		return fmt.Errorf("%s %s: decode reply: %w", o.Method(), path, err)
	}
	return nil
}

type natsTransport struct {
	nc              *nats.Conn
	prefix, channel string
}

func (t *natsTransport) call(ctx context.Context, o wire.Operation, req, out any, actor string) error {
	subj := t.prefix + "." + t.channel + "." + o.Subject
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", o.Name, err)
	}
	msg := nats.NewMsg(subj)
	msg.Data = b
	msg.Header.Set("Content-Type", wire.MIMEJSON)
	if actor != "" {
		msg.Header.Set(wire.HeaderActor, actor)
	}
	resp, err := t.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return &Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable,
			Message: "no engine answers on " + subj + ": is `engine serve` running, and may this user publish there?"}
	}
	if err != nil {
		return fmt.Errorf("request %s: %w", subj, err)
	}
	if code := resp.Header.Get("Nats-Service-Error-Code"); code != "" {
		status, _ := strconv.Atoi(code)
		if status == 0 {
			status = http.StatusInternalServerError
		}
		if len(resp.Data) == 0 {
			e := wire.DecodeError(status, nil, resp.Header.Get(wire.HeaderRetryAfter))
			e.Code, e.Message = resp.Header.Get(wire.HeaderErrorCode), resp.Header.Get("Nats-Service-Error")
			return e
		}
		return wire.DecodeError(status, resp.Data, resp.Header.Get(wire.HeaderRetryAfter))
	}
	if err := DecodeReply(resp.Data, out); err != nil {
		return fmt.Errorf("request %s: decode reply: %w", subj, err)
	}
	return nil
}

// maxReply bounds a reply body the client reads.
const maxReply = 64 << 20

// readReply reads a reply body of at most maxReply bytes into one buffer
// of its Content-Length when the server sent one (io.ReadAll's doubling
// would allocate about 94 KB for a 40 KB turn view).
func readReply(resp *http.Response) ([]byte, error) {
	body := io.LimitReader(resp.Body, maxReply)
	if n := resp.ContentLength; n > 0 && n <= maxReply {
		var b bytes.Buffer
		b.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead spare before it reads EOF
		_, err := b.ReadFrom(body)
		return b.Bytes(), err
	}
	return io.ReadAll(body)
}
