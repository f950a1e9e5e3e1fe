package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// engineClient is client.Client seen with the engine's own types
// (events.Payload commands, wire.TurnView replies): what api.Client
// was before it left the api package, for the tests that
// compare replies with the engine's types. Errors from the engine are
// *wire.Error; errors.Is also matches them against api.ErrBadRequest and
// any engine sentinel whose service.KindOf maps to their code
// (service.ErrConflict, ErrNoTurn, ...).
type engineClient struct {
	c *client.Client
}

// newEngineClient returns a client of the HTTP gateway at baseURL.
func newEngineClient(baseURL string, opts ...client.Option) *engineClient {
	return &engineClient{c: client.NewHTTP(baseURL, opts...)}
}

// newNATSEngineClient returns a client of the NATS micro service over nc
// (channel default "cli").
func newNATSEngineClient(nc *nats.Conn, opts ...client.Option) *engineClient {
	return &engineClient{c: client.NewNATS(nc, append([]client.Option{client.WithChannel("cli")}, opts...)...)}
}

// kindCode is the wire code api replies with for an engine error kind
// (api/errors.go's table; api.ErrBadRequest is invalid).
var kindCode = map[service.Kind]string{
	service.KindConflict:       wire.CodeConflict,
	service.KindNoTurn:         wire.CodeNoTurn,
	service.KindOutcomeUnknown: wire.CodeOutcomeUnknown,
	service.KindStorageFull:    wire.CodeStorageFull,
	service.KindKeyInUse:       wire.CodeKeyInUse,
	service.KindInvalid:        wire.CodeInvalid,
	service.KindUnavailable:    wire.CodeUnavailable,
}

// engineError is a reply error that errors.Is also matches against the
// engine's sentinels of its code.
type engineError struct{ e *wire.Error }

func (e engineError) Error() string { return e.e.Error() }
func (e engineError) Unwrap() error { return e.e }

func (e engineError) Is(target error) bool {
	k := service.KindOf(target)
	if target == api.ErrBadRequest {
		k = service.KindInvalid
	}
	code, ok := kindCode[k]
	return ok && code == e.e.Code
}

func engineCall[Out any](ctx context.Context, c *engineClient, op wire.Operation, req any) (Out, error) {
	var out Out
	err := c.c.Do(ctx, op, req, &out)
	var we *wire.Error
	if errors.As(err, &we) {
		err = engineError{we}
	}
	return out, err
}

// AppendKeyed is Append with an idempotency key.
func (c *engineClient) AppendKeyed(ctx context.Context, session, key string, expected *uint64, cmds ...events.Payload) (wire.AppendReply, error) {
	return engineCall[wire.AppendReply](ctx, c, wire.OpAppend, &service.AppendRequest{Session: session, ExpectedSeq: expected, Commands: cmds, EventID: key})
}

// Append appends commands to a session.
func (c *engineClient) Append(ctx context.Context, session string, expected *uint64, cmds ...events.Payload) (wire.AppendReply, error) {
	return c.AppendKeyed(ctx, session, "", expected, cmds...)
}

// Intent reads a session's stored state; minSeq > 0 reads your writes.
func (c *engineClient) Intent(ctx context.Context, session string, minSeq uint64) (wire.Session, error) {
	return engineCall[wire.Session](ctx, c, wire.OpIntent, &wire.IntentRequest{Session: session, MinSeq: minSeq})
}

// Resolve resolves a session's tools.
func (c *engineClient) Resolve(ctx context.Context, req wire.ResolveRequest) (wire.TurnView, error) {
	return engineCall[wire.TurnView](ctx, c, wire.OpResolve, &req)
}

// HistoryPage returns one page of a session's timeline.
func (c *engineClient) HistoryPage(ctx context.Context, req wire.HistoryRequest) (wire.HistoryOf[*service.Command], error) {
	return engineCall[wire.HistoryOf[*service.Command]](ctx, c, wire.OpHistory, &req)
}

