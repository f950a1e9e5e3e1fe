package api

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Requests. Every request is one JSON object; over NATS it is the message
// body (the session id included), over HTTP the session id and tool come
// from the path, the other fields from the JSON body (POST) or the query
// string (GET: ?profile=coder&min_seq=7; a structured value such as
// override is JSON in the parameter). Unknown fields are refused. "actor"
// is a fallback: the Engine-Actor header wins.

// AppendRequest appends intent commands to a session (events.append).
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

// Requests and replies that need no engine type are wire's: one
// definition with the client's (#25 item 1).
type (
	ResolveRequest   = wire.ResolveRequest
	BeginTurnRequest = wire.BeginTurnRequest
	ResumeRequest    = wire.ResumeRequest
	HistoryRequest   = wire.HistoryRequest
	ExplainRequest   = wire.ExplainRequest
	// Override is a per-turn override (R4, R5) in JSON:
	//
	//	{"kind":"none"}                        no override
	//	{"kind":"empty"}                       no tools this turn
	//	{"kind":"intent","intent":{...},"allowed":[...]}   an intent, expanded live
	//	{"kind":"names","names":["read_file","grep"]}       exactly these tools
	//
	// A field that does not belong to the kind is refused. allowed
	// filters the default tools (R11); with an intent whose base list is
	// not the defaults (a preset, a picked list, enabled=false, a
	// profile's own list or preset) the request is refused, never
	// silently ignored.
	Override = wire.Override
	// SessionView is a session's stored state (session.intent).
	SessionView = wire.Session
	// AppendResponse is the outcome of events.append.
	AppendResponse = wire.AppendReply
)

// History pages (#24 row 7): wire's bounds.
const (
	DefaultHistoryPage  = wire.DefaultHistoryPage
	MaxHistoryPage      = wire.MaxHistoryPage
	MaxHistoryPageBytes = wire.MaxHistoryPageBytes
)

// Empty is the request of operations that take no parameters
// (sessions.list, registry.info, registry.budget).
type Empty struct{}

// overrideOf converts o; nil is no override.
func overrideOf(o *Override) (intent.Override, error) {
	if o == nil {
		return intent.Override{}, nil
	}
	var k intent.OverrideKind
	if o.Kind == "" {
		return intent.Override{}, badRequest(`override: field "kind" is required: use one of none, empty, intent, names`)
	}
	if err := k.UnmarshalText([]byte(o.Kind)); err != nil {
		return intent.Override{}, badRequest("override kind %q is unknown: use one of none, empty, intent, names", clip.String(o.Kind, clip.Max))
	}
	out := intent.Override{Kind: k}
	switch k {
	case intent.OverrideNone, intent.OverrideEmpty:
		if o.Intent != nil || o.Allowed != nil || o.Names != nil {
			return out, badRequest("override kind %q takes no other field (got intent, allowed or names)", o.Kind)
		}
	case intent.OverrideIntent:
		if o.Names != nil {
			return out, badRequest(`override kind "intent" takes intent and allowed, not names: use kind "names" for a list`)
		}
		if o.Intent != nil {
			out.Intent = *o.Intent
		}
		out.Allowed = o.Allowed
	case intent.OverrideNames:
		if o.Intent != nil || o.Allowed != nil {
			return out, badRequest(`override kind "names" takes names only, not intent or allowed: use kind "intent"`)
		}
		if len(o.Names) == 0 {
			return out, badRequest(`override kind "names" needs at least one name: use kind "empty" for no tools`)
		}
		for _, n := range o.Names {
			if err := events.ValidateToolName(n); err != nil {
				return out, badRequest("override names: %v", err)
			}
		}
		out.Names = o.Names
	}
	return out, nil
}

