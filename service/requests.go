package service

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/wire"
)

// Requests answers the API's operations in the API's vocabulary:
// each method takes one operation's request (a wire type, or AppendRequest
// for commands) and the caller's Origin, checks what the engine's rules
// need, calls the Engine and returns the reply (a wire type, or a type of
// this package with the same JSON). The transports (package api) only
// decode, route, limit and encode. Safe for concurrent use.
//
// Request errors match wire.ErrBadRequest (or are a *wire.Error); the
// others are the Engine's, classified by KindOf.
type Requests struct {
	eng *Engine

	budgetMu sync.Mutex
	budget   *deferral.BudgetTable // of budget.RegistryVersion
}

// NewRequests returns the request handlers of eng.
func NewRequests(eng *Engine) *Requests { return &Requests{eng: eng} }

// Handler is one API operation bound to the Requests method that answers
// it, with its request and reply types: the transports (package api)
// decode a request into NewRequest's value, Call it, and publish the
// types' schemas.
type Handler struct {
	wire.Operation
	// ReqType and RespType are the operation's request and reply types.
	ReqType, RespType reflect.Type

	newReq func() any
	call   func(ctx context.Context, q *Requests, req any, o Origin) (any, error)
}

// NewRequest returns a new zero request of the operation (a pointer to
// ReqType's value), to decode a request into.
func (h *Handler) NewRequest() any { return h.newReq() }

// Call answers req, a value from NewRequest, with q's method.
func (h *Handler) Call(ctx context.Context, q *Requests, req any, o Origin) (any, error) {
	return h.call(ctx, q, req, o)
}

func bind[Req, Resp any](o wire.Operation, method func(q *Requests, ctx context.Context, req *Req, o Origin) (Resp, error)) *Handler {
	return &Handler{
		Operation: o,
		ReqType:   reflect.TypeFor[Req](),
		RespType:  reflect.TypeFor[Resp](),
		newReq:    func() any { return new(Req) },
		call: func(ctx context.Context, q *Requests, req any, org Origin) (any, error) {
			return method(q, ctx, req.(*Req), org)
		},
	}
}

// handlers binds each API operation to its method, in the API's order.
var handlers = []*Handler{
	bind(wire.OpAppend, (*Requests).Append),
	bind(wire.OpIntent, (*Requests).Intent),
	bind(wire.OpResolve, (*Requests).Resolve),
	bind(wire.OpHistory, (*Requests).History),
	bind(wire.OpExplain, (*Requests).Explain),
	bind(wire.OpExplainBatch, (*Requests).ExplainBatch),
	bind(wire.OpResume, (*Requests).Resume),
	bind(wire.OpBeginTurn, (*Requests).BeginTurn),
	bind(wire.OpDiscover, (*Requests).Discover),
	bind(wire.OpDispatch, (*Requests).Dispatch),
	bind(wire.OpInspect, (*Requests).Inspect),
	bind(wire.OpCallCheck, (*Requests).CallCheck),
	bind(wire.OpCheckpoint, (*Requests).Checkpoint),
	bind(wire.OpEndTurn, (*Requests).EndTurn),
	bind(wire.OpDelete, (*Requests).Delete),
	bind(wire.OpCompact, (*Requests).Compact),
	bind(wire.OpSessions, (*Requests).Sessions),
	bind(wire.OpRegistry, (*Requests).Registry),
	bind(wire.OpBudget, (*Requests).Budget),
	bind(wire.OpRegistryDiff, (*Requests).RegistryDiff),
}

// Handlers returns the API's operations bound to their methods, in a
// fixed order. The slice is shared: callers do not modify it.
func Handlers() []*Handler { return handlers }

// Engine returns the engine the requests run on.
func (q *Requests) Engine() *Engine { return q.eng }