// HistoryPages calls fn with each page of a session's timeline up to
// req.Until, from the one after req.AfterSeq to the last; it stops at the
// first error of a call or of fn.
func (c *engineClient) HistoryPages(ctx context.Context, req wire.HistoryRequest, fn func(wire.HistoryOf[*service.Command]) error) error {
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
func (c *engineClient) History(ctx context.Context, req wire.HistoryRequest) (wire.HistoryOf[*service.Command], error) {
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
func (c *engineClient) Explain(ctx context.Context, req wire.ExplainRequest) (wire.Explanation, error) {
	return engineCall[wire.Explanation](ctx, c, wire.OpExplain, &req)
}

// Checkpoint records a safe point of the session's open turn.
func (c *engineClient) Checkpoint(ctx context.Context, session string) (wire.CheckpointReply, error) {
	return engineCall[wire.CheckpointReply](ctx, c, wire.OpCheckpoint, &wire.TurnRequest{Session: session})
}

// Resume resumes a session after a crash.
func (c *engineClient) Resume(ctx context.Context, req wire.ResumeRequest) (wire.ResumeReply, error) {
	return engineCall[wire.ResumeReply](ctx, c, wire.OpResume, &req)
}

// BeginTurn begins the session's next turn.
func (c *engineClient) BeginTurn(ctx context.Context, req wire.BeginTurnRequest) (wire.TurnView, error) {
	return engineCall[wire.TurnView](ctx, c, wire.OpBeginTurn, &req)
}

// Discover is tool_search in the open turn, for exact names.
func (c *engineClient) Discover(ctx context.Context, session, provider string, names ...string) (wire.DiscoverReply, error) {
	return engineCall[wire.DiscoverReply](ctx, c, wire.OpDiscover, &wire.DiscoverRequest{Session: session, Names: names, Provider: provider})
}

// ToolSearch is tool_search in the open turn with the model's input.
func (c *engineClient) ToolSearch(ctx context.Context, session, provider string, input json.RawMessage) (wire.DiscoverReply, error) {
	return engineCall[wire.DiscoverReply](ctx, c, wire.OpDiscover, &wire.DiscoverRequest{Session: session, Input: input, Provider: provider})
}

// Dispatch returns the provider request of the open turn.
func (c *engineClient) Dispatch(ctx context.Context, session, provider string) (wire.TurnView, error) {
	return engineCall[wire.TurnView](ctx, c, wire.OpDispatch, &wire.DispatchRequest{Session: session, Provider: provider})
}

// LastDispatch returns the classification of the session's last dispatch.
func (c *engineClient) LastDispatch(ctx context.Context, session string) (wire.DispatchRecord, error) {
	return engineCall[wire.DispatchRecord](ctx, c, wire.OpInspect, &wire.TurnRequest{Session: session})
}

// EndTurn ends the open turn at a safe point.
func (c *engineClient) EndTurn(ctx context.Context, session string) (wire.CheckpointReply, error) {
	return engineCall[wire.CheckpointReply](ctx, c, wire.OpEndTurn, &wire.TurnRequest{Session: session})
}

// Sessions lists the sessions that have a view.
func (c *engineClient) Sessions(ctx context.Context) ([]string, error) {
	out, err := engineCall[wire.SessionList](ctx, c, wire.OpSessions, &wire.Empty{})
	return out.Sessions, err
}

// Registry describes the live registry.
func (c *engineClient) Registry(ctx context.Context) (wire.RegistryInfo, error) {
	return engineCall[wire.RegistryInfo](ctx, c, wire.OpRegistry, &wire.Empty{})
}

// Budget returns the live registry's token table.
func (c *engineClient) Budget(ctx context.Context) (deferral.BudgetTable, error) {
	return engineCall[deferral.BudgetTable](ctx, c, wire.OpBudget, &wire.Empty{})
}
