package wire

import "net/http"

// Header names.
const (
	// HeaderChannel names the writing channel on HTTP requests. Over NATS
	// the channel is the subject token.
	HeaderChannel = "Engine-Channel"
	// HeaderActor names the writing actor (a user id) on both transports;
	// it wins over a body "actor" field.
	HeaderActor = "Engine-Actor"
	// HeaderIdempotencyKey carries an append's idempotency key (any
	// string of 1 to 255 bytes, case-sensitive: a UUID, say) on both
	// transports, as the body's event_id does.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderErrorCode carries the error code on NATS error replies, beside
	// the micro Nats-Service-Error-Code (the HTTP status).
	HeaderErrorCode = "Engine-Error-Code"
	// HeaderRetryAfter is on every 429 and 503 reply, HTTP and NATS: the
	// seconds to wait before retrying (RFC 9110 delay-seconds).
	HeaderRetryAfter = "Retry-After"
)

// Media types of request and reply bodies.
const (
	MIMEJSON    = "application/json"
	MIMEMsgpack = "application/msgpack"
)

// Operation describes one operation of the API, the same over both
// transports: over NATS a request to <prefix>.<channel>.<Subject> (micro
// endpoint Name), over HTTP one of Methods on Path.
type Operation struct {
	// Name is the micro endpoint name.
	Name string `json:"name"`
	// Subject is the subject suffix after <prefix>.<channel>.
	Subject string `json:"subject"`
	// Methods and Path are the HTTP route ({session} and {tool} are path
	// values). A client sends the last method.
	Methods []string `json:"methods"`
	Path    string   `json:"path"`
	// Write is true for operations that append events: they record the
	// channel and actor.
	Write bool `json:"write"`
	// Purges is true for operations that purge events from the log
	// (compaction): only the engine's erase channel may call them.
	Purges bool `json:"purges,omitempty"`
	// Records is true for operations that write no event but record
	// something in the engine (turn-dispatch, the classification
	// turn-inspect reads): like a write, a read-only token may not call
	// them.
	Records bool `json:"records,omitempty"`
	// Summary says what the operation does.
	Summary string `json:"summary"`
}

// Method is the HTTP method a client sends: the last of Methods (POST
// where both GET and POST are served, so that a structured request goes
// in a body).
func (o Operation) Method() string { return o.Methods[len(o.Methods)-1] }

// ReadOnly reports whether the operation changes nothing (neither Write
// nor Records): the operations a read-only token may call.
func (o Operation) ReadOnly() bool { return !o.Write && !o.Records }

const (
	get  = http.MethodGet
	post = http.MethodPost
	del  = http.MethodDelete
)