// AppendRequest appends intent commands to a session (events.append; the
// JSON of wire.AppendRequest).
type AppendRequest struct {
	Session string `json:"session"`
	// ExpectedSeq, when set, is the sequence the session must be at (0:
	// no events yet); otherwise retry-safe commands are retried on
	// conflict.
	ExpectedSeq *uint64 `json:"expected_seq,omitempty"`
	// Commands are applied atomically, in order.
	Commands Commands `json:"commands"`
	Actor    string   `json:"actor,omitempty"`
	// EventID is the client's idempotency key: any string of 1 to 255
	// bytes (a UUID, say), case-sensitive. The stored events' ids are
	// wire.IdempotencyEventIDs(session, key, n). A retry with the same
	// event_id and commands returns the original sequences and ids
	// (duplicate true) and writes nothing, also after the log's dedupe
	// window; other commands are idempotency_key_mismatch (422). The
	// Idempotency-Key header (HTTP and NATS) sets it too.
	EventID string `json:"event_id,omitempty"`
}

// BindIdempotencyKey sets an append's event_id from the Idempotency-Key
// header ("": none; req of another operation: nothing to do); a header
// and a body field that differ are refused.
func BindIdempotencyKey(req any, key string) error {
	r, ok := req.(*AppendRequest)
	if !ok || key == "" {
		return nil
	}
	if r.EventID != "" && r.EventID != key {
		return wire.BadRequest("%s header %q differs from the body's event_id %q: send one of them", wire.HeaderIdempotencyKey, clip.String(key, clip.Max), clip.String(r.EventID, clip.Max))
	}
	r.EventID = key
	return nil
}

// overrideOf is the override of a request (nil is none): the wire
// decoder checked its kind and fields (intent.Override.UnmarshalJSON);
// the tool names are checked here, by the engine's rule.
func overrideOf(o *wire.Override) (intent.Override, error) {
	if o == nil {
		return intent.Override{}, nil
	}
	for _, n := range o.Names {
		if err := events.ValidateToolName(n); err != nil {
			return intent.Override{}, wire.BadRequest("override names: %v", err)
		}
	}
	return *o, nil
}

// parseUntil reads a wire.Until into the engine's bound.
func parseUntil(u wire.Until) (Until, error) {
	seq, t, err := u.Bound()
	return Until{Seq: seq, Time: t}, err
}

func resolveRequest(profile, provider string, ov *wire.Override, minSeq uint64) (ResolveRequest, error) {
	o, err := overrideOf(ov)
	if err != nil {
		return ResolveRequest{}, err
	}
	return ResolveRequest{Profile: profile, Provider: provider, Override: o, MinSeq: minSeq}, nil
}

// Append answers events.append.
func (q *Requests) Append(ctx context.Context, r *AppendRequest, o Origin) (wire.AppendReply, error) {
	if len(r.Commands) == 0 {
		return wire.AppendReply{}, wire.BadRequest(`field "commands" is required: give at least one command, e.g. {"type":"ToolsToggled","enabled":true}`)
	}
	res, err := q.eng.ApplyKeyed(ctx, r.Session, o, r.ExpectedSeq, r.EventID, r.Commands...)
	if err != nil {
		return wire.AppendReply{}, err
	}
	st := res.State
	st.Session = r.Session
	return wire.AppendReply{Session: r.Session, FirstSeq: res.First, LastSeq: res.Last, Duplicate: res.Duplicate, Retries: res.Retries,
		EventIDs: res.EventIDs, State: SessionOf(st)}, nil
}

// Intent answers session.intent.
func (q *Requests) Intent(ctx context.Context, r *wire.IntentRequest, _ Origin) (wire.Session, error) {
	st, err := q.eng.Session(ctx, r.Session, r.MinSeq)
	if err != nil {
		return wire.Session{}, err
	}
	return SessionOf(st), nil
}