// Requests that need no engine type are wire's.
type (
	IntentRequest   = wire.IntentRequest
	DiscoverRequest = wire.DiscoverRequest
	DispatchRequest = wire.DispatchRequest
	TurnRequest     = wire.TurnRequest
	// CallCheckRequest is wire.CallCheckRequest.
	CallCheckRequest = wire.CallCheckRequest
	// RegistryDiffRequest is wire.RegistryDiffRequest.
	RegistryDiffRequest = wire.RegistryDiffRequest
	// Until bounds a history or an explanation: a stream sequence or an
	// RFC 3339 time; empty means now.
	Until = wire.Until
)

// parseUntil reads an Until into the service's bound (wire.Until.Bound).
func parseUntil(u Until) (service.Until, error) {
	seq, t, err := u.Bound()
	return service.Until{Seq: seq, Time: t}, err
}

// Replies: wire's types (one definition with the client's). Lists are []
// rather than null where this package builds them.
type (
	RejectionView      = wire.Rejection
	CheckpointView     = wire.Checkpoint
	CheckpointResponse = wire.CheckpointReply
	// DeleteRequest deletes (or erases) a session (#30).
	DeleteRequest = wire.DeleteRequest
	// DeleteResponse is the outcome of a delete or an erase.
	DeleteResponse   = wire.DeleteReply
	ResumeResponse   = wire.ResumeReply
	ResumeOutcome    = wire.ResumeOutcome
	ResumeDecision   = wire.ResumeDecision
	ContractChange   = wire.ContractChange
	SessionsResponse = wire.SessionList
	DispatchRecord   = wire.DispatchRecord
	RegistryInfo     = wire.RegistryInfo
	ToolInfo         = wire.RegistryTool
)

// HistoryResponse is one page of a session's timeline (session.history,
// R25), in stream order.
type HistoryResponse struct {
	Session string         `json:"session"`
	Entries []HistoryEntry `json:"entries"`
	// State is the session after the last entry of this page (after the
	// whole timeline on its last page).
	State SessionView `json:"state"`
	// More is true when the session has events after this page (within
	// Until): ask again with after_seq = NextAfterSeq.
	More bool `json:"more"`
	// NextAfterSeq is the Seq of this page's last entry when More, else
	// absent.
	NextAfterSeq uint64 `json:"next_after_seq,omitempty"`
}

