package wire

import (
	"encoding/json"

	"github.com/toolintent/engine/intent"
)

// Requests. Each is one JSON object of docs/api.md; over HTTP the
// session (and the tool of Explain) go into the path.

// AppendRequest appends Commands to Session atomically. ExpectedSeq, when
// set, is the sequence the session must be at (0: no events yet), else the
// reply is a conflict; without it the engine retries safe changes.
type AppendRequest struct {
	Session     string    `json:"session"`
	ExpectedSeq *uint64   `json:"expected_seq,omitempty"`
	Commands    []Command `json:"commands"`
	Actor       string    `json:"actor,omitempty"`
	// EventID is an idempotency key: any string of 1 to 255 bytes of
	// printable UTF-8 the caller generates (a UUID, say), case-sensitive.
	// A retry with the same EventID and the same commands returns the
	// original sequences and writes nothing; with other commands it is
	// idempotency_key_mismatch (422). A key belongs to the session and
	// channel it was first used by: elsewhere it is
	// idempotency_key_in_use (422). The stored events' ids are
	// IdempotencyEventIDs(session, key, n).
	EventID string `json:"event_id,omitempty"`
}

// IntentRequest reads a session; MinSeq (an append's LastSeq) reads your
// writes.
type IntentRequest struct {
	Session string `json:"session"`
	MinSeq  uint64 `json:"min_seq,omitempty"`
}

// ResolveRequest resolves a session's tools. Provider is "anthropic"
// (default) or "openai"; Profile names an agent profile.
type ResolveRequest struct {
	Session  string    `json:"session"`
	Profile  string    `json:"profile,omitempty"`
	Provider string    `json:"provider,omitempty"`
	Override *Override `json:"override,omitempty"`
	MinSeq   uint64    `json:"min_seq,omitempty"`
	// ListOffset and ListLimit page the view's name lists (0: from the
	// first; 0: 128 names, at most 1000); the reply's lists say how long
	// each full list is.
	ListOffset int `json:"list_offset,omitempty"`
	ListLimit  int `json:"list_limit,omitempty"`
	// IfNoneMatch is the rendering_hash of a rendering the caller holds:
	// when the view's is the same, the reply leaves the rendering out
	// (rendering_unchanged), on either transport; "*" leaves any
	// rendering out. (Over HTTP a view reply
	// also carries an ETag of the whole reply; a GET whose If-None-Match
	// header names it is answered 304.)
	IfNoneMatch string `json:"if_none_match,omitempty"`
}

// IfNoneMatchField implements Conditional.
func (r *ResolveRequest) IfNoneMatchField() *string { return &r.IfNoneMatch }

// Conditional is a request that takes if_none_match: the rendering_hash
// of a provider tools array the caller holds, so that the reply leaves it
// out when it has not changed.
type Conditional interface {
	// IfNoneMatchField returns the request's if_none_match field.
	IfNoneMatchField() *string
}

// HistoryRequest asks for a session's timeline; Until bounds it (a
// sequence such as "42" or an RFC 3339 time).
type HistoryRequest struct {
	Session  string    `json:"session"`
	Until    Until     `json:"until,omitempty"`
	Profile  string    `json:"profile,omitempty"`
	Override *Override `json:"override,omitempty"`
	// AfterSeq starts the page after this sequence (0: the first page);
	// Limit bounds its entries (0: the engine's default, 100; at most
	// 1000). History pages through by itself; HistoryPage reads one.
	AfterSeq uint64 `json:"after_seq,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// ExplainBatchRequest asks explain for each of Tools (1 to
// MaxExplainBatch names) at one point of a session, with one profile and
// override: what explain answers for each, in one request.
type ExplainBatchRequest struct {
	Session  string    `json:"session"`
	Tools    []string  `json:"tools"`
	Until    Until     `json:"until,omitempty"`
	Profile  string    `json:"profile,omitempty"`
	Override *Override `json:"override,omitempty"`
}

// MaxExplainBatch is the most tools one explain-batch request names.
const MaxExplainBatch = 100

// ExplainBatchReply holds one Explanation per requested tool, in the
// order of the request.
type ExplainBatchReply struct {
	Session      string        `json:"session"`
	Explanations []Explanation `json:"explanations"`
}

// ExplainRequest asks why Tool is or is not in a session's set; Until
// bounds it (a sequence or an RFC 3339 time).
type ExplainRequest struct {
	Session  string    `json:"session"`
	Tool     string    `json:"tool"`
	Until    Until     `json:"until,omitempty"`
	Profile  string    `json:"profile,omitempty"`
	Override *Override `json:"override,omitempty"`
}

// ResumeRequest resumes a session after a crash.
type ResumeRequest struct {
	Session  string    `json:"session"`
	Profile  string    `json:"profile,omitempty"`
	Override *Override `json:"override,omitempty"`
	Actor    string    `json:"actor,omitempty"`
}

// BeginTurnRequest begins a session's next turn.
type BeginTurnRequest struct {
	Session  string    `json:"session"`
	Profile  string    `json:"profile,omitempty"`
	Provider string    `json:"provider,omitempty"`
	Override *Override `json:"override,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	// IfNoneMatch is as ResolveRequest's.
	IfNoneMatch string `json:"if_none_match,omitempty"`
}