// Resolve answers session.resolve under the caller's channel policy.
func (q *Requests) Resolve(ctx context.Context, r *wire.ResolveRequest, o Origin) (wire.TurnView, error) {
	rr, err := resolveRequest(r.Profile, r.Provider, r.Override, r.MinSeq)
	if err != nil {
		return wire.TurnView{}, err
	}
	rr.Channel = o.Channel // The caller's channel policy applies
	shape := ViewShape{ListOffset: r.ListOffset, ListLimit: r.ListLimit, IfNoneMatch: r.IfNoneMatch}
	if err := shape.Validate(); err != nil {
		return wire.TurnView{}, err
	}
	v, err := q.eng.Resolve(ctx, r.Session, rr)
	return shape.apply(v), err
}

// History answers session.history with one page: memory and
// reply size are bounded by the page, not by the session's length.
func (q *Requests) History(ctx context.Context, r *wire.HistoryRequest, o Origin) (wire.HistoryOf[*Command], error) {
	until, err := parseUntil(r.Until)
	if err != nil {
		return wire.HistoryOf[*Command]{}, err
	}
	rr, err := resolveRequest(r.Profile, "", r.Override, 0)
	if err != nil {
		return wire.HistoryOf[*Command]{}, err
	}
	rr.Channel = o.Channel // The timeline as the caller's channel sees it
	limit := r.Limit
	if limit < 0 || limit > wire.MaxHistoryPage {
		return wire.HistoryOf[*Command]{}, wire.BadRequest("limit %d is out of range: give 1 to %d (default %d) and read the next page with after_seq = next_after_seq", limit, wire.MaxHistoryPage, wire.DefaultHistoryPage)
	}
	if limit == 0 {
		limit = wire.DefaultHistoryPage
	}
	out := wire.HistoryOf[*Command]{Session: r.Session, Entries: []wire.HistoryEntryOf[*Command]{}}
	size := 0
	st, more, err := q.eng.HistoryPage(ctx, r.Session, until, rr, r.AfterSeq, func(h HistoryEntry) bool {
		e := wireHistoryEntry(h)
		if b, err := json.Marshal(e); err == nil {
			size += len(b) + 1
		}
		out.Entries = append(out.Entries, e)
		return len(out.Entries) < limit && size < wire.MaxHistoryPageBytes
	})
	if err != nil {
		return wire.HistoryOf[*Command]{}, err
	}
	st.Session = r.Session
	out.State, out.More = SessionOf(st), more
	if more && len(out.Entries) > 0 {
		out.NextAfterSeq = out.Entries[len(out.Entries)-1].Seq
	}
	return out, nil
}

// Explain answers session.explain under the caller's channel policy.
func (q *Requests) Explain(ctx context.Context, r *wire.ExplainRequest, o Origin) (wire.Explanation, error) {
	if r.Tool == "" {
		return wire.Explanation{}, wire.BadRequest(`field "tool" is required: the tool name to explain`)
	}
	if err := events.ValidateToolName(r.Tool); err != nil {
		return wire.Explanation{}, wire.BadRequest("tool: %v", err)
	}
	until, rr, err := explainAt(r.Until, r.Profile, r.Override, o)
	if err != nil {
		return wire.Explanation{}, err
	}
	return q.eng.Explain(ctx, r.Session, r.Tool, until, rr)
}

// explainAt is the point and the request of an explain: until parsed,
// and the profile and override under the caller's channel policy.
func explainAt(u wire.Until, profile string, ov *wire.Override, o Origin) (Until, ResolveRequest, error) {
	until, err := parseUntil(u)
	if err != nil {
		return Until{}, ResolveRequest{}, err
	}
	rr, err := resolveRequest(profile, "", ov, 0)
	if err != nil {
		return Until{}, ResolveRequest{}, err
	}
	rr.Channel = o.Channel
	return until, rr, nil
}

