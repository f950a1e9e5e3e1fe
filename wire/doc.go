// Package wire is the engine API's vocabulary, shared by the server
// (package api), the Go client (package client) and the CLI: the
// operations (name, NATS subject, HTTP route), the request and reply
// types with their JSON names, the error codes and the error envelope.
// It imports the standard library only, so that a client built on it
// carries none of the engine.
//
// The JSON these types write is the API's (docs/api.md): the engine's
// tests check the api package's replies against them byte for byte.
package wire
