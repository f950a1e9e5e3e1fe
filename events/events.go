// Package events defines the intent-change events of a session, their
// envelope, and the msgpack wire codec shared with writers in other
// languages.
//
// An event is one msgpack map with string keys:
//
//	{"id", "session", "channel", "actor", "time_ms", "v", "type", "data"}
//
// where "data" is the payload, itself a msgpack map with string keys. Decode
// is tolerant (unknown keys are ignored, older schema versions are upcast to
// SchemaVersion) and strict about what it returns (ids, session ids and
// tool names are validated). Decode never panics on any input; an event that
// cannot be decoded yields a *DecodeError that still carries whatever header
// fields could be read, so the caller can report it and move on.
//
// The package is pure: it imports only leaf packages of the project (intent,
// internal/clip, internal/toolname) and does no I/O. All functions are safe
// for concurrent use.
package events

import (
	"crypto/rand"
	"slices"
	"sync"

	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/intent"
)

// SchemaVersion is the envelope schema version this package writes. Decode
// accepts every version from 1 to SchemaVersion and upcasts older ones.
const SchemaVersion = 2

// MaxEventBytes bounds the encoded size of one event; larger events are
// refused by Encode and Decode (ErrTooLarge).
const MaxEventBytes = 64 << 10

// MaxListLen bounds every list of tool names in a payload.
const MaxListLen = 256

// MaxContractLen bounds the number of entries of CheckpointRecorded.Contract.
const MaxContractLen = 1024

// MaxTextLen bounds free-text fields (channel, actor, contract hash,
// registry version, per-tool hashes), in bytes.
const MaxTextLen = 256

// Type names an event type. It is written on the wire as the "type" string.
type Type string

// The event types.
const (
	TypeToolsToggled       Type = "ToolsToggled"
	TypeWebSearchSet       Type = "WebSearchSet"
	TypePresetChosen       Type = "PresetChosen"
	TypeToolDisabled       Type = "ToolDisabled"
	TypeToolEnabled        Type = "ToolEnabled"
	TypeToolsPicked        Type = "ToolsPicked"
	TypeDeferredLoaded     Type = "DeferredLoaded"
	TypeTurnStarted        Type = "TurnStarted"
	TypeTurnEnded          Type = "TurnEnded"
	TypeCheckpointRecorded Type = "CheckpointRecorded"
	TypeDeferredEvicted    Type = "DeferredEvicted"
	TypePermissionGranted  Type = "PermissionGranted"
	TypeSessionDeleted     Type = "SessionDeleted"
	TypeSessionCompacted   Type = "SessionCompacted"
)

var allTypes = [...]Type{
	TypeToolsToggled, TypeWebSearchSet, TypePresetChosen, TypeToolDisabled,
	TypeToolEnabled, TypeToolsPicked, TypeDeferredLoaded, TypeTurnStarted,
	TypeTurnEnded, TypeCheckpointRecorded, TypeDeferredEvicted, TypePermissionGranted,
	TypeSessionDeleted, TypeSessionCompacted,
}

// Types returns every known event type in a fixed order. The slice is a
// fresh copy.
func Types() []Type {
	out := make([]Type, len(allTypes))
	copy(out, allTypes[:])
	return out
}

// Known reports whether t is an event type this package can decode.
func (t Type) Known() bool {
	for _, k := range allTypes {
		if k == t {
			return true
		}
	}
	return false
}

// Payload is the typed body of an event. The concrete types are the ones
// declared in this package (values or pointers); Encode refuses others.
type Payload interface {
	// EventType names the event type the payload belongs to.
	EventType() Type
}

// Envelope is one event: header fields plus the typed payload.
type Envelope struct {
	// ID is the event's ULID (26 chars, Crockford base32). It is also the
	// JetStream dedupe id.
	ID string `msgpack:"id"`
	// Session is the session id; see ValidateSessionID.
	Session string `msgpack:"session"`
	// Channel names the front end that wrote the event ("web", "tui",
	// ...); "" for version-1 events, which did not record it.
	Channel string `msgpack:"channel"`
	// Actor names who wrote the event; "" for version-1 events.
	Actor string `msgpack:"actor"`
	// TimeMs is the write time in unix milliseconds.
	TimeMs int64 `msgpack:"time_ms"`
	// Version is the schema version. Decode upcasts older events, so a
	// decoded envelope always has Version == SchemaVersion; Encode accepts
	// 0 (meaning SchemaVersion) or SchemaVersion.
	Version int `msgpack:"v"`
	// Type is the event type; it must match Payload.EventType(). Encode
	// fills it in when empty.
	Type Type `msgpack:"type"`
	// Payload is the typed body, encoded under key "data".
	Payload Payload `msgpack:"-"`
}

