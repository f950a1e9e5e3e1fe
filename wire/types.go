package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// AppendReply is the outcome of Append: pass LastSeq as MinSeq to read
// your writes.
type AppendReply struct {
	Session   string `json:"session"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Duplicate bool   `json:"duplicate"`
	Retries   int    `json:"retries"`
	// EventIDs are the stored events' ids.
	EventIDs []string `json:"event_ids,omitempty"`
	State    Session  `json:"state"`
}

// Session is a session's stored state.
type Session struct {
	Session    string      `json:"session"`
	Seq        uint64      `json:"seq"`
	Intent     Intent      `json:"intent"`
	Loaded     []string    `json:"loaded"`
	Turn       uint64      `json:"turn"`
	InTurn     bool        `json:"in_turn"`
	Events     uint64      `json:"events"`
	Skipped    uint64      `json:"skipped"`
	Rejected   uint64      `json:"rejected"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	Rejections []Rejection `json:"rejections,omitempty"`
}

// Rejection is an event kept in the log but not applied: Kind "skipped"
// (undecodable) or "rejected" (breaks a rule of the fold).
type Rejection struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// Checkpoint is a recorded checkpoint.
type Checkpoint struct {
	Loaded          []string        `json:"loaded_deferred_tools"`
	ContractHash    string          `json:"contract_hash"`
	RegistryVersion string          `json:"registry_version"`
	Turn            uint64          `json:"turn"`
	Seq             uint64          `json:"seq,omitempty"`
	Contract        []ContractEntry `json:"contract,omitempty"`
}

// ContractEntry is one tool of a checkpoint's contract with its hash.
type ContractEntry struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

// TurnView is what a backend sends to the provider for one request (the
// reply of resolve, turn-begin and turn-dispatch): the rendered tools
// array (Rendering, to send as is), the deferred catalog for the system
// prompt (CatalogText), and how they came about.
type TurnView struct {
	Session string `json:"session"`
	// Seq is the session sequence the view was resolved at.
	Seq uint64 `json:"seq"`
	// Turn is the open turn's number (0 outside a turn); Frozen says the
	// tools come from a frozen turn.
	Turn   uint64 `json:"turn"`
	Frozen bool   `json:"frozen"`
	// Intent is the session's stored intent.
	Intent Intent `json:"intent"`
	// Source names the rule that decided the base list.
	Source string `json:"source"`
	// Tools are every available tool of the resolution, in order.
	Tools []string `json:"tools"`
	// Provider are the names whose schema is in the provider array.
	Provider []string `json:"provider"`
	// Catalog are the deferred names, and CatalogText the text sent.
	Catalog     []string `json:"catalog"`
	CatalogText string   `json:"catalog_text"`
	// Unknown are requested names the registry lacks or cannot run.
	Unknown []string `json:"unknown,omitempty"`
	// Rendering is the provider tools array, byte-deterministic.
	Rendering json.RawMessage `json:"rendering"`
	// RenderedFor is the provider of Rendering.
	RenderedFor string `json:"rendered_for"`
	// PrefixHash is the sha256 of the part of Rendering the provider
	// caches as the request's tools prefix, by its documented rule
	// (docs/semantics.md#prompt-cache): equal hashes, equal prompt-cache
	// prefix. ReferencesHash, for a provider that expands a discovered
	// tool's definition at its tool_reference in the history (Anthropic's
	// native modes), is the sha256 of the definitions of the tools the
	// history references; "" otherwise.
	PrefixHash     string `json:"prefix_hash"`
	ReferencesHash string `json:"references_hash,omitempty"`
	// RenderingHash is the sha256 of Rendering's bytes: a caller holding
	// the rendering sends it as if_none_match (HTTP If-None-Match) and the
	// reply leaves the rendering out, RenderingUnchanged set.
	RenderingHash      string `json:"rendering_hash"`
	RenderingUnchanged bool   `json:"rendering_unchanged,omitempty"`
	// Lists says which page of the name lists (Tools, Provider, Catalog,
	// Classification, Unknown, Withheld, DroppableReferences) the reply
	// holds.
	Lists ViewLists `json:"lists"`
	// ContractHash and RegistryVersion identify the tool contract.
	ContractHash    string `json:"contract_hash"`
	RegistryVersion string `json:"registry_version"`
	// Budget is the token estimate.
	Budget Budget `json:"budget"`
	// Classification is each tool's resident/deferred class.
	Classification []Classification `json:"classification"`
	// Loaded are the session's loaded deferred tools.
	Loaded []string `json:"loaded"`
	// DroppableReferences, in a native mode, are the tools the session's
	// history references (a tool_reference block, or a tool_search_output
	// item, loaded them) that are no longer loaded (evicted, or disabled
	// since): the provider keeps their definitions in its context as long
	// as those blocks stay in the history, so a backend compacting its
	// history may drop them. The array keeps defining them while the log
	// references them.
	DroppableReferences []string `json:"droppable_references,omitempty"`
	// NoEvents is true when the session had no events before this
	// request: its intent is unset, so the profile or the defaults decide.
	// Clients can warn about a mistyped session id.
	NoEvents bool `json:"no_events,omitempty"`
	// Policy is the version of the registry's channel policy and
	// Withheld the tools it kept from this channel, in order; both
	// empty without a policy.
	Policy   string   `json:"policy,omitempty"`
	Withheld []string `json:"withheld,omitempty"`
}