// ExplainBatch explains up to wire.MaxExplainBatch tools in one request
// (the inspector's explain card asks one request per page, not one
// per tool), each exactly as Explain would, under the caller's channel.
func (q *Requests) ExplainBatch(ctx context.Context, r *wire.ExplainBatchRequest, o Origin) (wire.ExplainBatchReply, error) {
	if len(r.Tools) == 0 || len(r.Tools) > wire.MaxExplainBatch {
		return wire.ExplainBatchReply{}, wire.BadRequest(`field "tools" has %d names: give 1 to %d tool names, e.g. {"tools":["bash","grep"]}, and page through longer lists`, len(r.Tools), wire.MaxExplainBatch)
	}
	for i, name := range r.Tools {
		if err := events.ValidateToolName(name); err != nil {
			return wire.ExplainBatchReply{}, wire.BadRequest("tools[%d]: %v", i, err)
		}
	}
	until, rr, err := explainAt(r.Until, r.Profile, r.Override, o)
	if err != nil {
		return wire.ExplainBatchReply{}, err
	}
	out := wire.ExplainBatchReply{Session: r.Session, Explanations: make([]wire.Explanation, 0, len(r.Tools))}
	for _, name := range r.Tools {
		ex, err := q.eng.Explain(ctx, r.Session, name, until, rr)
		if err != nil {
			return wire.ExplainBatchReply{}, err
		}
		out.Explanations = append(out.Explanations, ex)
	}
	return out, nil
}

// Resume answers session.resume.
func (q *Requests) Resume(ctx context.Context, r *wire.ResumeRequest, o Origin) (wire.ResumeReply, error) {
	rr, err := resolveRequest(r.Profile, "", r.Override, 0)
	if err != nil {
		return wire.ResumeReply{}, err
	}
	res, err := q.eng.Resume(ctx, r.Session, o, rr)
	if err != nil {
		return wire.ResumeReply{}, err
	}
	return wireResume(r.Session, res), nil
}

// BeginTurn answers turn.begin.
func (q *Requests) BeginTurn(ctx context.Context, r *wire.BeginTurnRequest, o Origin) (wire.TurnView, error) {
	rr, err := resolveRequest(r.Profile, r.Provider, r.Override, 0)
	if err != nil {
		return wire.TurnView{}, err
	}
	v, err := q.eng.BeginTurn(ctx, r.Session, o, rr)
	return ViewShape{IfNoneMatch: r.IfNoneMatch}.apply(v), err
}

// Discover answers turn.discover: the model's tool_search input, or names.
func (q *Requests) Discover(ctx context.Context, r *wire.DiscoverRequest, o Origin) (wire.DiscoverReply, error) {
	var req deferral.SearchRequest
	switch {
	case len(r.Input) > 0 && len(r.Names) > 0:
		return wire.DiscoverReply{}, wire.BadRequest(`give "input" (the tool_search call's input object) or "names", not both`)
	case len(r.Input) > 0:
		sr, err := deferral.ParseSearchInput(r.Input)
		if err != nil {
			return wire.DiscoverReply{}, wire.BadRequest("input: %v", err)
		}
		req = sr
	case len(r.Names) > 0:
		req = deferral.SearchRequest{Names: r.Names}
		if err := req.Validate(); err != nil {
			return wire.DiscoverReply{}, wire.BadRequest("names: %v", err)
		}
	default:
		return wire.DiscoverReply{}, wire.BadRequest(`field "input" is required: the tool_search call's input object, e.g. {"query":"browser screenshot"}; or give "names", e.g. ["send_message"]`)
	}
	req.QueryVector = r.QueryVector // The backend's embedding of the query, beside the model's input
	if r.View != "" && r.View != "full" && r.View != "none" {
		return wire.DiscoverReply{}, wire.BadRequest(`view %q: want "full" (the default: the turn's next provider request) or "none" (the search alone; ask turn/dispatch for the request)`, r.View)
	}
	d, err := q.eng.Discover(ctx, r.Session, o, DiscoverRequest{Search: req, Provider: r.Provider, CallID: r.CallID, NoView: r.View == "none"})
	d.View = ViewShape{IfNoneMatch: r.IfNoneMatch}.apply(d.View)
	return d, err
}

// Dispatch answers turn.dispatch.
func (q *Requests) Dispatch(ctx context.Context, r *wire.DispatchRequest, _ Origin) (wire.TurnView, error) {
	v, err := q.eng.Dispatch(ctx, r.Session, r.Provider)
	return ViewShape{IfNoneMatch: r.IfNoneMatch}.apply(v), err
}