// New returns an envelope for p with a fresh ULID, the current time (the
// ULID's millisecond, so TimeMs and the id agree) and SchemaVersion. It does
// not validate; Encode does.
func New(session, channel, actor string, p Payload) Envelope {
	id, ms := newID()
	e := Envelope{
		ID:      id,
		Session: session,
		Channel: channel,
		Actor:   actor,
		TimeMs:  int64(ms),
		Version: SchemaVersion,
		Payload: p,
	}
	if v, ok := deref(p); ok {
		e.Type = v.EventType()
	}
	return e
}

// NewID returns a fresh ULID string. IDs generated by one process are
// strictly increasing in generation order (monotonic entropy within a
// millisecond, and a clock that never goes back); it is safe for concurrent
// use.
func NewID() string {
	id, _ := newID()
	return id
}

var idGen struct {
	sync.Mutex
	lastMs  uint64
	entropy *ulid.MonotonicEntropy
}

// newID returns a ULID and its millisecond timestamp. The clock is read
// under the lock and never moves backwards, so ids are globally ordered.
func newID() (string, uint64) {
	idGen.Lock()
	defer idGen.Unlock()
	ms := ulid.Now()
	if ms < idGen.lastMs {
		ms = idGen.lastMs
	}
	if idGen.entropy == nil {
		idGen.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	id, err := ulid.New(ms, idGen.entropy)
	if err != nil {
		// Monotonic overflow within one millisecond (practically
		// unreachable): move to the next millisecond and a fresh sequence.
		ms++
		idGen.entropy = ulid.Monotonic(rand.Reader, 0)
		if id, err = ulid.New(ms, idGen.entropy); err != nil {
			id = ulid.MustNew(ms, rand.Reader)
		}
	}
	idGen.lastMs = ms
	return id.String(), ms
}

// ToolsToggled sets the master switch of the session's intent.
type ToolsToggled struct {
	// Enabled is true (all on), false (all off) or nil (follow profile).
	Enabled *bool `msgpack:"enabled" json:"enabled"`
}

// WebSearchSet sets the web_search overlay.
type WebSearchSet struct {
	// Enabled is true, false or nil (unset).
	Enabled *bool `msgpack:"enabled" json:"enabled"`
}

// PresetChosen sets the session's preset.
type PresetChosen struct {
	// Preset is the preset name; "" unsets it.
	Preset string `msgpack:"preset" json:"preset"`
}

// ToolDisabled switches one tool off by hand, or every tool a name
// pattern matches (mcp__github__*).
type ToolDisabled struct {
	// Name is the tool name or pattern.
	Name string `msgpack:"name" json:"name"`
}

// ToolEnabled undoes a ToolDisabled for one name or pattern.
type ToolEnabled struct {
	// Name is the tool name or pattern, as disabled.
	Name string `msgpack:"name" json:"name"`
}

// ToolsPicked sets the explicit, user-curated tool list.
type ToolsPicked struct {
	// Names is the list in the user's order, of names or patterns (a
	// pattern picks every tool it matches, in registry order); nil unsets
	// it, an empty non-nil list picks no tools.
	Names []string `msgpack:"names" json:"names"`
}

// DeferredLoaded records deferred tools loaded by tool_search.
type DeferredLoaded struct {
	// Names are the loaded deferred tools.
	Names []string `msgpack:"names" json:"names"`
	// Turn is the turn in which they were loaded.
	Turn uint64 `msgpack:"turn" json:"turn"`
}

// DeferredEvicted records loaded deferred tools unloaded at a turn
// boundary to keep the loaded set bounded: stored between a
// turn's end and the next TurnStarted, it removes Names from the loaded
// set, so the next turn's array no longer carries them (a prefix change
// of cause "evict"); tool_search loads them again when needed.
type DeferredEvicted struct {
	// Names are the evicted tools, each loaded when the event was stored.
	Names []string `msgpack:"names" json:"names"`
	// Turn is the last turn started before the eviction (it has ended).
	Turn uint64 `msgpack:"turn" json:"turn"`
	// Reason says why, for history and explain (e.g. "bound").
	Reason string `msgpack:"reason" json:"reason"`
}

// The scopes of a PermissionGranted.
const (
	// ScopeSession allows the tool for the rest of the session.
	ScopeSession = "session"
	// ScopeOnce allows the tool in the turn the answer was given in only.
	ScopeOnce = "once"
)

// PermissionGranted records the user's answer to an "ask" decision:
// By allowed Tool for the session, or once (in turn Turn only). Folded
// into the session, it turns the channel policy's ask into allow on every
// engine that replays the log; it never widens the tool set (a tool the
// resolution leaves out or the policy denies stays out).
type PermissionGranted struct {
	// By names who answered (the user), as the backend knows them.
	By string `msgpack:"by" json:"by"`
	// Scope is ScopeSession or ScopeOnce.
	Scope string `msgpack:"scope" json:"scope"`
	// Tool is the allowed tool's name.
	Tool string `msgpack:"tool" json:"tool"`
	// Turn is the turn the answer was given in (0: the current one when
	// sent as a command).
	Turn uint64 `msgpack:"turn" json:"turn"`
}

// SessionDeleted closes the session for good: the fold refuses
// every later event of the session, whoever publishes it, and the engine
// answers reads with a "deleted" error; the id never starts a new
// incarnation. The events before it stay in the log (an erase purges
// them).
type SessionDeleted struct {
	// Reason optionally says why, for history and audits ("" for none);
	// it must not name a person.
	Reason string `msgpack:"reason" json:"reason"`
}

// TurnStarted marks the start of a turn; the tool set is frozen.
//
// It records what any engine needs to rebuild the frozen turn byte for
// byte: the resolution request (the session's intent at the start,
// the agent profile and the per-turn override, each as intent, never an
// expanded tool list), the registry version it was resolved against
// and the resulting contract hash. Events written before these fields
// existed carry only Turn: they decode with the others empty, and an
// engine rebuilding such a turn uses the session's current intent and its
// live registry.
type TurnStarted struct {
	// Turn is the turn number, starting at 1.
	Turn uint64 `msgpack:"turn" json:"turn"`
	// Intent is the session's stored intent when the turn started; nil
	// when not recorded (older events).
	Intent *intent.Intent `msgpack:"intent" json:"intent,omitempty"`
	// Profile is the agent profile of the turn; "" for none.
	Profile string `msgpack:"profile" json:"profile,omitempty"`
	// Override is the per-turn override; nil for none.
	Override *TurnOverride `msgpack:"override" json:"override,omitempty"`
	// RegistryVersion is the version of the registry the turn was
	// resolved against; "" when not recorded.
	RegistryVersion string `msgpack:"registry_version" json:"registry_version,omitempty"`
	// ContractHash is the contract hash of the frozen resolution; set
	// together with RegistryVersion.
	ContractHash string `msgpack:"contract_hash" json:"contract_hash,omitempty"`
	// Provider is the provider mode the turn was begun for (a row of the
	// provider table, e.g. "anthropic" or "openai-engine"); "" when not
	// recorded, which reads as the default mode. It decides nothing of
	// the frozen tools: readers (call-check, the inspector, prompt-cache
	// figures) use it to see the turn as its backend sends it.
	Provider string `msgpack:"provider" json:"provider,omitempty"`
}

// Recorded reports whether the event records its request (RegistryVersion
// set): a turn an engine can rebuild exactly. Older events do not.
func (t TurnStarted) Recorded() bool { return t.RegistryVersion != "" }

// TurnIntent is an intent as a TurnStarted records it: the fields of a
// session's stored intent, nothing else. In JSON a TurnStarted writes
// its picked lists even when nil (null), so that nil (unset) and empty
// (pick none) stay apart in a command (see TurnStarted.MarshalJSON).
//
// Use intent.Intent.
type TurnIntent = intent.Intent

// Override kinds of TurnOverride.Kind; no override is a nil
// *TurnOverride.
const (
	OverrideEmpty  = "empty"
	OverrideIntent = "intent"
	OverrideNames  = "names"
)

// TurnOverride is a per-turn override (an intent.Override) as a
// TurnStarted records it: the kind as its string and the intent only
// for kind "intent", so that the fold can refuse a record from another
// writer whose fields do not fit its kind (checkTurnStarted).
// RecordOverride and Override convert; no other code needs to. It stays
// apart from intent.Override because the stored msgpack holds what that
// type cannot: the kind as any string (an unknown one must decode and be
// rejected by the fold, not fail to decode) and whether an intent map is
// present, so one type would change stored bytes or verdicts.
type TurnOverride struct {
	// Kind is OverrideEmpty, OverrideIntent or OverrideNames.
	Kind string `msgpack:"kind" json:"kind"`
	// Intent is the override intent (Kind OverrideIntent).
	Intent *intent.Intent `msgpack:"intent" json:"intent,omitempty"`
	// Allowed filters the defaults (Kind OverrideIntent).
	Allowed []string `msgpack:"allowed" json:"allowed,omitempty"`
	// Names are the user's names, in order (Kind OverrideNames): a short
	// curated list, bounded like a picked list.
	Names []string `msgpack:"names" json:"names,omitempty"`
}

// TurnEnded marks the end of a turn. The engine writes a turn's end at a
// safe point as this one event with the checkpoint inside, one log
// write; logs written before that hold a TurnEnded without a checkpoint
// followed by a CheckpointRecorded (one atomic batch), and both forms fold
// to the same state (see package aggregate).
type TurnEnded struct {
	// Turn is the turn number.
	Turn uint64 `msgpack:"turn" json:"turn"`
	// Checkpoint is the checkpoint recorded as the turn ended, nil when
	// none was. The fold applies it exactly as a CheckpointRecorded right
	// after this event, with the same rules; an invalid one rejects the
	// whole event. Clients send CheckpointRecorded; no command carries it.
	Checkpoint *CheckpointRecorded `msgpack:"checkpoint,omitempty" json:"checkpoint,omitempty"`
}

// Clone returns a copy of t that shares no slice or pointer with it.
func (t TurnEnded) Clone() TurnEnded {
	if t.Checkpoint != nil {
		c := t.Checkpoint.Clone()
		t.Checkpoint = &c
	}
	return t
}

// ContractEntry is one tool of a recorded contract: its name and the hash of
// its contract bytes, so a resume can tell which tools are unchanged.
type ContractEntry struct {
	// Name is the tool name.
	Name string `msgpack:"name" json:"name"`
	// Hash is the hex hash of the tool's contract bytes.
	Hash string `msgpack:"hash" json:"hash"`
}

// CheckpointRecorded records the loaded deferred set at a persistence safe
// point, with the contract it belongs to. It is the one
// checkpoint record of the core: checkpoint.Record is this type, and
// aggregate.Checkpoint is it plus the event's stream sequence.
type CheckpointRecorded struct {
	// Loaded is loaded_deferred_tools; absent on the wire (older format)
	// decodes as nil, which means the empty set.
	Loaded []string `msgpack:"loaded_deferred_tools" json:"loaded_deferred_tools"`
	// ContractHash is the hash of the tool contract Loaded belongs to.
	ContractHash string `msgpack:"contract_hash" json:"contract_hash"`
	// RegistryVersion is the registry version of that contract.
	RegistryVersion string `msgpack:"registry_version" json:"registry_version"`
	// Turn is the turn at which the checkpoint was taken.
	Turn uint64 `msgpack:"turn" json:"turn"`
	// Contract optionally lists each tool of the contract with its hash.
	Contract []ContractEntry `msgpack:"contract" json:"contract"`
}

// Clone returns a copy of c that shares no slice with it; nil lists stay
// nil (an older checkpoint without loaded_deferred_tools).
func (c CheckpointRecorded) Clone() CheckpointRecorded {
	c.Loaded = slices.Clone(c.Loaded)
	c.Contract = slices.Clone(c.Contract)
	return c
}

// EventType implements Payload.
func (ToolsToggled) EventType() Type { return TypeToolsToggled }

// EventType implements Payload.
func (WebSearchSet) EventType() Type { return TypeWebSearchSet }

// EventType implements Payload.
func (PresetChosen) EventType() Type { return TypePresetChosen }

// EventType implements Payload.
func (ToolDisabled) EventType() Type { return TypeToolDisabled }

// EventType implements Payload.
func (ToolEnabled) EventType() Type { return TypeToolEnabled }

// EventType implements Payload.
func (ToolsPicked) EventType() Type { return TypeToolsPicked }

// EventType implements Payload.
func (DeferredLoaded) EventType() Type { return TypeDeferredLoaded }

// EventType implements Payload.
func (TurnStarted) EventType() Type { return TypeTurnStarted }

// EventType implements Payload.
func (TurnEnded) EventType() Type { return TypeTurnEnded }

// EventType implements Payload.
func (CheckpointRecorded) EventType() Type { return TypeCheckpointRecorded }

// EventType implements Payload.
func (DeferredEvicted) EventType() Type { return TypeDeferredEvicted }

// EventType implements Payload.
func (PermissionGranted) EventType() Type { return TypePermissionGranted }

// EventType implements Payload.
func (SessionDeleted) EventType() Type { return TypeSessionDeleted }

// PayloadValue returns p in value form: a pointer to one of this package's
// payload types is dereferenced, a value is returned as is. ok is false for
// nil, a nil pointer or a type not declared in this package. Consumers that
// switch on payload types call it first so both forms are handled.
func PayloadValue(p Payload) (v Payload, ok bool) { return deref(p) }