// SplitRaw returns v with its rendering replaced by mark, and the
// rendering (RawReply): the engine rendered it compact and valid, so a
// JSON reply writes it in without encoding/json scanning it again.
func (v TurnView) SplitRaw(mark json.RawMessage) (any, []byte) {
	raw := v.Rendering
	v.Rendering = mark
	return v, raw
}

// ETag returns the HTTP entity tag of the reply: the sha256 of the reply
// with its rendering left out (its hash is in it), so it changes exactly
// when a byte of the reply does, without hashing the rendering again.
func (v TurnView) ETag() string {
	v.Rendering = nil
	return tagOf(v)
}

// tagOf is the sha256 of v's JSON, in hex ("" when it does not encode).
func tagOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ViewLists says which page of a view's name lists (tools, provider,
// catalog, classification, unknown, withheld) a reply holds: the entries
// [Offset, Offset+Limit) of each, with each full list's length; Complete
// when every list is whole.
type ViewLists struct {
	Offset         int  `json:"offset"`
	Limit          int  `json:"limit"`
	Tools          int  `json:"tools"`
	Provider       int  `json:"provider"`
	Catalog        int  `json:"catalog"`
	Classification int  `json:"classification"`
	Unknown        int  `json:"unknown"`
	Withheld       int  `json:"withheld"`
	Droppable      int  `json:"droppable_references"`
	Complete       bool `json:"complete"`
}

// Budget is the estimated token cost of one dispatch: Resident of the
// provider tools array, Catalog of the catalog text (0 when it is empty),
// Total their sum; ResidentTools counts the tools in the array (resident
// plus loaded deferred ones), DeferredTools the names in the catalog.
type Budget struct {
	Resident      int `json:"resident"`
	Catalog       int `json:"catalog"`
	Total         int `json:"total"`
	ResidentTools int `json:"resident_tools"`
	DeferredTools int `json:"deferred_tools"`
}

// Classification is one tool's class in a resolution.
type Classification struct {
	Name     string `json:"name"`
	Resident bool   `json:"resident"`
	Deferred bool   `json:"deferred"`
	Loaded   bool   `json:"loaded"`
}

// History is a session's timeline (the reply of session.history), one
// page of it: the entries in stream order, the session after the last of
// them.
type History = HistoryOf[Command]

// HistoryEntry is one event of a timeline with the state it left.
type HistoryEntry = HistoryEntryOf[Command]

// HistoryOf is a page of a session's timeline whose entries carry their
// event's payload as P: a client decodes it as a Command, the engine
// holds the decoded event.
type HistoryOf[P any] struct {
	Session string              `json:"session"`
	Entries []HistoryEntryOf[P] `json:"entries"`
	// State is the session after the last entry of this page (after the
	// whole timeline on its last page).
	State Session `json:"state"`
	// More is true when the session has events after this page (within
	// the request's until): ask again with after_seq = NextAfterSeq, the
	// Seq of this page's last entry (absent when not More).
	More         bool   `json:"more"`
	NextAfterSeq uint64 `json:"next_after_seq,omitempty"`
}

// HistoryEntryOf is one event of a timeline, its payload as P (absent:
// undecodable), with the point it left (HistoryPoint).
type HistoryEntryOf[P any] struct {
	EventRef
	Payload P `json:"payload,omitempty"`
	HistoryPoint
}