// Inspect answers turn.inspect: the last dispatch of the session's turn.
func (q *Requests) Inspect(ctx context.Context, r *wire.TurnRequest, _ Origin) (wire.DispatchRecord, error) {
	d, ok, err := q.eng.LastDispatchOf(ctx, r.Session)
	if err != nil {
		return wire.DispatchRecord{}, err
	}
	if !ok {
		return wire.DispatchRecord{}, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound,
			Message: "session " + strconv.Quote(r.Session) + " has started no turn: begin and dispatch a turn first (turn.begin, turn.dispatch)"}
	}
	rec := wireDispatch(r.Session, d)
	if max(len(rec.Resident), len(rec.Deferred), len(rec.Loaded)) > ViewListMax {
		rec.Lists = &wire.EntryLists{Resident: len(rec.Resident), Deferred: len(rec.Deferred), Loaded: len(rec.Loaded)}
		rec.Resident, rec.Deferred, rec.Loaded = page(rec.Resident, 0, ViewListMax), page(rec.Deferred, 0, ViewListMax), page(rec.Loaded, 0, ViewListMax)
	}
	return rec, nil
}

// CallCheck asks, before a tool call executes, whether it may: a
// refusal is a reply with callable false, not an error.
func (q *Requests) CallCheck(ctx context.Context, r *wire.CallCheckRequest, o Origin) (wire.CallCheckReply, error) {
	if r.Tool == "" {
		return wire.CallCheckReply{}, wire.BadRequest(`field "tool" is required: the name of the tool the model called, e.g. {"tool":"send_message"}`)
	}
	if err := events.ValidateToolName(r.Tool); err != nil {
		return wire.CallCheckReply{}, wire.BadRequest("tool: %v", err)
	}
	return q.eng.CallCheckIn(ctx, r.Session, r.Tool, o.Channel, r.Provider)
}

// Checkpoint answers turn.checkpoint.
func (q *Requests) Checkpoint(ctx context.Context, r *wire.TurnRequest, o Origin) (wire.CheckpointReply, error) {
	res, err := q.eng.Checkpoint(ctx, r.Session, o)
	if err != nil {
		return wire.CheckpointReply{}, err
	}
	return wire.CheckpointReply{Session: r.Session, Seq: res.Seq, Checkpoint: wireCheckpoint(res.Record, res.Seq)}, nil
}

// EndTurn answers turn.end.
func (q *Requests) EndTurn(ctx context.Context, r *wire.TurnRequest, o Origin) (wire.CheckpointReply, error) {
	res, err := q.eng.EndTurn(ctx, r.Session, o)
	if err != nil {
		return wire.CheckpointReply{}, err
	}
	return wire.CheckpointReply{Session: r.Session, Seq: res.Seq, Checkpoint: wireCheckpoint(res.Record, res.Seq)}, nil
}

// Delete deletes a session or, with erase, purges it too: whether
// the caller may erase is the transport's to decide before.
func (q *Requests) Delete(ctx context.Context, r *wire.DeleteRequest, o Origin) (wire.DeleteReply, error) {
	if r.Erase {
		res, err := q.eng.Erase(ctx, r.Session, o, r.Reason)
		if err != nil {
			return wire.DeleteReply{}, err
		}
		return wire.DeleteReply{Session: r.Session, Seq: res.DeleteSeq, Erased: true,
			FirstSeq: res.FirstSeq, LastSeq: res.LastSeq, Purged: res.Purged, AuditSeq: res.AuditSeq}, nil
	}
	res, err := q.eng.Delete(ctx, r.Session, o, r.Reason)
	if err != nil {
		return wire.DeleteReply{}, err
	}
	return wire.DeleteReply{Session: r.Session, Seq: res.Seq}, nil
}

