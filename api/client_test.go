package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Client is the Go client (package client) seen with the engine's own
// types (events.Payload commands, wire.TurnView replies), for tests
// that link the engine. Errors from the engine are *APIError; errors.Is
// also matches them against ErrBadRequest and any engine sentinel whose
// service.KindOf maps to their code (service.ErrConflict, ErrNoTurn, ...).
// It is test code now: api's own tests call both transports
// through it; programs use client.Client.
type Client struct {
	c      *client.Client
	onCall func(op string) // tests: count the operations called
}

// ClientOption configures a Client: client.Option.
type ClientOption = client.Option

// Options of a Client: client's.
var (
	WithHTTPClient = client.WithHTTPClient
	WithChannel    = client.WithChannel
	WithToken      = client.WithToken
	WithActor      = client.WithActor
)

// NewClient returns a client of the HTTP gateway at baseURL.
func NewClient(baseURL string, opts ...ClientOption) *Client {
	return &Client{c: client.NewHTTP(baseURL, opts...)}
}

// NewNATSClient returns a client of the NATS micro service over nc
// (channel default "cli").
func NewNATSClient(nc *nats.Conn, opts ...ClientOption) *Client {
	return &Client{c: client.NewNATS(nc, append([]ClientOption{client.WithChannel("cli")}, opts...)...)}
}

// engineError is a reply error that errors.Is also matches against the
// engine's sentinels of its code.
type engineError struct{ e *wire.Error }

func (e engineError) Error() string { return e.e.Error() }
func (e engineError) Unwrap() error { return e.e }

func (e engineError) Is(target error) bool {
	k := service.KindOf(target)
	if target == ErrBadRequest {
		k = service.KindInvalid
	}
	return k != service.KindInternal && kindCodes[k].code == e.e.Code
}

func call[Out any](ctx context.Context, c *Client, op wire.Operation, req any) (Out, error) {
	var out Out
	if c.onCall != nil {
		c.onCall(op.Name)
	}
	err := c.c.Do(ctx, op, req, &out)
	var we *wire.Error
	if errors.As(err, &we) {
		err = engineError{we}
	}
	return out, err
}

// AppendKeyed is Append with an idempotency key.
func (c *Client) AppendKeyed(ctx context.Context, session, key string, expected *uint64, cmds ...events.Payload) (wire.AppendReply, error) {
	return call[wire.AppendReply](ctx, c, wire.OpAppend, &service.AppendRequest{Session: session, ExpectedSeq: expected, Commands: cmds, EventID: key})
}

// Append appends commands to a session.
func (c *Client) Append(ctx context.Context, session string, expected *uint64, cmds ...events.Payload) (wire.AppendReply, error) {
	return c.AppendKeyed(ctx, session, "", expected, cmds...)
}

// Intent reads a session's stored state; minSeq > 0 reads your writes.
func (c *Client) Intent(ctx context.Context, session string, minSeq uint64) (wire.Session, error) {
	return call[wire.Session](ctx, c, wire.OpIntent, &wire.IntentRequest{Session: session, MinSeq: minSeq})
}

// Resolve resolves a session's tools.
func (c *Client) Resolve(ctx context.Context, req wire.ResolveRequest) (wire.TurnView, error) {
	return call[wire.TurnView](ctx, c, wire.OpResolve, &req)
}

// HistoryPage returns one page of a session's timeline.
func (c *Client) HistoryPage(ctx context.Context, req wire.HistoryRequest) (wire.HistoryOf[*service.Command], error) {
	return call[wire.HistoryOf[*service.Command]](ctx, c, wire.OpHistory, &req)
}