// HistoryEntry is one event of a timeline with the state it left and how
// the resolved tool set changed (see service.HistoryEntry).
type HistoryEntry struct {
	service.EventRef
	// Payload is the event as a command object (absent: undecodable).
	Payload *Command `json:"payload,omitempty"`
	// Error says why the event was not applied ("" when it was); Rejected
	// is true when it broke a fold rule (R28) rather than being
	// undecodable (R26).
	Error         string        `json:"error,omitempty"`
	Rejected      bool          `json:"rejected,omitempty"`
	Intent        intent.Intent `json:"intent"`
	Tools         []string      `json:"tools"`
	Gained        []string      `json:"gained,omitempty"`
	Lost          []string      `json:"lost,omitempty"`
	Provider      []string      `json:"provider"`
	Catalog       []string      `json:"catalog"`
	Loaded        []string      `json:"loaded"`
	PrefixHash    string        `json:"prefix_hash"`
	PrefixChanged bool          `json:"prefix_changed"`
	Cause         string        `json:"cause,omitempty"`
	Turn          uint64        `json:"turn"`
	InTurn        bool          `json:"in_turn"`
	// RegistryVersion is the registry this point resolved against: the
	// open turn's, else the one in force when the event was stored (R25).
	RegistryVersion string `json:"registry_version"`
	// Dispatch is, inside a turn, the classification a provider dispatch
	// at this point records (R21), derived from the log.
	Dispatch *DispatchRecord `json:"dispatch,omitempty"`
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func viewOf(st aggregate.State) SessionView {
	v := SessionView{
		Session: st.Session, Seq: st.LastSeq, Intent: st.Intent, Loaded: nonNil(st.Loaded),
		Turn: st.Turn, InTurn: st.InTurn, Events: st.Events, Skipped: st.Skipped, Rejected: st.Rejected,
	}
	for _, r := range st.Rejections {
		v.Rejections = append(v.Rejections, RejectionView{Seq: r.Seq, ID: r.ID, Type: r.Type, Kind: r.Kind, Reason: r.Reason})
	}
	if cp := st.Checkpoint; cp != nil {
		v.Checkpoint = &CheckpointView{
			Loaded: nonNil(cp.Loaded), ContractHash: cp.ContractHash, RegistryVersion: cp.RegistryVersion,
			Turn: cp.Turn, Seq: cp.Seq, Contract: contractOf(cp.Contract),
		}
	}
	return v
}

func checkpointOf(r checkpoint.Record, seq uint64) CheckpointView {
	return CheckpointView{
		Loaded: nonNil(r.Loaded), ContractHash: r.ContractHash, RegistryVersion: r.RegistryVersion,
		Turn: r.Turn, Seq: seq, Contract: contractOf(r.Contract),
	}
}

func contractOf(c []events.ContractEntry) []wire.ContractEntry {
	var out []wire.ContractEntry
	for _, e := range c {
		out = append(out, wire.ContractEntry(e))
	}
	return out
}

func resumeOf(session string, r service.ResumeResult) ResumeResponse {
	out := ResumeResponse{
		Session: session, Seq: r.Seq,
		Outcome: ResumeOutcome{Restored: nonNil(r.Outcome.Restored), OK: r.Outcome.OK, Reason: r.Outcome.Reason, Tools: []ResumeDecision{}},
	}
	for _, d := range r.Outcome.Tools {
		out.Outcome.Tools = append(out.Outcome.Tools, ResumeDecision{Tool: d.Tool, Kind: string(d.Kind), Rule: d.Rule, Reason: d.Reason})
	}
	for _, c := range r.Outcome.Changes {
		out.Outcome.Changes = append(out.Outcome.Changes, ContractChange{Tool: c.Tool, Kind: string(c.Kind), From: c.From, To: c.To, Description: c.String()})
	}
	if r.Checkpoint != nil {
		cp := checkpointOf(*r.Checkpoint, 0)
		out.Checkpoint = &cp
	}
	return out
}

// history answers session.history with one page (#24 row 7): memory and
// reply size are bounded by the page, not by the session's length.
func (a *API) history(ctx context.Context, r *HistoryRequest, channel string) (HistoryResponse, error) {
	until, err := parseUntil(r.Until)
	if err != nil {
		return HistoryResponse{}, err
	}
	rr, err := resolveRequest(r.Profile, "", r.Override, 0)
	if err != nil {
		return HistoryResponse{}, err
	}
	rr.Channel = channel // #31: the timeline as the caller's channel sees it
	limit := r.Limit
	if limit < 0 || limit > MaxHistoryPage {
		return HistoryResponse{}, badRequest("limit %d is out of range: give 1 to %d (default %d) and read the next page with after_seq = next_after_seq", limit, MaxHistoryPage, DefaultHistoryPage)
	}
	if limit == 0 {
		limit = DefaultHistoryPage
	}
	out := HistoryResponse{Session: r.Session, Entries: []HistoryEntry{}}
	size := 0
	st, more, err := a.eng.HistoryPage(ctx, r.Session, until, rr, r.AfterSeq, func(h service.HistoryEntry) bool {
		e := historyEntryOf(r.Session, h)
		if b, err := json.Marshal(e); err == nil {
			size += len(b) + 1
		}
		out.Entries = append(out.Entries, e)
		return len(out.Entries) < limit && size < MaxHistoryPageBytes
	})
	if err != nil {
		return HistoryResponse{}, err
	}
	st.Session = r.Session
	out.State, out.More = viewOf(st), more
	if more && len(out.Entries) > 0 {
		out.NextAfterSeq = out.Entries[len(out.Entries)-1].Seq
	}
	return out, nil
}

func historyEntryOf(session string, h service.HistoryEntry) HistoryEntry {
	e := HistoryEntry{
		EventRef: h.EventRef, Error: h.Error, Rejected: h.Rejected, Intent: h.Intent,
		Tools: nonNil(h.Tools), Gained: h.Gained, Lost: h.Lost,
		Provider: nonNil(h.Provider), Catalog: nonNil(h.Catalog), Loaded: nonNil(h.Loaded),
		PrefixHash: h.PrefixHash, PrefixChanged: h.PrefixChanged, Cause: h.Cause, Turn: h.Turn, InTurn: h.InTurn,
		RegistryVersion: h.RegistryVersion,
	}
	if h.Dispatch != nil {
		d := dispatchOf(session, *h.Dispatch)
		e.Dispatch = &d
	}
	if h.Payload != nil {
		e.Payload = &Command{h.Payload}
	}
	return e
}

func dispatchOf(session string, d checkpoint.Dispatch) DispatchRecord {
	return DispatchRecord{
		Session: session, Turn: d.Turn, ContractHash: d.ContractHash,
		Resident: nonNil(d.Resident), Deferred: nonNil(d.Deferred), Loaded: nonNil(d.Loaded), AtMs: d.At,
	}
}

func registryOf(reg *resolver.Registry) RegistryInfo {
	info := RegistryInfo{
		Version: reg.Version(), Tools: []ToolInfo{},
		DefaultTools: nonNil(reg.DefaultTools()), ResidentTools: nonNil(reg.ResidentTools()),
		DeferredDefaultTools: nonNil(reg.DeferredDefaultTools()),
		Presets:              map[string][]string{}, Profiles: []wire.Profile{},
	}
	for _, t := range reg.Tools() {
		ti := ToolInfo{Name: t.Name, Description: t.Description, Available: t.Available, Deferred: t.Deferred, Permission: t.Permission}
		if len(t.Native.Anthropic) > 0 {
			ti.Native = append(ti.Native, service.ProviderAnthropic)
		}
		if len(t.Native.OpenAI) > 0 {
			ti.Native = append(ti.Native, service.ProviderOpenAI)
		}
		info.Tools = append(info.Tools, ti)
	}
	for _, name := range reg.PresetNames() {
		list, _ := reg.Preset(name)
		info.Presets[name] = nonNil(list)
	}
	for _, name := range reg.ProfileNames() {
		if p, ok := reg.Profile(name); ok {
			if p.Name == "" {
				p.Name = name
			}
			info.Profiles = append(info.Profiles, wire.Profile(p))
		}
	}
	return info
}

// validSession checks a request's session id, naming it.
func validSession(s string) error {
	if s == "" {
		return badRequest(`field "session" is required: a session id of 1 to 128 [A-Za-z0-9_-]`)
	}
	if err := events.ValidateSessionID(s); err != nil {
		return badRequest("session %q: %v", clip.String(s, clip.Max), err)
	}
	return nil
}

// validToken checks a channel name: one NATS subject token of
// [A-Za-z0-9_-], at most 64 bytes.
func validToken(what, s string) error {
	if len(s) == 0 || len(s) > 64 {
		return badRequest("%s %q has %d bytes, want 1 to 64 of [A-Za-z0-9_-]", what, clip.String(s, clip.Max), len(s))
	}
	if i := events.BadTokenByte(s); i >= 0 {
		return badRequest("%s %q has byte %q at %d, use only [A-Za-z0-9_-]", what, clip.String(s, clip.Max), s[i], i)
	}
	return nil
}

func validActor(s string) error {
	if len(s) > events.MaxTextLen {
		return badRequest("actor has %d bytes, at most %d allowed", len(s), events.MaxTextLen)
	}
	if !utf8.ValidString(s) {
		return badRequest("actor %q is not valid UTF-8", clip.String(s, clip.Max))
	}
	return nil
}