// The operations of the API (docs/api.md), in the order Operations lists
// them. The engine serves each over both transports; the client calls them.
var (
	OpAppend = Operation{Name: "append", Subject: "events.append", Methods: []string{post}, Path: "/v1/sessions/{session}/events", Write: true,
		Summary: "Append intent commands to a session, atomically, with an optional expected sequence."}
	OpIntent = Operation{Name: "intent", Subject: "session.intent", Methods: []string{get}, Path: "/v1/sessions/{session}",
		Summary: "Read a session's stored intent, loaded deferred tools, turn and last checkpoint."}
	OpResolve = Operation{Name: "resolve", Subject: "session.resolve", Methods: []string{get, post}, Path: "/v1/sessions/{session}/resolve",
		Summary: "Resolve a session's tools: provider rendering, resident array, catalog, contract hash, classification."}
	OpHistory = Operation{Name: "history", Subject: "session.history", Methods: []string{get}, Path: "/v1/sessions/{session}/history",
		Summary: "A page of a session's event timeline with the intent and tool-set changes at each event (until SEQ or RFC 3339 time; after_seq, limit)."}
	OpExplain = Operation{Name: "explain", Subject: "session.explain", Methods: []string{get}, Path: "/v1/sessions/{session}/explain/{tool}",
		Summary: "Why a tool is or is not in a session's set, naming the rule and the event responsible."}
	OpExplainBatch = Operation{Name: "explain-batch", Subject: "session.explain.batch", Methods: []string{post}, Path: "/v1/sessions/{session}/explain",
		Summary: "Explain many tools in one request: for each of up to 100 tools, why it is or is not in the session's set, in request order."}
	OpResume = Operation{Name: "resume", Subject: "session.resume", Methods: []string{post}, Path: "/v1/sessions/{session}/resume", Write: true,
		Summary: "Resume after a crash: verify the checkpoint's contract hash, restore the loaded deferred tools or say why not."}
	OpBeginTurn = Operation{Name: "turn-begin", Subject: "turn.begin", Methods: []string{post}, Path: "/v1/sessions/{session}/turn/begin", Write: true,
		Summary: "Begin the next turn: resolve and freeze the session's tools."}
	OpDiscover = Operation{Name: "turn-discover", Subject: "turn.discover", Methods: []string{post}, Path: "/v1/sessions/{session}/turn/discover", Write: true,
		Summary: "tool_search in the open turn: load deferred tools and return their schemas."}
	OpDispatch = Operation{Name: "turn-dispatch", Subject: "turn.dispatch", Methods: []string{post}, Path: "/v1/sessions/{session}/turn/dispatch", Records: true,
		Summary: "The provider request: in a turn its frozen tools (frozen true), outside one the live resolution (frozen false, no no_turn error); records its resident/deferred classification."}
	OpInspect = Operation{Name: "turn-inspect", Subject: "turn.inspect", Methods: []string{get}, Path: "/v1/sessions/{session}/turn/dispatch",
		Summary: "The classification recorded by the session's last dispatch in this engine process."}
	OpCallCheck = Operation{Name: "turn-call-check", Subject: "turn.callcheck", Methods: []string{post}, Path: "/v1/sessions/{session}/turn/call-check",
		Summary: "Before executing a tool call: may the tool run now in the open turn, for its channel? The decision (allow/ask/deny), the rule that made it and the turn's resolved tool; a refusal is callable false, not an error. Writes nothing."}
	OpCheckpoint = Operation{Name: "turn-checkpoint", Subject: "turn.checkpoint", Methods: []string{post}, Path: "/v1/sessions/{session}/checkpoint", Write: true,
		Summary: "Record a checkpoint (safe point) of the open turn."}
	OpEndTurn = Operation{Name: "turn-end", Subject: "turn.end", Methods: []string{post}, Path: "/v1/sessions/{session}/turn/end", Write: true,
		Summary: "End the open turn at a safe point: one TurnEnded event carrying the checkpoint."}
	OpDelete = Operation{Name: "session-delete", Subject: "session.delete", Methods: []string{del}, Path: "/v1/sessions/{session}", Write: true,
		Summary: "Delete a session for good: a SessionDeleted closes it; writes and every read but history answer 410 deleted, and the id starts no new session. erase=true (the erase channel only) also purges its events but the SessionDeleted, leaving an audit record without personal data; history then answers 410 too."}
	OpCompact = Operation{Name: "session-compact", Subject: "session.compact", Methods: []string{post}, Path: "/v1/sessions/{session}/compact", Write: true, Purges: true,
		Summary: "Compact a session (the erase channel only): one SessionCompacted that folds to the same state replaces its events, which are purged below it, leaving an audit record without personal data; refused in an open turn and after a delete. History starts with the SessionCompacted entry."}
	OpSessions = Operation{Name: "sessions", Subject: "sessions.list", Methods: []string{get}, Path: "/v1/sessions",
		Summary: "List the sessions that have a view."}
	OpRegistry = Operation{Name: "registry", Subject: "registry.info", Methods: []string{get}, Path: "/v1/registry",
		Summary: "The live registry: version, tools, defaults, resident and deferred tools, presets, profiles."}
	OpBudget = Operation{Name: "budget", Subject: "registry.budget", Methods: []string{get}, Path: "/v1/budget",
		Summary: "The default session's per-turn token table with and without deferral, by a real BPE tokenizer."}
	OpRegistryDiff = Operation{Name: "registry-diff", Subject: "registry.diff", Methods: []string{post}, Path: "/v1/registry/diff",
		Summary: "Compare a candidate registry with the live one before pushing it: tools added, removed and changed, presets and profiles whose expansion changes, the sessions whose tools prefix would change (prompt-cache misses) and the checkpoints that would lose tools on resume. Counts every event stored before the request: it waits (10 s at most) for the views to fold the log up to its last event, and answers 503 when they stay behind. Writes nothing."}
)

// Operations returns the API's operations in a fixed order (a fresh copy).
func Operations() []Operation {
	ops := []Operation{OpAppend, OpIntent, OpResolve, OpHistory, OpExplain, OpExplainBatch, OpResume, OpBeginTurn, OpDiscover,
		OpDispatch, OpInspect, OpCallCheck, OpCheckpoint, OpEndTurn, OpDelete, OpCompact, OpSessions, OpRegistry, OpBudget, OpRegistryDiff}
	for i := range ops {
		ops[i].Methods = append([]string(nil), ops[i].Methods...)
	}
	return ops
}

// Empty is the request of operations that take no parameters
// (sessions.list, registry.info, registry.budget).
type Empty struct{}