// HistoryPages calls fn with each page of a session's timeline up to
// req.Until, from the one after req.AfterSeq to the last; it stops at the
// first error of a call or of fn.
func (c *Client) HistoryPages(ctx context.Context, req wire.HistoryRequest, fn func(wire.HistoryOf[*service.Command]) error) error {
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
// req.AfterSeq), page by page; More is false.
func (c *Client) History(ctx context.Context, req wire.HistoryRequest) (wire.HistoryOf[*service.Command], error) {
	var out wire.HistoryOf[*service.Command]
	err := c.HistoryPages(ctx, req, func(page wire.HistoryOf[*service.Command]) error {
		entries := append(out.Entries, page.Entries...)
		out = page
		out.Entries = entries
		return nil
	})
	if err != nil {
		return wire.HistoryOf[*service.Command]{}, err
	}
	out.More, out.NextAfterSeq = false, 0
	if out.Entries == nil {
		out.Entries = []wire.HistoryEntryOf[*service.Command]{}
	}
	return out, nil
}

// Explain says why req.Tool is or is not in the session's set.
func (c *Client) Explain(ctx context.Context, req wire.ExplainRequest) (wire.Explanation, error) {
	return call[wire.Explanation](ctx, c, wire.OpExplain, &req)
}

// ExplainBatch explains each of req.Tools in one request.
func (c *Client) ExplainBatch(ctx context.Context, req wire.ExplainBatchRequest) (wire.ExplainBatchReply, error) {
	return call[wire.ExplainBatchReply](ctx, c, wire.OpExplainBatch, &req)
}

// Checkpoint records a safe point of the session's open turn.
func (c *Client) Checkpoint(ctx context.Context, session string) (wire.CheckpointReply, error) {
	return call[wire.CheckpointReply](ctx, c, wire.OpCheckpoint, &wire.TurnRequest{Session: session})
}

// Resume resumes a session after a crash.
func (c *Client) Resume(ctx context.Context, req wire.ResumeRequest) (wire.ResumeReply, error) {
	return call[wire.ResumeReply](ctx, c, wire.OpResume, &req)
}

// BeginTurn begins the session's next turn.
func (c *Client) BeginTurn(ctx context.Context, req wire.BeginTurnRequest) (wire.TurnView, error) {
	return call[wire.TurnView](ctx, c, wire.OpBeginTurn, &req)
}

// Discover is tool_search in the open turn, for exact names.
func (c *Client) Discover(ctx context.Context, session, provider string, names ...string) (wire.DiscoverReply, error) {
	return call[wire.DiscoverReply](ctx, c, wire.OpDiscover, &wire.DiscoverRequest{Session: session, Names: names, Provider: provider})
}

// ToolSearch is tool_search in the open turn with the model's input.
func (c *Client) ToolSearch(ctx context.Context, session, provider string, input json.RawMessage) (wire.DiscoverReply, error) {
	return call[wire.DiscoverReply](ctx, c, wire.OpDiscover, &wire.DiscoverRequest{Session: session, Input: input, Provider: provider})
}

// Dispatch returns the provider request of the open turn.
func (c *Client) Dispatch(ctx context.Context, session, provider string) (wire.TurnView, error) {
	return call[wire.TurnView](ctx, c, wire.OpDispatch, &wire.DispatchRequest{Session: session, Provider: provider})
}

// LastDispatch returns the classification of the session's last dispatch.
func (c *Client) LastDispatch(ctx context.Context, session string) (wire.DispatchRecord, error) {
	return call[wire.DispatchRecord](ctx, c, wire.OpInspect, &wire.TurnRequest{Session: session})
}

// CallCheck asks whether a call of tool may execute in the open turn.
func (c *Client) CallCheck(ctx context.Context, session, tool string) (wire.CallCheckReply, error) {
	return call[wire.CallCheckReply](ctx, c, wire.OpCallCheck, &wire.CallCheckRequest{Session: session, Tool: tool})
}

// RegistryDiff compares a candidate registry with the live one.
func (c *Client) RegistryDiff(ctx context.Context, registry json.RawMessage) (wire.RegistryImpact, error) {
	return call[wire.RegistryImpact](ctx, c, wire.OpRegistryDiff, &wire.RegistryDiffRequest{Registry: registry})
}

// EndTurn ends the open turn at a safe point.
func (c *Client) EndTurn(ctx context.Context, session string) (wire.CheckpointReply, error) {
	return call[wire.CheckpointReply](ctx, c, wire.OpEndTurn, &wire.TurnRequest{Session: session})
}

// Delete deletes (or, with req.Erase, erases) a session.
func (c *Client) Delete(ctx context.Context, req wire.DeleteRequest) (wire.DeleteReply, error) {
	return call[wire.DeleteReply](ctx, c, wire.OpDelete, &req)
}

// Compact compacts a session (the erase channel only).
func (c *Client) Compact(ctx context.Context, req wire.CompactRequest) (wire.CompactReply, error) {
	return call[wire.CompactReply](ctx, c, wire.OpCompact, &req)
}

// Sessions lists the sessions that have a view.
func (c *Client) Sessions(ctx context.Context) ([]string, error) {
	out, err := call[wire.SessionList](ctx, c, wire.OpSessions, &wire.Empty{})
	return out.Sessions, err
}

// Registry describes the live registry.
func (c *Client) Registry(ctx context.Context) (wire.RegistryInfo, error) {
	return call[wire.RegistryInfo](ctx, c, wire.OpRegistry, &wire.Empty{})
}

// Budget returns the live registry's token table.
func (c *Client) Budget(ctx context.Context) (deferral.BudgetTable, error) {
	return call[deferral.BudgetTable](ctx, c, wire.OpBudget, &wire.Empty{})
}