// Compact compacts a session: its events are replaced by one
// SessionCompacted and purged below it.
func (q *Requests) Compact(ctx context.Context, r *wire.CompactRequest, o Origin) (wire.CompactReply, error) {
	return q.eng.Compact(ctx, r.Session, o, r.Reason)
}

// Sessions answers sessions.list.
func (q *Requests) Sessions(ctx context.Context, _ *wire.Empty, _ Origin) (wire.SessionList, error) {
	list, err := q.eng.Sessions(ctx)
	if err != nil {
		return wire.SessionList{}, err
	}
	return wire.SessionList{Sessions: orEmpty(list)}, nil
}

// Registry answers registry.info.
func (q *Requests) Registry(_ context.Context, r *wire.RegistryRequest, _ Origin) (wire.RegistryInfo, error) {
	if r.ToolOffset < 0 || r.ToolLimit < 0 || r.ToolLimit > wire.MaxRegistryPage {
		return wire.RegistryInfo{}, wire.BadRequest("tool_offset %d and tool_limit %d: want tool_offset >= 0 and tool_limit 1 to %d (0 lists every tool)", r.ToolOffset, r.ToolLimit, wire.MaxRegistryPage)
	}
	info := wireRegistry(q.eng.Registry())
	if r.ToolFilter != "" {
		f := strings.ToLower(r.ToolFilter)
		exact := slices.IndexFunc(info.Tools, func(t wire.RegistryTool) bool { return strings.ToLower(t.Name) == f })
		if exact >= 0 {
			info.Tools = info.Tools[exact : exact+1]
		} else {
			info.Tools = slices.DeleteFunc(info.Tools, func(t wire.RegistryTool) bool { return !strings.Contains(strings.ToLower(t.Name), f) })
		}
	}
	info.ToolCount = len(info.Tools)
	if r.ToolLimit > 0 {
		info.Tools = page(info.Tools, r.ToolOffset, r.ToolLimit)
		on := make(map[string]bool, len(info.Tools))
		for _, t := range info.Tools {
			on[t.Name] = true
		}
		keep := func(names []string) []string {
			return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !on[n] })
		}
		info.DefaultTools, info.ResidentTools, info.DeferredDefaultTools = keep(info.DefaultTools), keep(info.ResidentTools), keep(info.DeferredDefaultTools)
		for name, list := range info.Presets {
			info.Presets[name] = keep(list)
		}
	}
	return info, nil
}

// RegistryDiff reports what pushing a candidate registry would change;
// it writes nothing.
func (q *Requests) RegistryDiff(ctx context.Context, r *wire.RegistryDiffRequest, _ Origin) (wire.RegistryImpact, error) {
	if len(r.Registry) == 0 || string(r.Registry) == "null" {
		return wire.RegistryImpact{}, wire.BadRequest(`field "registry" is required: the candidate registry, the JSON of a registry file (the format of resolver/default_registry.json)`)
	}
	cand, err := resolver.Load(r.Registry)
	if err != nil {
		return wire.RegistryImpact{}, wire.BadRequest("registry: %v", err)
	}
	return q.eng.Impact(ctx, cand)
}

// Budget measures the live registry once per registry version
// (registry.budget).
func (q *Requests) Budget(_ context.Context, _ *wire.Empty, _ Origin) (wire.BudgetTable, error) {
	reg := q.eng.Registry()
	q.budgetMu.Lock()
	defer q.budgetMu.Unlock()
	if q.budget == nil || q.budget.RegistryVersion != reg.Version() {
		t, err := deferral.Table(reg)
		if err != nil {
			return wire.BudgetTable{}, err
		}
		q.budget = &t
	}
	// The reply names the first deferred tools, and counts them all: the
	// table is a figure per registry, not a list of it.
	t := *q.budget
	t.DeferredCount = len(t.Deferred)
	t.Deferred = page(t.Deferred, 0, ViewListMax)
	if len(t.Unreachable) > ViewListMax {
		t.Unreachable = page(t.Unreachable, 0, ViewListMax)
	}
	return t.BudgetTable, nil
}
