package api

import (
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// Requests and replies are wire's, or the service's where they carry
// command objects or engine results (service.Requests answers every
// operation). Every request is one JSON object; over NATS it is the
// message body (the session id included), over HTTP the session id and
// tool come from the path, the other fields from the JSON body (POST) or
// the query string (GET: ?profile=coder&min_seq=7; a structured value
// such as override is JSON in the parameter). Unknown fields are
// refused. "actor" is a fallback: the Engine-Actor header wins. The
// names below are the ones this package's callers and tests use.
type (
	AppendRequest      = service.AppendRequest
	AppendResponse     = wire.AppendReply
	IntentRequest      = wire.IntentRequest
	SessionView        = wire.Session
	ResolveRequest     = wire.ResolveRequest
	HistoryRequest     = wire.HistoryRequest
	HistoryResponse    = wire.HistoryOf[*service.Command]
	HistoryEntry       = wire.HistoryEntryOf[*service.Command]
	ExplainRequest     = wire.ExplainRequest
	ResumeRequest      = wire.ResumeRequest
	ResumeResponse     = wire.ResumeReply
	BeginTurnRequest   = wire.BeginTurnRequest
	DiscoverRequest    = wire.DiscoverRequest
	DispatchRequest    = wire.DispatchRequest
	DispatchRecord     = wire.DispatchRecord
	TurnRequest        = wire.TurnRequest
	CheckpointResponse = wire.CheckpointReply
	SessionsResponse   = wire.SessionList
	RegistryInfo       = wire.RegistryInfo
	Empty              = wire.Empty
	Override           = wire.Override
	Command            = service.Command
)

// Bounds of history pages and appends: wire's.
const (
	MaxHistoryPage = wire.MaxHistoryPage
	// MaxCommands bounds the commands of one append request.
	MaxCommands = wire.MaxCommands
)

// DecodeCommand decodes one command object (service.DecodeCommand); its
// errors match ErrBadRequest.
var DecodeCommand = service.DecodeCommand

// EncodeCommand encodes a payload as a command object
// (service.EncodeCommand).
var EncodeCommand = service.EncodeCommand

// DefaultEraseChannel is the channel allowed to erase sessions when
// Config.EraseChannel is empty (service.DefaultEraseChannel).
const DefaultEraseChannel = service.DefaultEraseChannel

// OtherChannels is the channel label of requests from unknown HTTP
// channels in Config.Observe (and so in /metrics): service.OtherChannels.
const OtherChannels = service.OtherChannels