// HistoryPoint is what a history entry shows of the session after its
// event: whether the event applied, the intent, the resolved tools and
// how they changed.
type HistoryPoint struct {
	// Error says why the event was not applied ("" when it was); Rejected
	// is true when it broke a fold rule rather than being undecodable.
	Error    string `json:"error,omitempty"`
	Rejected bool   `json:"rejected,omitempty"`
	// Intent is the session's intent after the event.
	Intent Intent `json:"intent"`
	// Tools is the resolved tool set after the event; Gained and Lost
	// compare it with the set before. Inside a turn it is the turn's
	// frozen set, rebuilt from its TurnStarted.
	Tools  []string `json:"tools"`
	Gained []string `json:"gained,omitempty"`
	Lost   []string `json:"lost,omitempty"`
	// Provider and Catalog split Tools for a dispatch at this point.
	Provider []string `json:"provider"`
	Catalog  []string `json:"catalog"`
	// Loaded is the loaded deferred set after the event.
	Loaded []string `json:"loaded"`
	// PrefixHash is the sha256 of the rendered provider array;
	// PrefixChanged says whether it differs from before the event, and
	// Cause why: "intent", "discovery", "evict", "checkpoint", "resume",
	// "turn", "compaction" (the state a snapshot carries) or "registry"
	// (another registry version was in force, or the checkpoint recorded
	// another one).
	PrefixHash    string `json:"prefix_hash"`
	PrefixChanged bool   `json:"prefix_changed"`
	// ReferencesHash, in Anthropic's native modes, is the hash of the
	// definitions the provider expands at the history's tool_reference
	// blocks; PrefixChanged counts a change of it too (a cache break from
	// the first reference of the changed tool on).
	ReferencesHash string `json:"references_hash,omitempty"`
	Cause          string `json:"cause,omitempty"`
	// Turn and InTurn are the turn state after the event.
	Turn   uint64 `json:"turn"`
	InTurn bool   `json:"in_turn"`
	// RegistryVersion is the registry this point resolved against: the
	// open turn's (recorded in its TurnStarted), else the version in
	// force when the event was stored (the registry history's timeline),
	// else the live one.
	RegistryVersion string `json:"registry_version"`
	// Dispatch is, inside a turn, the resident/deferred classification a
	// provider dispatch at this point records: derived from the log, for
	// any past turn.
	Dispatch *DispatchRecord `json:"dispatch,omitempty"`
	// Compacted, on the entry of an applied SessionCompacted, says which
	// events it replaced, when they were written, and who compacted them:
	// the history before it is that one entry.
	Compacted *Compaction `json:"compacted,omitempty"`
	// Lists, present when a list of the entry was cut to the engine's
	// most names per list (64), gives each list's full length.
	Lists *EntryLists `json:"lists,omitempty"`
}

// EntryLists gives the full length of each list of a history entry whose
// lists were cut (tools, provider, catalog, gained, lost, and its
// dispatch's resident, deferred and loaded).
type EntryLists struct {
	Tools    int `json:"tools"`
	Provider int `json:"provider"`
	Catalog  int `json:"catalog"`
	Gained   int `json:"gained"`
	Lost     int `json:"lost"`
	Resident int `json:"resident"`
	Deferred int `json:"deferred"`
	Loaded   int `json:"loaded"`
}

// EventRef names an event of the log.
type EventRef struct {
	Seq     uint64    `json:"seq"`
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Channel string    `json:"channel"`
	Actor   string    `json:"actor"`
	Time    time.Time `json:"time"`
}

// Explanation says why a tool is in or out: the deciding Rule and the
// Event after which that last changed (nil: no event did).
type Explanation struct {
	Tool            string    `json:"tool"`
	Included        bool      `json:"included"`
	Rule            string    `json:"rule"`
	Detail          string    `json:"detail"`
	Event           *EventRef `json:"event,omitempty"`
	RegistryVersion string    `json:"registry_version"`
	// Evicted is the DeferredEvicted that unloaded the tool at a turn
	// boundary, when no load since has loaded it again.
	Evicted *EventRef `json:"evicted,omitempty"`
	Seq     uint64    `json:"seq"`
}

