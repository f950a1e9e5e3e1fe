// Package wire is the engine API's vocabulary, shared by the server
// (package api), the Go client (package client) and the CLI: the
// operations (name, NATS subject, HTTP route), the request and reply
// types with their JSON names, the error codes and the error envelope.
// It imports the standard library only (and of the engine the intent
// and internal/clip leaves, themselves standard library only), so that a
// client built on it carries none of the engine.
//
// The JSON these types write is the API's (docs/api.md): the engine's
// tests check the api package's replies against them byte for byte.
//
// # Operations
//
// Over NATS, a request to <prefix>.<channel>.<subject> (prefix "tools.api"
// by default) with the request object as JSON body, the session id
// included. Over HTTP, the route below; the session id and tool come from
// the path, the other fields from the JSON body (POST) or the query string
// (GET).
//
//	operation        NATS subject suffix   HTTP route
//	append           events.append         POST /v1/sessions/{session}/events
//	intent           session.intent        GET  /v1/sessions/{session}
//	resolve          session.resolve       GET|POST /v1/sessions/{session}/resolve
//	history          session.history       GET  /v1/sessions/{session}/history?until=SEQ|RFC3339
//	explain          session.explain       GET  /v1/sessions/{session}/explain/{tool}
//	resume           session.resume        POST /v1/sessions/{session}/resume
//	turn-begin       turn.begin            POST /v1/sessions/{session}/turn/begin
//	turn-discover    turn.discover         POST /v1/sessions/{session}/turn/discover
//	turn-dispatch    turn.dispatch         POST /v1/sessions/{session}/turn/dispatch
//	turn-inspect     turn.inspect          GET  /v1/sessions/{session}/turn/dispatch
//	turn-checkpoint  turn.checkpoint       POST /v1/sessions/{session}/checkpoint
//	turn-end         turn.end              POST /v1/sessions/{session}/turn/end
//	sessions         sessions.list         GET  /v1/sessions
//	registry         registry.info         GET  /v1/registry
//	budget           registry.budget       GET  /v1/budget
//
// The request and reply types are this package's (the server's reply
// types are the engine's, with the same JSON: docs/api.md lists every
// field). Every field name is snake_case.
//
// turn-discover takes the model's tool_search call as it was written, in
// "input" (exact "names", a keyword "query", a "regex", "max_results"),
// and answers unknown names and unmatched searches softly (not_found,
// note); "output" is the tool result to hand back to the model in the
// provider's form, and "call_id" goes into an openai-native
// tool_search_output. Every operation with a "provider" takes anthropic,
// openai, anthropic-native, anthropic-native-server or openai-native.
//
//	curl -X POST 127.0.0.1:7420/v1/sessions/s1/turn/discover \
//	  -d '{"input":{"query":"github create issue","max_results":3},"provider":"anthropic-native"}'
//
// Commands are JSON objects with a "type" (see service.DecodeCommand), e.g.
//
//	curl -X POST 127.0.0.1:7420/v1/sessions/s1/events -H 'Content-Type: application/json' \
//	  -d '{"commands":[{"type":"ToolsToggled","enabled":true},{"type":"ToolDisabled","name":"bash"}]}'
//	nats req tools.api.web.events.append \
//	  '{"session":"s1","expected_seq":0,"commands":[{"type":"PresetChosen","preset":"research"}]}'
//
// # Safe retries
//
// An append's reply names the stored events' ids ("event_ids", ULIDs)
// beside their sequences. To retry an append whose reply was lost (a
// timeout, the engine died, the connection dropped) without writing it
// twice, give it an idempotency key, as the Idempotency-Key header (HTTP,
// or a NATS message header) or the body's "event_id": any string of 1 to
// 255 bytes of printable UTF-8 the client generates (a UUID, a ULID,
// "order-42"). Keys are opaque and case-sensitive, as in the IETF
// Idempotency-Key draft: "abc" and "ABC" are two keys. The stored events'
// ids derive from the session and the key: the first 16 bytes of
// SHA-256("toolintent/engine idempotency key v1" 0x00 session 0x00 key)
// written as a ULID, then that 128-bit number plus 1, 2, ... for further
// events (wire.IdempotencyEventIDs computes them). A retry with the same
// key and the same commands returns the original first_seq, last_seq and
// event_ids with "duplicate":true and writes nothing, however long after
// the first call (the key's entry in the <PREFIX>_KEYS bucket says where
// its events are; the log's own dedupe window is 2 minutes). The same key
// with other commands is refused, idempotency_key_mismatch 422, naming
// the commands of both; a key belongs to the session and channel that
// first used it (elsewhere: idempotency_key_in_use 422). A key longer
// than 255 bytes or holding a control character, or a header and a field
// that differ, is refused (invalid 400).
//
//	curl -X POST localhost:8080/v1/sessions/s1/events -H 'Idempotency-Key: 3f1c2a9e-7b4d-4c11-9a60-0e5b8f2d6c71' \
//	  -d '{"commands":[{"type":"ToolDisabled","name":"bash"}]}'
//	nats req tools.api.web.events.append -H 'Idempotency-Key:3f1c2a9e-7b4d-4c11-9a60-0e5b8f2d6c71' \
//	  '{"session":"s1","commands":[{"type":"ToolDisabled","name":"bash"}]}'
//
// # Errors
//
// Every error reply is
//
//	{"error":{"code":"...","message":"...","expected":N,"actual":N}}
//
// with a stable code, the HTTP status, and a message that names the bad
// value: conflict 409 (with expected and actual sequences), no_turn 409,
// invalid 400, not_found 404, method_not_allowed 405, too_large 413,
// unavailable 503 (JetStream or NATS cannot serve now: retry), internal
// 500. Over NATS the status is the micro error code
// (Nats-Service-Error-Code), the code is in the Engine-Error-Code header,
// and the envelope is the body.
//
// # History pages
//
// session.history answers one page: the entries after after_seq, at most
// limit (DefaultHistoryPage, at most MaxHistoryPage, and about
// MaxHistoryPageBytes of JSON); more and next_after_seq say where the
// next page starts. client.Client.History reads every page.
//
// # Formats
//
// Bodies are JSON; a request may be msgpack (Content-Type:
// application/msgpack), checked against depth, element and length
// bounds before it is decoded; a reply is msgpack when the request says
// Accept: application/msgpack, with the same keys as the JSON. HTTP POST
// bodies of any other type are refused (415).
package wire
