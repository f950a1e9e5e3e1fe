// Package client is a light Go client of the tool-configuration engine's
// API, over HTTP or over NATS, for backend authors. Beside the standard
// library it imports nats.go, github.com/goccy/go-json (DecodeReply) and
// the engine's wire, intent and internal/clip packages, which import only
// the standard library; never the engine, its embedded nats-server or its tokenizer,
// so a program built with it stays small.
//
// One method per operation of docs/api.md, named after it (turn-begin is
// TurnBegin, session-delete is SessionDelete), each
//
//	func (c *Client) Op(ctx context.Context, req OpRequest) (OpReply, error)
//
// with the session id in the request; sessions, registry and budget take
// no request. History reads every page of the history operation,
// HistoryPage one. The engine listens for HTTP on
// http://127.0.0.1:7420 by default (DefaultURL) and for NATS on
// nats://127.0.0.1:4222 (DefaultNATSURL); over NATS a request goes to
// tools.api.<channel>.<op> and the channel is the subject token.
//
//	c := client.NewHTTP("")                      // DefaultURL
//	r, err := c.Append(ctx, client.AppendRequest{Session: "s1", Commands: []client.Command{client.Enable()}})
//	v, err := c.Resolve(ctx, client.ResolveRequest{Session: "s1", MinSeq: r.LastSeq})
//	fmt.Println(v.Tools)
//
// Errors the engine returns are *Error, with the stable Code of
// docs/api.md; errors.Is matches them against ErrConflict, ErrNoTurn,
// ErrInvalid, ErrNotFound, ErrUnavailable and the other sentinels by
// code. Transport failures (connection refused, timeouts) are returned
// wrapped as they come. A Client is safe for concurrent use.
package client