// DiscoverReply is the outcome of a tool_search call (turn-discover):
// what it found and loaded, and the turn afterwards.
type DiscoverReply struct {
	// Tools are the full schemas of the tools found: the requested
	// names in this turn's set, then the query and regex matches.
	Tools []Tool `json:"tools"`
	// Loaded are the names this call loaded.
	Loaded []string `json:"loaded"`
	// NotFound are requested names this turn cannot load: a soft result,
	// the call succeeds.
	NotFound []string `json:"not_found,omitempty"`
	// Matches are the ranked query and regex results.
	Matches []Match `json:"matches,omitempty"`
	// Note tells the model what went unanswered, if anything.
	Note string `json:"note,omitempty"`
	// Output is the tool result to send back to the model for this
	// tool_search call, byte-deterministic.
	Output json.RawMessage `json:"output"`
	// View is the next provider request of the turn, carrying the loaded
	// tools' schemas.
	View TurnView `json:"view"`
}

// SplitRaw is TurnView.SplitRaw for the view a discovery returns.
func (d DiscoverReply) SplitRaw(mark json.RawMessage) (any, []byte) {
	raw := d.View.Rendering
	d.View.Rendering = mark
	return d, raw
}

// ETag is TurnView.ETag for the reply of a discovery.
func (d DiscoverReply) ETag() string {
	d.View.Rendering = nil
	return tagOf(d)
}

// Tool is a registry tool with its schema: Parameters is the JSON
// Schema of its input, Permission the permission wrapper execution goes
// through, Native its provider-native forms (absent when it renders as a
// function).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Available   bool            `json:"available"`
	Permission  string          `json:"permission,omitempty"`
	Native      ToolNative      `json:"native,omitzero"`
}

// ToolNative is a tool's provider-native forms: the provider's built-in
// tool the rendering for that provider emits instead of a function, a
// JSON object each (nil: a function).
type ToolNative struct {
	// Anthropic is the Messages API tool object, e.g.
	// {"max_uses":5,"name":"web_search","type":"web_search_20250305"}.
	Anthropic json.RawMessage `json:"anthropic,omitempty"`
	// OpenAI is the Responses API tool object, e.g. {"type":"web_search"}.
	OpenAI json.RawMessage `json:"openai,omitempty"`
}

// IsZero reports whether no provider has a native form.
func (n ToolNative) IsZero() bool { return len(n.Anthropic) == 0 && len(n.OpenAI) == 0 }

// Match is one ranked result of a query or regex.
type Match struct {
	// Name is the tool name.
	Name string `json:"name"`
	// Via is "query" or "regex".
	Via string `json:"via"`
	// Score is the ranking score within its search; a query that is
	// exactly the tool's name scores math.MaxFloat64 (the index ranks it
	// +Inf, which JSON cannot carry).
	Score float64 `json:"score"`
	// Weak marks a query match too far below the best one (under the
	// engine's confident share) to be loaded: it is listed, not loaded.
	Weak bool `json:"weak,omitempty"`
}

// DispatchRecord is the classification of a session's last dispatch.
type DispatchRecord struct {
	Session      string   `json:"session"`
	Turn         uint64   `json:"turn"`
	ContractHash string   `json:"contract_hash"`
	Resident     []string `json:"resident"`
	Deferred     []string `json:"deferred"`
	Loaded       []string `json:"loaded"`
	AtMs         int64    `json:"at_ms"`
	// Lists, present when turn-inspect cut the lists to their first 128
	// names each, gives their full lengths (Resident, Deferred, Loaded).
	Lists *EntryLists `json:"lists,omitempty"`
}

// CheckpointReply is the reply of turn-checkpoint and turn-end.
type CheckpointReply struct {
	Session    string     `json:"session"`
	Seq        uint64     `json:"seq"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// ResumeReply is the outcome of Resume.
type ResumeReply struct {
	Session    string        `json:"session"`
	Outcome    ResumeOutcome `json:"outcome"`
	Checkpoint *Checkpoint   `json:"checkpoint,omitempty"`
	Seq        uint64        `json:"seq"`
}

// ResumeOutcome says what a resume restored and why each loaded tool was
// restored or dropped; OK is true when every loaded tool came back.
type ResumeOutcome struct {
	Restored []string         `json:"restored"`
	OK       bool             `json:"ok"`
	Reason   string           `json:"reason"`
	Changes  []ContractChange `json:"changes,omitempty"`
	Tools    []ResumeDecision `json:"tools"`
}

// ResumeDecision is what a resume did with one loaded tool.
type ResumeDecision struct {
	Tool   string `json:"tool"`
	Kind   string `json:"kind"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason"`
}

