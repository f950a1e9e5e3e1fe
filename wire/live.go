package wire

// Live subscriptions: a session's, or every session's, events as
// they are appended. Over HTTP a GET answered with Server-Sent Events
// (text/event-stream), one per event:
//
//	id: <stream sequence>
//	event: <event type>
//	data: <LiveEvent as one line of JSON>
//
// with a comment line (": heartbeat") every LiveHeartbeat when nothing
// happens. A client resumes with the Last-Event-ID header (or the
// after_seq query parameter) set to the last sequence it saw: the stream
// starts with the event after it. Over NATS a request to the operation's
// subject starts the same stream on the request's reply inbox (see
// LiveHeader).

import "time"

// LiveMessageParam is the query parameter of an HTTP live stream that
// sends every event as the SSE default type "message" (no event: line):
// ?message=true, for a browser EventSource whose onmessage sees only that
// type. The event's type stays in data's "type"; the stream's end and
// error come as data {"type":"end"} and {"type":"error","error":{...}}.
const LiveMessageParam = "message"

// The SSE event types of a live stream besides the events' own: the end
// of a watched session's stream after its SessionDeleted, and the error
// that ends a stream on a read failure.
const (
	LiveEndEvent   = "end"
	LiveErrorEvent = "error"
)

// MIMEEventStream is the media type of a live stream's HTTP reply.
const MIMEEventStream = "text/event-stream"

// HeaderLastEventID is the SSE resume header: the sequence of the last
// event a client saw.
const HeaderLastEventID = "Last-Event-ID"

// LiveHeartbeat is how often an idle live stream sends a heartbeat (an
// SSE comment line over HTTP, a heartbeat message over NATS).
const LiveHeartbeat = 15 * time.Second

// LiveHeader names, on each message of a NATS live stream, what the
// message is: LiveEventMsg (the body is a LiveEvent), LiveHeartbeatMsg
// (no body; the stream is alive and nothing happened) or LiveEndMsg (the
// stream ended: the body is an error envelope when it ended on an error,
// empty when the watched session was deleted or the engine stopped).
const LiveHeader = "Engine-Live"

// Values of LiveHeader.
const (
	LiveEventMsg     = "event"
	LiveHeartbeatMsg = "heartbeat"
	LiveEndMsg       = "end"
)

// The live operations. They stream, so they are not in Operations (whose
// replies are one JSON document); LiveOperations lists them.
var (
	OpLive = Operation{Name: "session-live", Subject: "session.live", Methods: []string{get}, Path: "/v1/sessions/{session}/events/live",
		Summary: "Follow a session's events live as Server-Sent Events (id: sequence, event: type, data: the event as JSON), from after_seq or Last-Event-ID on; ends after the session's SessionDeleted."}
	OpLiveAll = Operation{Name: "events-live", Subject: "events.live", Methods: []string{get}, Path: "/v1/events/live",
		Summary: "Follow every session's events live, in stream order, as Server-Sent Events, from after_seq or Last-Event-ID on."}
)

// LiveOperations returns the live (streaming) operations (a fresh copy).
func LiveOperations() []Operation {
	ops := []Operation{OpLive, OpLiveAll}
	for i := range ops {
		ops[i].Methods = append([]string(nil), ops[i].Methods...)
	}
	return ops
}

// LiveRequest starts a live stream: Session ("" on events-live: every
// session) from the event after AfterSeq on.
type LiveRequest struct {
	Session  string `json:"session,omitempty"`
	AfterSeq uint64 `json:"after_seq,omitempty"`
}

// LiveEvent is one event of a live stream: the event's reference (as in
// a history entry), its session, and its payload as a command object (as
// history's payload), or Error when the engine cannot decode it.
type LiveEvent = LiveEventOf[Command]

// LiveEventOf is a LiveEvent whose payload is a P: a client decodes it as
// a Command, the engine sends the decoded event.
type LiveEventOf[P any] struct {
	EventRef
	Session string `json:"session"`
	Payload P      `json:"payload,omitempty"`
	Error   string `json:"error,omitempty"`
}
