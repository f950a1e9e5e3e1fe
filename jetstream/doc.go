// Package jetstream is the engine's log on NATS JetStream, and the only
// package of the engine that speaks to NATS for it.
//
// One stream holds every session's events, one subject per session
// (<prefix>.events.<session>). Appends carry the per-subject
// expected-last-sequence header (optimistic concurrency) and the event's
// ULID as Nats-Msg-Id (dedupe of retried publishes). A multi-event append is
// one atomic batch (all or nothing). Reads of one session use batched direct
// gets, never a consumer per read; a whole-stream replay uses an ordered
// consumer; projections use one durable pull consumer.
//
// The package also starts the embedded nats-server (the default deployment)
// and connects to an external server or cluster by URL with credentials
// and TLS.
package jetstream