// ContractChange is one difference between a checkpoint's contract and
// the current one.
type ContractChange struct {
	Tool        string `json:"tool,omitempty"`
	Kind        string `json:"kind"`
	From        string `json:"from,omitempty"`
	To          string `json:"to,omitempty"`
	Description string `json:"description"`
}

// SessionList lists the sessions that have a view.
type SessionList struct {
	Sessions []string `json:"sessions"`
}

// The reasons of a CallCheckReply.
const (
	// CallCallable: the tool is in the open turn's tools and the session
	// does not disable it.
	CallCallable = "callable"
	// CallDisabled: the session disables the tool (now, even if the turn
	// froze it before the disable, or a native rendering still defines it
	// because the history references it).
	CallDisabled = "disabled"
	// CallNotInTurn: the turn's registry has the tool, but the turn's
	// resolution leaves it out (the intent, the profile, the override or
	// the channel's policy), or it cannot run in this deployment.
	CallNotInTurn = "not_in_turn"
	// CallUnknown: the turn's registry has no tool of that name.
	CallUnknown = "unknown"
	// CallNotLoaded: in an engine-side mode (anthropic-engine,
	// openai-engine) the tool is deferred and not loaded, so the
	// request's array does not define it: tool_search loads it first.
	CallNotLoaded = "not_loaded"
	// CallAsk: the tool's decision is "ask" and the user has not allowed
	// it: the backend asks the user and records the answer
	// (PermissionGranted) before it runs the call.
	CallAsk = "ask"
	// CallDenied: the channel policy denies the tool (a turn frozen
	// before a policy change can hold one).
	CallDenied = "denied"
)

// CallCheckReply says whether a tool call may execute in the session's
// open turn (turn-call-check), and with what.
type CallCheckReply struct {
	Session string `json:"session"`
	// Seq is the session sequence the check was decided at.
	Seq uint64 `json:"seq"`
	// Turn is the open turn's number.
	Turn uint64 `json:"turn"`
	// Name is the tool asked about.
	Name string `json:"name"`
	// Callable is true only for Reason CallCallable.
	Callable bool `json:"callable"`
	// Reason is one of the Call* reasons.
	Reason string `json:"reason"`
	// Note says the same for a person or a model, with what to do.
	Note string `json:"note"`
	// Tool is the turn's resolved tool (its frozen definition and
	// Permission, the wrapper execution goes through); nil when the turn
	// does not hold it. For a disabled tool of the turn it is still given,
	// with Callable false.
	Tool *Tool `json:"tool,omitempty"`
	// Permission is Tool's permission ("" without Tool).
	Permission string `json:"permission,omitempty"`
	// Deferred and Loaded say whether the tool is deferred, and loaded by
	// the engine's tool_search in the session. In a native mode a deferred
	// tool the engine has not loaded stays callable: the array defines it
	// (defer_loading), and a provider's own search (such as
	// anthropic-native-server) loads tools the engine does not see. In an
	// engine-side mode the array defines only the resident and loaded
	// tools, so a deferred tool that is not loaded is CallNotLoaded.
	Deferred bool `json:"deferred"`
	Loaded   bool `json:"loaded"`
	// Provider is the provider mode the check was decided for: the
	// request's, else the one the turn was begun for, else the default.
	Provider string `json:"provider"`
	// Channel is the channel whose policy decided: the open turn's.
	Channel string `json:"channel,omitempty"`
	// Decision is the permission decision for a known tool: "allow",
	// "ask" or "deny", "" for an unknown tool; an ask the user allowed
	// reads "allow" with Grant set.
	Decision string `json:"decision,omitempty"`
	// Rule names what decided (the registry policy's rule, or
	// "granted:SCOPE:BY@SEQ" for an answered ask).
	Rule string `json:"rule,omitempty"`
	// Grant is the user's answer that allowed an ask, nil otherwise.
	Grant *Grant `json:"grant,omitempty"`
}

// Grant is a user's answer to an "ask": Tool allowed for Scope
// ("session" or "once") by By in Turn, recorded at stream sequence Seq.
type Grant struct {
	Tool  string `json:"tool"`
	Scope string `json:"scope"`
	By    string `json:"by"`
	Turn  uint64 `json:"turn"`
	Seq   uint64 `json:"seq"`
}
