// Package api is the engine's transports: a NATS micro service
// (StartMicro) and an HTTP/JSON gateway (Handler) over the same operations
// of package service. One operation table over wire's routes
// (Operations) drives the two transports; the Go client (package client)
// calls the same routes with wire's request and reply types, and the
// service decides what an error means (service.KindOf), mapped here to
// wire's codes.
//
// The protocol (operations, safe retries, errors, history pages,
// formats) is package wire's documentation; docs/api.md lists every
// operation with its request and reply fields.
//
// # Channels and trust
//
// Every event records the channel and actor that wrote it. Over NATS the
// channel is the subject token, so NATS permissions verify it: a channel's
// user may publish only to tools.api.<channel>.>. The actor is the
// Engine-Actor header (or the body's "actor"). Over HTTP with
// Config.Tokens the channel is the bearer token's; without tokens it is
// the Engine-Channel header (default "http"), which the engine cannot
// verify (loopback only). The engine replies over NATS only to inbox
// subjects (_INBOX., _INBOX_<user>.), and runs at most
// Config.MaxInFlightPerChannel requests per channel at once (429 busy).
// Without tokens only the default HTTP channel and Config.HTTPChannels
// have a budget of their own: every other Engine-Channel shares one, and
// counts as channel "other" in Config.Observe.
package api