// IfNoneMatchField implements Conditional.
func (r *BeginTurnRequest) IfNoneMatchField() *string { return &r.IfNoneMatch }

// DiscoverRequest is one tool_search call: Input is the model's input
// object as it wrote it ({"query":"..."}, {"names":[...]}, {"regex":"..."},
// "max_results"), or Names alone for a backend that knows them. CallID is
// the provider's id of the call (OpenAI's native tool search output).
// QueryVector is the optional embedding of the input's query, from the
// model that embedded the registry's tools: the backend adds
// it beside the model's input, which never carries one; with tool
// embeddings the query ranks by keywords and vector fused, otherwise it
// is unused with a note. Its dimension must be the tools' embeddings'.
// View "none" answers without the turn's next provider request: the
// reply's view then carries only the session, turn, intent, loaded tools
// and contract, its lists empty, for a backend that asks turn/dispatch
// for the request (at 10,000 tools the full view is 1.6 MB of JSON, 5.8
// MB with a native rendering); "" or "full" returns it whole.
type DiscoverRequest struct {
	Session     string          `json:"session"`
	Input       json.RawMessage `json:"input,omitempty"`
	Names       []string        `json:"names,omitempty"`
	Provider    string          `json:"provider,omitempty"`
	CallID      string          `json:"call_id,omitempty"`
	Actor       string          `json:"actor,omitempty"`
	QueryVector []float32       `json:"query_vector,omitempty"`
	View        string          `json:"view,omitempty"`
	// IfNoneMatch is as ResolveRequest's, for the reply's view.
	IfNoneMatch string `json:"if_none_match,omitempty"`
}

// IfNoneMatchField implements Conditional.
func (r *DiscoverRequest) IfNoneMatchField() *string { return &r.IfNoneMatch }

// DispatchRequest asks for the provider request of the open turn.
type DispatchRequest struct {
	Session  string `json:"session"`
	Provider string `json:"provider,omitempty"`
	// IfNoneMatch is as ResolveRequest's.
	IfNoneMatch string `json:"if_none_match,omitempty"`
}

// IfNoneMatchField implements Conditional.
func (r *DispatchRequest) IfNoneMatchField() *string { return &r.IfNoneMatch }

// CallCheckRequest asks whether a call of Tool may execute now in the
// session's open turn (for the channel of the request).
type CallCheckRequest struct {
	Session string `json:"session"`
	Tool    string `json:"tool"`
	// Provider is the provider mode of the request the model answered
	// (one of the provider values; "" is the mode the turn was begun for,
	// else the default): in an engine-side mode only the resident and
	// loaded tools are defined, so only they are callable.
	Provider string `json:"provider,omitempty"`
}

// RegistryDiffRequest carries a candidate registry (the JSON of a
// registry file) to compare with the live one.
type RegistryDiffRequest struct {
	Registry json.RawMessage `json:"registry"`
}

// TurnRequest names the session of turn-inspect, turn-checkpoint and
// turn-end.
type TurnRequest struct {
	Session string `json:"session"`
	Actor   string `json:"actor,omitempty"`
}

// Override is a per-turn override: Kind "none", "empty" (no tools),
// "names" (exactly Names) or "intent" (Intent expanded live, with
// Allowed filtering the defaults). See docs/semantics.md#overrides. It
// is the one definition, intent.Override, whose UnmarshalJSON refuses a
// missing or unknown kind and fields of another kind.
type Override = intent.Override

// Intent is a session's stored intent (docs/semantics.md#intent): the
// one definition, intent.Intent (a stdlib-only leaf). A nil Enabled or
// WebSearch is unset; a nil Picked is no picked list.
type Intent = intent.Intent

// Command is one intent command: an object with a "type" and that
// type's fields (docs/api.md, "Commands"); the client builds it with
// Enable, Disable, Preset and the other constructors.
type Command map[string]any

// Replies.
